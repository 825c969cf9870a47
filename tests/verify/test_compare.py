"""The comparison at the heart of validate(): each way an output can be wrong is a failure, each
way it can be right a pass. And the report: nothing compared is not a success."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from onnxport.verify import TOLERANCES, Check, ValidationReport, compare, to_numpy


def check(expected: torch.Tensor, got: np.ndarray, **kwargs) -> tuple[float, float, bool, str]:
    return compare(to_numpy(expected), got, expected.dtype, **kwargs)


def test_equal_outputs_pass():
    x = torch.randn(3, 4)
    assert check(x, x.numpy().copy())[2]
    i = torch.arange(6).reshape(2, 3)
    assert check(i, i.numpy().copy())[2]


@pytest.mark.parametrize("eager,onnx", [
    (torch.int64, np.int32), (torch.int32, np.int64), (torch.float32, np.float64), (torch.float64, np.float32),
    (torch.bool, np.float32), (torch.float32, np.bool_), (torch.int64, np.float32), (torch.uint8, np.int8),
])
def test_a_different_dtype_fails_even_with_equal_values(eager, onnx):
    expected = torch.ones(2, 3, dtype=eager)
    ok, note = check(expected, np.ones((2, 3), dtype=onnx))[2:]
    assert not ok and "dtype" in note


@pytest.mark.parametrize("got_shape", [(6,), (3, 2), (1, 2, 3), (2, 3, 1)])
def test_a_different_shape_with_the_same_elements_fails(got_shape):
    expected = torch.zeros(2, 3)
    ok, note = check(expected, np.zeros(got_shape, np.float32))[2:]
    assert not ok and "shape" in note


def test_nan_on_one_side_only_fails_both_ways():
    e = torch.tensor([1.0, float("nan"), 3.0])
    assert check(e, np.array([1.0, np.nan, 3.0], np.float32))[2]
    assert not check(e, np.array([1.0, 2.0, 3.0], np.float32))[2]
    assert not check(torch.tensor([1.0, 2.0, 3.0]), np.array([1.0, np.nan, 3.0], np.float32))[2]


def test_infinities_equal_only_with_the_same_sign():
    e = torch.tensor([float("inf"), -1.0])
    assert check(e, np.array([np.inf, -1.0], np.float32))[2]
    assert not check(e, np.array([-np.inf, -1.0], np.float32))[2]
    assert not check(e, np.array([3.0e38, -1.0], np.float32))[2]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_integers_off_by_one_fail(dtype):
    e = torch.tensor([5, 7, 9], dtype=dtype)
    got = e.numpy().copy()
    got[1] += 1
    max_abs, _, ok, _ = check(e, got)
    assert not ok and max_abs == 1


def test_bools_must_be_equal():
    e = torch.tensor([True, False])
    assert not check(e, np.array([True, True]))[2]


def test_float32_tolerance_is_1e_4_absolute_plus_1e_3_relative():
    """Pins the tolerance: a looser one lets wrong models pass, a tighter one fails right ones."""
    assert TOLERANCES[torch.float32] == (1e-4, 1e-3)
    one = torch.tensor([1.0])
    assert check(one, np.array([1.0 + 9e-4], np.float32))[2]  # within 1e-4 + 1e-3
    assert not check(one, np.array([1.0 + 2e-3], np.float32))[2]
    small = torch.tensor([1e-3])
    assert check(small, np.array([1e-3 + 9e-5], np.float32))[2]
    assert not check(small, np.array([1e-3 + 2e-4], np.float32))[2]


def test_float64_and_float16_tolerances_are_tighter_and_looser():
    e64 = torch.tensor([1.0], dtype=torch.float64)
    assert not check(e64, np.array([1.0 + 1e-5]))[2]
    assert check(e64, np.array([1.0 + 1e-7]))[2]
    e16 = torch.tensor([1.0], dtype=torch.float16)
    assert check(e16, np.array([1.005], np.float16))[2]
    assert not check(e16, np.array([1.05], np.float16))[2]


def test_scale_widens_only_the_absolute_tolerance():
    e = torch.tensor([0.0, 100.0])
    got = np.array([5e-4, 100.0], np.float32)
    assert not check(e, got)[2]
    assert check(e, got, scale=10.0)[2]
    assert not check(e, np.array([0.0, 100.5], np.float32), scale=10.0)[2]


def test_peak_widens_the_absolute_tolerance_to_a_fraction_of_the_largest_value():
    e = torch.tensor([0.5, 5e4])
    got = np.array([0.55, 5e4], np.float32)  # 0.05 off where large terms cancel to a small value
    assert not check(e, got, scale=10.0)[2]  # atol 1e-3
    assert check(e, got, scale=10.0, peak=0.01)[2]  # atol 0.01 * 1e-3 * 5e4 = 0.5
    assert not check(e, np.array([1.5, 5e4], np.float32), scale=10.0, peak=0.01)[2]
    assert not check(e, got, peak=0.01, atol=1e-4)[2]  # an explicit atol is taken as is


def test_explicit_tolerances_override_the_dtype_defaults():
    e = torch.tensor([1.0])
    assert check(e, np.array([1.05], np.float32), atol=0.1)[2]
    assert not check(e, np.array([1.0 + 5e-4], np.float32), atol=0.0, rtol=1e-4)[2]


def test_empty_outputs_of_the_same_shape_pass_of_another_shape_fail():
    assert check(torch.zeros(0, 3), np.zeros((0, 3), np.float32))[2]
    assert not check(torch.zeros(0, 3), np.zeros((3, 0), np.float32))[2]


def row(ok: bool, rejected: bool = False) -> Check:
    return Check("sizes 1", "n=2", "output", (2,), 0.0, 0.0, ok, "", "minimum", rejected)


def test_a_report_with_nothing_compared_is_not_ok():
    assert not ValidationReport(()).ok
    assert not ValidationReport((row(False, rejected=True),)).ok  # every set refused by eager: nothing compared
    assert ValidationReport((row(True), row(False, rejected=True))).ok
    assert not ValidationReport((row(True), row(False))).ok
