"""A ``def`` inside a rewritten loop or branch binds its name there (``rewrite.names``): Grounding DINO's
decoder loop defines ``create_custom_forward`` in a branch taken only under gradient checkpointing;
read as a name taken from before the loop, the rewritten model raised ``NameError``."""

import ast

import torch

from exportcheck import check_export
from onnxport.rewrite.names import read_before_write, reads_first


class CheckpointedLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])
        self.gradient_checkpointing = False

    def forward(self, x):
        for layer in self.layers:
            if x.shape[1] % 2 != 0:  # a branch on a remainder: the loop is rewritten
                x = x * 2
            if self.gradient_checkpointing and self.training:

                def create_custom_forward(module):
                    def custom_forward(*inputs):
                        return module(*inputs)

                    return custom_forward

                x = torch.utils.checkpoint.checkpoint(create_custom_forward(layer), x, use_reentrant=False)
            else:
                x = layer(x)
        return x


def test_a_def_binds_its_name_before_the_lines_that_call_it():
    body = ast.parse("def f():\n    return 1\ny = f() + x\n").body
    assert read_before_write(body) == {"x"}
    assert reads_first("f", body) is False
    assert reads_first("g", ast.parse("def f(m=g):\n    return m\n").body) is True  # a default is read there


def test_a_loop_whose_branch_defines_a_function_exports():
    check_export(CheckpointedLayers().eval(), (torch.randn(2, 5, 4),), {"x": {0: "batch", 1: "seq"}},
                 sizes=[{"batch": 1, "seq": 6}, {"batch": 3, "seq": 7}], rewrite_control_flow=True)
