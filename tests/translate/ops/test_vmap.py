"""torch.vmap in forward: its batching decomposed by torch.export, the scalar operands it wraps as
``_to_copy(2, dtype=...)`` translated as constants (``to`` in ``translate/ops/misc.py``)."""

import pytest
import torch
from torch.export import Dim

from exportcheck import check_export


def _summed(a, b):
    return (a * b + 1).sum(dim=0)


class Vmapped(torch.nn.Module):
    def __init__(self, form):
        super().__init__()
        self.form = form

    def forward(self, x, y):
        if self.form == "rows":
            return torch.vmap(_summed)(x, y)
        if self.form == "scalar operand":
            return torch.vmap(_summed, in_dims=(0, None))(x, y[0])
        if self.form == "int operand":
            return torch.vmap(lambda a: a * 2 + 3)(x) * y
        return torch.vmap(torch.vmap(lambda a, b: a * b - 0.5))(x, y)  # nested: x, y 2-D


@pytest.mark.parametrize("form", ["rows", "scalar operand", "int operand",
                                  pytest.param("nested", marks=pytest.mark.slow)])
def test_vmap_in_forward(form):
    batch = Dim("batch")
    shape = (6, 3) if form == "nested" else (6,)
    check_export(Vmapped(form), (torch.randn(shape), torch.randn(shape)), ({0: batch}, {0: batch}),
                 sizes=[{"batch": 2}, {"batch": 11}])


def test_vmap_of_a_matrix_function_with_the_rows_dynamic():
    class Outer(torch.nn.Module):
        def forward(self, x, y):
            return torch.vmap(lambda a, b: torch.outer(a, b) * 2.0)(x, y)

    batch = Dim("batch")
    check_export(Outer(), (torch.randn(3, 4), torch.randn(3, 5)), ({0: batch}, {0: batch}),
                 sizes=[{"batch": 2}, {"batch": 7}])
