"""Elementwise arithmetic, comparison and unary math against eager PyTorch (tests ops/elementwise.py)."""

import math

import pytest
import torch

from exportcheck import check_export, Fn, Fn2

DYN2 = {"a": {0: "batch", 1: "n"}, "b": {0: "batch", 1: "n"}}


def make(dtype, shape=(3, 4), nonzero=False):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype in (torch.int64, torch.int32):
        x = torch.randint(-9, 10, shape, dtype=dtype)
        return torch.where(x == 0, 3, x).to(dtype) if nonzero else x
    x = torch.randn(shape, dtype=dtype) * 3
    return x


PAIRS = [(torch.float32, torch.float32), (torch.float32, torch.int64), (torch.int64, torch.int64),
         (torch.int64, torch.bool), (torch.bool, torch.float32), (torch.int32, torch.int64),
         (torch.float64, torch.float32)]


@pytest.mark.parametrize("dta,dtb", PAIRS)
def test_add_sub_mul_promotion(dta, dtb):
    def fn(a, b):
        out = [a + b, a * b, torch.add(a, b, alpha=2), b * a]
        if torch.bool not in (dta, dtb):
            out += [a - b, torch.sub(a, b, alpha=3), torch.rsub(a, b)]
        return out

    check_export(Fn2(fn), (make(dta), make(dtb)), DYN2)


def test_bool_add_mul():
    check_export(Fn2(lambda a, b: (a + b, a * b, a + True, a * False)), (make(torch.bool), make(torch.bool)), DYN2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_python_scalars_keep_tensor_dtype(dtype):
    def fn(x):
        out = [x + 2, x * 3, 2 * x, x + 1.5, x * 0.5, x / 2, 2 / (x.float() + 10), x + True]
        if dtype != torch.bool:
            out += [x - 1, 1 - x, x - 2.5]
        return out

    check_export(Fn(fn), (make(dtype),), {"x": {0: "batch", 1: "n"}})


def test_broadcasting_dynamic_dims_and_0d_tensors():
    class M(torch.nn.Module):
        def forward(self, a, b, s):
            # a: [batch, n, 4], b: [n, 1], s: 0-d int64 (promotes like a scalar)
            return a + b, a * s, b - s, (a > b) & (s > 0), a * a.shape[1]

    a, b, s = torch.randn(2, 3, 4), torch.randn(3, 1), torch.tensor(3)
    check_export(M(), (a, b, s), {"a": {0: "batch", 1: "n"}, "b": {0: "n"}, "s": None})


@pytest.mark.parametrize("dta,dtb", PAIRS + [(torch.bool, torch.bool)])
def test_comparisons(dta, dtb):
    fn = lambda a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b)  # noqa: E731
    check_export(Fn2(fn), (make(dta), make(dtb)), DYN2)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_comparisons_with_scalars(dtype):
    fn = lambda x: (x == 1, x != 0, x < 0.5, x <= 2, x > -1.5, x >= 3, 0 < x)  # noqa: E731
    check_export(Fn(fn), (make(dtype),), {"x": {0: "batch", 1: "n"}})


@pytest.mark.parametrize("dta,dtb", [(torch.float32, torch.float32), (torch.int64, torch.float32),
                                     (torch.int64, torch.int64), (torch.bool, torch.bool)])
def test_where(dta, dtb):
    class M(torch.nn.Module):
        def forward(self, c, a, b):
            return torch.where(c, a, b), torch.where(c, a, 0), torch.where(c, 1.5, b), torch.where(c > 0, 2, 7)

    c = torch.rand(3, 4) > 0.5
    dyn = {"c": {0: "batch", 1: "n"}, "a": {1: "n"}, "b": {0: "batch", 1: "n"}}
    check_export(M(), (c, make(dta, (1, 4)), make(dtb)), dyn)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_clamp_scalars(dtype):
    fn = lambda x: (x.clamp(-2, 3), x.clamp(min=0), x.clamp(max=1), x.clamp(-1.5, 2.5), torch.clip(x, -1, 1))  # noqa: E731
    check_export(Fn(fn), (make(dtype),), {"x": {0: "batch", 1: "n"}})


