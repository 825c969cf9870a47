"""A condition false at one size beyond the sizes checked one by one (``x.shape[1] != 5000``, above 4096) is
found there: the sizes where a comparison of the size with a polynomial of it changes are checked too
(``guards.conditions._roots_beyond``), where the sizes spread beyond would step over it and read it as
proved, and the export would take one side everywhere."""

import pytest
import torch

import onnxport
from exportcheck import check_export


class IfStatement(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] != 5000:
            return x * 2
        return x * 3


class Conditional(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.shape[1] != 5000 else x * 3


DYNAMIC = {"x": {0: "batch", 1: "time"}}


def test_a_branch_at_one_far_size_is_exported_on_both_sides():
    r = check_export(IfStatement(), (torch.randn(2, 16),), DYNAMIC, values=[],
                     sizes=[{"batch": 1, "time": 5000}, {"batch": 2, "time": 4999}, {"batch": 1, "time": 5001}])
    assert not r.constraints


def test_a_conditional_expression_at_one_far_size_is_refused_naming_it():
    with pytest.raises(onnxport.SpecializationError) as info:
        onnxport.to_onnx(Conditional(), (torch.randn(2, 16),), dynamic_shapes=DYNAMIC)
    assert "time != 5000" in str(info.value)
