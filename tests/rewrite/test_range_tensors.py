"""A tensor built from a Python ``range`` over a size (``torch.tensor(list(range(n))[::-1])``, the
form of CPM-Ant's left-padding mask) fixes ``n`` at the example when captured as written; the
rewrite turns it into ``torch.arange`` (flipped where the list is reversed), and the ONNX model is
compared with eager PyTorch at several lengths."""

from __future__ import annotations

import ast

import pytest
import torch

import onnxport
from exportcheck import check_export
from onnxport.rewrite.range_tensors import range_of


class LeftPadMask(torch.nn.Module):
    """Positions counted from the right, compared with each row's length."""

    def forward(self, x, lengths):
        n = x.shape[1]
        back = torch.tensor(list(range(n))[::-1], device=x.device)[None, :].repeat(x.shape[0], 1)
        mask = back < lengths[:, None]
        ahead = torch.tensor([i for i in range(1, n + 1)], dtype=torch.float32)
        return x * mask + ahead


def test_a_range_over_a_size_becomes_arange():
    model = LeftPadMask()
    x, lengths = torch.randn(2, 7), torch.tensor([3, 7])
    with pytest.warns(UserWarning, match="rewrote"):
        result = check_export(model, (x, lengths), {"x": {0: "batch", 1: "seq"}, "lengths": {0: "batch"}},
                              inputs=[(torch.randn(3, 11), torch.tensor([0, 5, 11])),
                                      (torch.randn(1, 2), torch.tensor([1]))], values=[])
    assert result.model_proto.graph.input[0].type.tensor_type.shape.dim[1].dim_param == "seq"


def test_the_captured_form_fixes_the_size_without_the_rewrite():
    with pytest.raises(onnxport.ExportError, match="seq"):
        onnxport.to_onnx(LeftPadMask(), (torch.randn(2, 7), torch.tensor([3, 7])),
                         dynamic_shapes={"x": {0: "batch", 1: "seq"}, "lengths": {0: "batch"}},
                         rewrite_control_flow=False)


@pytest.mark.parametrize("source, reverse", [
    ("range(n)", False), ("list(range(1, n, 2))", False), ("tuple(range(n))", False),
    ("[i for i in range(n)]", False), ("list(range(n))[::-1]", True), ("reversed(range(n))", True),
    ("list(reversed(range(n)))[::-1]", False),
])
def test_the_forms_read_as_a_range(source, reverse):
    found = range_of(ast.parse(source, mode="eval").body)
    assert found is not None and found[1] is reverse


@pytest.mark.parametrize("source", ["[i * 2 for i in range(n)]", "list(range(n))[::2]", "list(x)", "sorted(range(n))"])
def test_other_lists_are_not(source):
    assert range_of(ast.parse(source, mode="eval").body) is None
