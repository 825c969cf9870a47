"""Special functions and float bit tests: signbit, ldexp, special_erfcx (which log_ndtr
decomposes to).

Semantics: torch.signbit, torch.ldexp, torch.special.erfcx
(https://pytorch.org/docs/stable/special.html), built from ONNX elementwise operators.
"""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

from onnxport.translate import dtypes
from onnxport.translate.ops.elementwise import erf
from onnxport.translate.registry import translates

aten = torch.ops.aten
BOOL = ir.DataType.BOOL


@translates(aten.signbit.default)
def signbit(ctx, x):
    """signbit(Tensor self) -> bool: x < 0, and -0.0 counts as negative (1 / -0.0 = -inf). ONNX has
    no bit cast, so the sign bit of a NaN is not read: signbit(NaN) is False."""
    if x.dtype == BOOL:
        return ctx.op.Equal(ctx.op.Cast(x, to=ir.DataType.INT32), ctx.scalar(-1, ir.DataType.INT32))
    zero = ctx.scalar(0, x.dtype)
    negative = ctx.op.Less(x, zero)
    if not dtypes.is_float(x.dtype):
        return negative
    return ctx.op.Or(negative, ctx.op.And(ctx.op.Equal(x, zero), ctx.op.Less(ctx.op.Reciprocal(x), zero)))


@translates(aten.ldexp.Tensor, aten.ldexp.default)
def ldexp(ctx, x, other):
    """ldexp(Tensor self, Tensor other) = self * 2 ** other, in the result's float type."""
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    power = ctx.op.Pow(ctx.scalar(2.0, to), ctx.cast(other, to) if isinstance(other, ir.Value) else ctx.scalar(other, to))
    return ctx.op.Mul(x, power)


_CF_TERMS = 16  # terms of erfcx's continued fraction: relative error below 1e-9 from x = 2 on


@translates(aten.special_erfcx.default)
def special_erfcx(ctx, x):
    """special_erfcx(Tensor self) = exp(x^2) * erfc(x), the scaled complementary error function.

    Below x = 2 it is exp(x^2) * (1 - erf(x)) (no cancellation there: erfc(2) = 4.7e-3). From 2
    on, where exp(x^2) overflows and 1 - erf(x) cancels, it is the continued fraction
    ``erfcx(x) = 1 / (sqrt(pi) * (x + (1/2) / (x + (2/2) / (x + (3/2) / ...))))``.
    """
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    direct = ctx.op.Mul(ctx.op.Exp(ctx.op.Mul(x, x)), ctx.op.Sub(ctx.scalar(1, to), erf(ctx, x)))
    # the continued fraction at max(x, 2), so that it never divides by a small x
    y = ctx.op.Max(x, ctx.scalar(2.0, to))
    t = y
    for k in range(_CF_TERMS, 0, -1):
        t = ctx.op.Add(y, ctx.op.Div(ctx.scalar(k / 2, to), t))
    fraction = ctx.op.Reciprocal(ctx.op.Mul(t, ctx.scalar(math.sqrt(math.pi), to)))
    return ctx.op.Where(ctx.op.Less(x, ctx.scalar(2.0, to)), direct, fraction)