def test_clamp_tensor_bounds_and_nan():
    class M(torch.nn.Module):
        def forward(self, x, lo, hi):
            return torch.clamp(x, lo, hi), torch.clamp(x, min=lo), x.clamp(0, 1), torch.clamp_min(x, 0.2)

    x = make(torch.float32)
    x[0, 0] = float("nan")
    lo, hi = torch.full((4,), -1.0), torch.linspace(0.5, 2, 4)
    check_export(M(), (x, lo, hi), {"x": {0: "batch"}, "lo": None, "hi": None})


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_maximum_minimum(dtype):
    fn = lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), torch.max(a, b), torch.min(b, a))  # noqa: E731
    a, b = make(dtype), make(dtype)
    if dtype.is_floating_point:
        a[1, 1] = float("nan")
    check_export(Fn2(fn), (a, b), DYN2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_pow(dtype):
    def fn(x):
        out = [x ** 2, x ** 3, torch.pow(x, 0), 2 ** x.clamp(-3, 3), x.abs() ** 0.5, x.abs() ** 2.5]
        if dtype.is_floating_point:
            out += [x ** -1, torch.pow(x.abs(), x)]
        else:
            out += [torch.pow(x.abs(), x.abs().clamp(max=3))]
        return out

    check_export(Fn(fn), (make(dtype),), {"x": {0: "batch", 1: "n"}})


UNARY_FLOAT = lambda x: (torch.exp(x), torch.log(x.abs() + 0.1), torch.sqrt(x.abs()), torch.rsqrt(x.abs() + 0.1),  # noqa: E731
                         torch.abs(x), -x, torch.erf(x), torch.sign(x), torch.floor(x), torch.ceil(x),
                         torch.round(x), torch.trunc(x), torch.reciprocal(x), torch.square(x), torch.sin(x),
                         torch.tanh(x), torch.log1p(x.abs()), torch.expm1(x), torch.log2(x.abs() + 1),
                         torch.exp2(x), torch.frac(x), torch.round(x, decimals=1))


def test_unary_float():
    check_export(Fn(UNARY_FLOAT), (make(torch.float32),), {"x": {0: "batch", 1: "n"}})


def test_unary_int_inputs():
    fn = lambda x: (torch.abs(x), -x, torch.sign(x), torch.exp(x.clamp(-3, 3)), torch.sqrt(x.abs()),  # noqa: E731
                    torch.rsqrt(x.abs() + 1), torch.erf(x), torch.square(x), torch.sigmoid(x), torch.floor(x),
                    torch.ceil(x), torch.round(x), torch.trunc(x))
    check_export(Fn(fn), (make(torch.int64),), {"x": {0: "batch", 1: "n"}})


@pytest.mark.parametrize("dta,dtb", [(torch.int64, torch.int64), (torch.float32, torch.float32),
                                     (torch.int64, torch.float32), (torch.int32, torch.int32)])
def test_division_rounding_modes_negative_values(dta, dtb):
    def fn(a, b):
        b = torch.where(b == 0, 3, b)  # generated inputs may hold 0: integer division by 0 raises
        return (a / b, torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                a // b, a % b, torch.remainder(a, b), torch.fmod(a, b),
                a // 4, a % -3, torch.div(a, -4, rounding_mode="trunc"), torch.remainder(7, b))

    check_export(Fn2(fn), (make(dta), make(dtb, nonzero=True)), DYN2)


def test_float_remainder_sign_follows_divisor():
    a = torch.tensor([[-7.5, 7.5, -6.0, 6.0, 0.0], [-1e-3, 1e-3, 5.0, -5.0, 2.25]])
    b = torch.tensor([[2.0, -2.0, 3.0, -3.0, -1.0], [3.0, -3.0, 2.5, 2.5, -0.75]])
    check_export(Fn2(lambda a, b: (a % b, a // b, torch.fmod(a, b))), (a, b), DYN2)


def test_nan_to_num():
    x = torch.randn(4, 5)
    x[0, 1], x[1, 2], x[2, 3] = float("nan"), float("inf"), float("-inf")
    fn = lambda t: (torch.nan_to_num(t), torch.nan_to_num(t, nan=1.5, posinf=100.0, neginf=-7.0),  # noqa: E731
                    torch.nan_to_num(t.double(), posinf=3.0), torch.nan_to_num(t.long().clamp(-9, 9)))
    special = torch.randn(6, 3)
    special[::2, 0] = float("nan")
    special[1, 1], special[3, 2] = float("inf"), float("-inf")
    check_export(Fn(fn), (x,), {"x": {0: "batch", 1: "n"}}, inputs=[(special,)])


def test_lerp_addcmul_addcdiv_atan2():
    class M(torch.nn.Module):
        def forward(self, a, b):
            return (torch.lerp(a, b, 0.3), torch.lerp(a, b, torch.sigmoid(b)), torch.addcmul(a, a, b, value=0.5),
                    torch.addcdiv(a, a, b.abs() + 1, value=2), torch.atan2(a, b))

    check_export(M(), (make(torch.float32), make(torch.float32)), DYN2)


def test_fmax_fmin_ignore_nan_and_bool_maximum():
    class M(torch.nn.Module):
        def forward(self, a, b):
            return torch.fmax(a, b), torch.fmin(a, b), torch.maximum(a > 0, b > 0), torch.minimum(a > 0, b > 0)

    a, b = make(torch.float32), make(torch.float32)
    a[0, 0], b[0, 1], a[1, 2], b[1, 2] = (float("nan"),) * 4
    check_export(M(), (a, b), DYN2)


def test_erfc_hypot_copysign():
    class M(torch.nn.Module):
        def forward(self, a, b):
            return torch.erfc(a), torch.hypot(a, b), torch.copysign(a, b), torch.copysign(a, -0.0), torch.copysign(a, 2)

    b = make(torch.float32)
    b[0, 0], b[1, 1] = 0.0, -0.0
    check_export(M(), (make(torch.float32), b), DYN2)


def test_float_floor_divide_where_quotient_rounds_to_integer():
    # 1 / 0.1 rounds to 10.0 in float32, while PyTorch's floor division gives 9 (fmod(1, 0.1) > 0)
    a = torch.tensor([[1.0, -1.0, 0.3, 7.0, 2.5], [1.0, 5.0, -0.7, 0.0, 3.0]])
    b = torch.tensor([[0.1, 0.1, 0.1, -0.7, 0.5], [-0.1, 0.25, 0.35, 2.0, 0.0]])
    check_export(Fn2(lambda a, b: (a // b, torch.div(a, b, rounding_mode="floor"), a % b)), (a, b), DYN2)


def test_sign_of_nan_is_zero():
    x = make(torch.float32)
    x[0, 0], x[1, 1] = float("nan"), 0.0
    special = torch.randn(5, 6)
    special[::2, 1] = float("nan")
    check_export(Fn(lambda t: (torch.sign(t), torch.sgn(t))), (x,), {"x": {0: "batch", 1: "n"}}, inputs=[(special,)])


def test_arithmetic_with_symbolic_sizes():
    class M(torch.nn.Module):
        def forward(self, x):
            d, n = x.shape[-1], x.shape[0]
            return (x * (d ** -0.5), x + d ** 2, x * (2 ** n), x / math.sqrt(d), x + n, x.sum(0) / n,
                    torch.clamp(x, max=n), torch.where(x > 0, x, n), (x * n).long() // n)

    check_export(M(), (torch.randn(3, 4),), {"x": {0: "batch", 1: "d"}})
