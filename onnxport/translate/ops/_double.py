"""Double-precision evaluation shared by the special-function translations (gamma, Bessel, normal
quantile): Cephes-style formulas computed in float64 from elementwise ONNX operators, the result
cast to the node's output dtype."""

from __future__ import annotations

from typing import Any, Callable

import onnx_ir as ir

F64 = ir.DataType.DOUBLE


def const(ctx, v: float) -> ir.Value:
    """A float64 scalar initializer."""
    return ctx.scalar(float(v), F64)


def to_double(ctx, x: Any) -> ir.Value:
    """``x`` (a value, or a Python number) as float64."""
    return const(ctx, x) if not isinstance(x, ir.Value) else ctx.cast(x, F64)


def polevl(ctx, x: ir.Value, coefficients) -> ir.Value:
    """The polynomial ``coefficients[0] * x**n + ... + coefficients[n]`` by Horner's rule (highest
    power first, as Cephes' ``polevl``)."""
    out = const(ctx, coefficients[0])
    for c in coefficients[1:]:
        out = ctx.op.Add(ctx.op.Mul(out, x), const(ctx, c))
    return out


def in_double(ctx, x: Any, fn: Callable[[Any, ir.Value], ir.Value]) -> ir.Value:
    """``fn(ctx, x as float64)`` cast to the node's output dtype."""
    return ctx.cast(fn(ctx, to_double(ctx, x)), ctx.out_dtype)
