"""A distribution built inside the model (transformers' BLT patcher: ``Categorical(logits=...).entropy()``)
exports with its argument checks off; one the user asks to check keeps them."""

from __future__ import annotations

import torch

import onnxport
from exportcheck import check_export


class Entropy(torch.nn.Module):
    def __init__(self, validate_args=None):
        super().__init__()
        self.proj = torch.nn.Linear(8, 5)
        self.validate_args = validate_args

    def forward(self, x):  # x: [b, t, 8] -> entropies [b, t], log-probabilities of class 2 [b, t]
        d = torch.distributions.Categorical(logits=self.proj(x), validate_args=self.validate_args)
        return d.entropy(), d.log_prob(torch.full(x.shape[:-1], 2, dtype=torch.long))


def test_a_distributions_argument_checks_do_not_stop_the_export():
    check_export(Entropy(), (torch.randn(2, 7, 8),), {"x": {0: "b", 1: "t"}})
    assert torch.distributions.Distribution._validate_args is __debug__


def test_checks_the_user_asked_for_are_kept():
    seen = []

    class Spy(Entropy):
        def forward(self, x):
            D = torch.distributions.Distribution
            seen.append((D(validate_args=True)._validate_args, D()._validate_args))
            return super().forward(x)

    try:
        onnxport.to_onnx(Spy(validate_args=True), (torch.randn(2, 7, 8),), dynamic_shapes={"x": {0: "b", 1: "t"}})
    except onnxport.ExportError:
        pass  # torch 2.13 refuses the checks' branch on data; 2.15 exports them
    assert seen[0] == (True, False)  # while torch.export traces (eager runs after it keep the default)
