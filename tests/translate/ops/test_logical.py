"""Bitwise / logical operators and float predicates against eager PyTorch (tests ops/logical.py)."""

import pytest
import torch

from exportcheck import check_export, Fn, Fn2

DYN2 = {"a": {0: "batch", 1: "n"}, "b": {0: "batch", 1: "n"}}


def make(dtype, shape=(3, 4)):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype == torch.int64:
        return torch.randint(-8, 9, shape)
    if dtype == torch.int32:
        return torch.randint(-8, 9, shape, dtype=torch.int32)
    x = torch.randn(shape, dtype=dtype)
    x[x.abs() < 0.3] = 0
    return x


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.int32])
def test_bitwise_ops(dtype):
    fn = lambda a, b: (a & b, a | b, a ^ b, ~a, torch.bitwise_and(a, b), torch.bitwise_xor(b, a))  # noqa: E731
    check_export(Fn2(fn), (make(dtype), make(dtype)), DYN2)


def test_bitwise_scalars_and_mixed_promotion():
    fn = lambda a, b: (a & 6, a | 1, a ^ 3, a & b, b ^ a, b | True)  # noqa: E731
    check_export(Fn2(fn), (make(torch.int64), make(torch.bool)), DYN2)


@pytest.mark.parametrize("dta,dtb", [(torch.bool, torch.bool), (torch.float32, torch.int64),
                                     (torch.int64, torch.bool), (torch.float32, torch.float32)])
def test_logical_ops(dta, dtb):
    fn = lambda a, b: (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_xor(a, b),  # noqa: E731
                       torch.logical_not(a), torch.logical_not(b))
    check_export(Fn2(fn), (make(dta), make(dtb)), DYN2)


def special():
    x = torch.randn(4, 5)
    x[0, 1] = float("nan")
    x[1, 2] = float("inf")
    x[2, 3] = float("-inf")
    x[3, 0] = float("nan")
    return x


def with_specials(shape):
    x = torch.randn(shape)
    flat = x.view(-1)
    flat[::3] = float("nan")
    flat[1::5] = float("inf")
    flat[2::7] = float("-inf")
    return x


PREDICATES = lambda t: (torch.isnan(t), torch.isinf(t), torch.isfinite(t), torch.isposinf(t),  # noqa: E731
                        torch.isneginf(t))


def test_float_predicates_with_nan_and_inf():
    x = special()
    # the generated sizes hold no NaN/inf: also compare on other sizes that do
    check_export(Fn(PREDICATES), (x,), {"x": {0: "batch", 1: "n"}},
                 inputs=[(with_specials((6, 3)),), (with_specials((2, 9)),)])


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_predicates_on_int_and_bool(dtype):
    check_export(Fn(PREDICATES), (make(dtype),), {"x": {0: "batch", 1: "n"}})


def test_shifts_on_negative_ints():
    class M(torch.nn.Module):
        def forward(self, a, s):
            s = s.abs() % 5
            return a << 2, a >> 1, a << s, a >> s, torch.bitwise_right_shift(a, 3), torch.bitwise_left_shift(a, s)

    a, s = torch.randint(-100, 100, (3, 4)), torch.randint(-4, 5, (3, 4))
    check_export(M(), (a, s), {"a": {0: "batch", 1: "n"}, "s": {0: "batch", 1: "n"}})
