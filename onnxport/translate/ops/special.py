"""Special functions and float bit tests: signbit, ldexp, erfc and special_erfcx (which log_ndtr
decomposes to).

Semantics: torch.signbit, torch.ldexp, torch.erfc, torch.special.erfcx
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
    exponent = ctx.cast(other, to) if isinstance(other, ir.Value) else ctx.scalar(other, to)
    power = ctx.op.Pow(ctx.scalar(2.0, to), exponent)
    return ctx.op.Mul(x, power)


_CF_TERMS = 16  # terms of erfcx's continued fraction: relative error below 1e-9 from x = 2 on
_ERFC_TERMS = 48  # erfc's: relative error below 3e-8 from x = 1 on


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
    return ctx.op.Where(ctx.op.Less(x, ctx.scalar(2.0, to)), direct, _erfcx_fraction(ctx, x, to))


@translates(aten.erfc.default)
def erfc(ctx, x):
    """erfc(Tensor self) = 1 - erf(x) below x = 1; from 1 on, where 1 - erf(x) cancels (erfc(2) =
    4.7e-3 keeps 4 significant digits of it in float32, erfc(3) one), exp(-x^2) * erfcx(x) with
    erfcx's continued fraction, ``_ERFC_TERMS`` terms (relative error below 3e-8 from x = 1 on)."""
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    direct = ctx.op.Sub(ctx.scalar(1, to), erf(ctx, x))
    tail = ctx.op.Mul(ctx.op.Exp(ctx.op.Neg(ctx.op.Mul(x, x))), _erfcx_fraction(ctx, x, to, 1.0, _ERFC_TERMS))
    return ctx.op.Where(ctx.op.Less(x, ctx.scalar(1.0, to)), direct, tail)


def _erfcx_fraction(ctx, x: ir.Value, to: ir.DataType, start: float = 2.0, terms: int = _CF_TERMS) -> ir.Value:
    """erfcx's continued fraction with ``terms`` terms at max(x, start) (so that it never divides
    by a small x), for x from ``start`` on."""
    y = ctx.op.Max(x, ctx.scalar(start, to))
    t = y
    for k in range(terms, 0, -1):
        t = ctx.op.Add(y, ctx.op.Div(ctx.scalar(k / 2, to), t))
    return ctx.op.Reciprocal(ctx.op.Mul(t, ctx.scalar(math.sqrt(math.pi), to)))
