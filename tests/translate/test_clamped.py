"""Slices with a constant bound over a dynamic axis (``x[:2]``), whose size torch.export reads as the
constant, written into and computed from: right at size 1, where the slice clamps
(``translate/clamped.py``, ``copy`` in ``translate/ops/misc.py``)."""

import pytest
import torch
from torch.export import Dim

from exportcheck import Fn, check_export


def fill_corner(x):
    x = x.clone()
    x[:2, :3] = 1
    return x


def add_into(x):
    x = x.clone()
    x[:2] += 1
    return x


def write_row(x):
    y = x * 1
    y[:2, 1:4] = torch.tensor([1.0, 2.0, 3.0])
    return y


def computed_from(x):
    return x[:2] * 2 + x[:2].sum(0)


def last_rows(x):
    x = x.clone()
    x[-2:] = 0
    return x


@pytest.mark.parametrize("fn", [fill_corner, add_into, write_row, computed_from, last_rows],
                         ids=lambda f: f.__name__)
def test_slice_with_a_constant_bound_is_right_at_batch_1(fn):
    result = check_export(Fn(fn), (torch.randn(4, 5),), {"x": {0: Dim("b")}},
                          sizes=[{"b": 1}, {"b": 2}, {"b": 3}, {"b": 9}])
    report = result.validate(sizes=[{"b": 1}], values=[])
    assert report.ok and any(c.shape and c.shape[0] == 1 for c in report.checks if c.ok), report


def test_a_clamped_size_is_named_on_the_output():
    result = check_export(Fn(computed_from), (torch.randn(4, 5),), {"x": {0: Dim("b")}})
    assert [str(d) for d in result.model.graph.outputs[0].shape] == ["Min(2, b)", "5"]


def test_a_promised_minimum_keeps_the_size_constant():
    result = check_export(Fn(computed_from), (torch.randn(4, 5),), {"x": {0: Dim("b", min=2)}})
    assert [str(d) for d in result.model.graph.outputs[0].shape] == ["2", "5"]


W = torch.randn(5, 2)


def projected(x):
    y = x[:2] @ W  # [min(2, b), 2]: its last 2 is not the clamp
    return y, torch.zeros(3, 2) + y.sum(0)


def written_over_equal_sizes(x):
    y = x[:2] @ W
    d = y + y.T  # [2, 2] at every b (at b = 1: [1, 2] + [2, 1])
    return d.copy_(x[:2, :2])  # [min(2, b), 2] broadcast into it


def test_a_dim_equal_to_the_clamped_constant_keeps_its_size():
    result = check_export(Fn(projected), (torch.randn(4, 5),), {"x": {0: Dim("b")}})
    assert [[str(d) for d in v.shape] for v in result.model.graph.outputs] == [["Min(2, b)", "2"], ["3", "2"]]


def test_a_clamped_slice_written_into_a_value_of_the_constant_size_is_broadcast():
    check_export(Fn(written_over_equal_sizes), (torch.randn(4, 5),), {"x": {0: Dim("b")}},
                 sizes=[{"b": 1}, {"b": 3}])
