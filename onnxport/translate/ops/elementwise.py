"""Elementwise arithmetic, comparison and unary math, with PyTorch broadcasting and promotion.

Semantics: PyTorch's elementwise ops (type promotion per ``torch.result_type``) on ONNX Add, Sub,
Mul, Div, Pow, comparison and unary math operators (numpy-style broadcasting in both).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate import dtypes
from onnxport.translate.ops._common import promote, result_type
from onnxport.translate.registry import translates

aten = torch.ops.aten
BOOL = ir.DataType.BOOL


def _binary(onnx_op: str):
    def fn(ctx, a, b, alpha=1, **_):
        to = ctx.out_dtype
        a, b = promote(ctx, a, b, to=to)
        if alpha != 1:
            b = getattr(ctx.op, "Mul")(b, ctx.scalar(alpha, to))
        return getattr(ctx.op, onnx_op)(a, b)

    fn.__name__ = onnx_op.lower()
    return fn


translates(aten.add.Tensor, aten.add.Scalar)(_binary("Add"))
translates(aten.sub.Tensor, aten.sub.Scalar)(_binary("Sub"))
translates(aten.mul.Tensor, aten.mul.Scalar)(_binary("Mul"))


@translates(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(ctx, a, b, alpha=1):
    """rsub(a, b, alpha) = b - alpha * a."""
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    if alpha != 1:
        a = ctx.op.Mul(a, ctx.scalar(alpha, to))
    return ctx.op.Sub(b, a)


@translates(aten.div.Tensor, aten.div.Scalar)
def div(ctx, a, b):
    """True division: integer operands are promoted to the default float dtype first."""
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.Div(a, b)


@translates(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(ctx, a, b, rounding_mode=None):
    """div with rounding_mode None / "trunc" / "floor" (PyTorch semantics on negative values)."""
    to = ctx.out_dtype
    if rounding_mode is None:
        a, b = promote(ctx, a, b, to=to)
        return ctx.op.Div(a, b)
    if dtypes.is_float(to):
        a, b = promote(ctx, a, b, to=to)
        q = ctx.op.Div(a, b)
        return ctx.op.Floor(q) if rounding_mode == "floor" else _trunc(ctx, q)
    # integers: compute exactly in int64 (ONNX Div truncates toward zero on ints)
    a, b = promote(ctx, a, b, to=to)
    q = ctx.op.Div(a, b)
    if rounding_mode == "trunc":
        return q
    r = ctx.op.Mod(a, b, fmod=1)
    zero = ctx.scalar(0, to)
    needs = ctx.op.And(ctx.op.Not(ctx.op.Equal(r, zero)),
                       ctx.op.Xor(ctx.op.Less(a, zero), ctx.op.Less(b, zero)))
    return ctx.op.Sub(q, ctx.op.Cast(needs, to=to))


def _trunc(ctx, x):
    return ctx.op.Mul(ctx.op.Sign(x), ctx.op.Floor(ctx.op.Abs(x)))


@translates(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(ctx, a, b):
    return div_mode(ctx, a, b, rounding_mode="floor")


@translates(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
def remainder(ctx, a, b):
    """Python-style remainder: the result has the sign of the divisor."""
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    if dtypes.is_float(to):
        return ctx.op.Sub(a, ctx.op.Mul(ctx.op.Floor(ctx.op.Div(a, b)), b))
    return ctx.op.Mod(a, b, fmod=0)


@translates(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(ctx, a, b):
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    return ctx.op.Mod(a, b, fmod=1)


@translates(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def pow_(ctx, a, b):
    to = ctx.out_dtype
    if not isinstance(b, ir.Value) and b == 2 and isinstance(a, ir.Value):
        a = ctx.cast(a, to)
        return ctx.op.Mul(a, a)
    if not isinstance(b, ir.Value) and b == 0.5 and isinstance(a, ir.Value) and dtypes.is_float(to):
        return ctx.op.Sqrt(ctx.cast(a, to))
    if dtypes.is_int(to):
        a, b = promote(ctx, a, b, to=ir.DataType.DOUBLE)
        return ctx.cast(ctx.op.Round(ctx.op.Pow(a, b)), to)
    a, b = promote(ctx, a, b, to=to)
    return ctx.op.Pow(a, b)


def _compare(onnx_op: str, negate: bool = False):
    def fn(ctx, a, b):
        a, b = promote(ctx, a, b)
        out = getattr(ctx.op, onnx_op)(a, b)
        return ctx.op.Not(out) if negate else out

    fn.__name__ = onnx_op.lower()
    return fn


translates(aten.eq.Tensor, aten.eq.Scalar)(_compare("Equal"))
translates(aten.ne.Tensor, aten.ne.Scalar)(_compare("Equal", negate=True))
translates(aten.lt.Tensor, aten.lt.Scalar)(_compare("Less"))
translates(aten.le.Tensor, aten.le.Scalar)(_compare("LessOrEqual"))
translates(aten.gt.Tensor, aten.gt.Scalar)(_compare("Greater"))
translates(aten.ge.Tensor, aten.ge.Scalar)(_compare("GreaterOrEqual"))


@translates(aten.maximum.default, aten.fmax.default)
def maximum(ctx, a, b):
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.Max(a, b)


@translates(aten.minimum.default, aten.fmin.default)
def minimum(ctx, a, b):
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.Min(a, b)


@translates(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(ctx, cond, a, b):
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.Where(ctx.cast(cond, BOOL), a, b)


@translates(aten.clamp.default, aten.clamp.Tensor, aten.clip.default)
def clamp(ctx, x, min=None, max=None):
    """clamp(x, min, max): Max then Min (ONNX Clip needs scalar bounds; tensors broadcast here)."""
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    if min is not None:
        x = ctx.op.Max(x, promote(ctx, min, to=to)[0])
    if max is not None:
        x = ctx.op.Min(x, promote(ctx, max, to=to)[0])
    return x


@translates(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(ctx, x, min):
    return clamp(ctx, x, min=min)


@translates(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(ctx, x, max):
    return clamp(ctx, x, max=max)


def _unary(onnx_op: str, float_only: bool = True):
    def fn(ctx, x):
        to = ctx.out_dtype
        return getattr(ctx.op, onnx_op)(ctx.cast(x, to) if float_only else x)

    fn.__name__ = onnx_op.lower()
    return fn


for _aten, _onnx in (
    (aten.exp.default, "Exp"), (aten.log.default, "Log"), (aten.sqrt.default, "Sqrt"),
    (aten.sin.default, "Sin"), (aten.cos.default, "Cos"), (aten.tan.default, "Tan"),
    (aten.asin.default, "Asin"), (aten.acos.default, "Acos"), (aten.atan.default, "Atan"),
    (aten.sinh.default, "Sinh"), (aten.cosh.default, "Cosh"), (aten.tanh.default, "Tanh"),
    (aten.asinh.default, "Asinh"), (aten.acosh.default, "Acosh"), (aten.atanh.default, "Atanh"),
    (aten.erf.default, "Erf"), (aten.sigmoid.default, "Sigmoid"), (aten.reciprocal.default, "Reciprocal"),
    (aten.floor.default, "Floor"), (aten.ceil.default, "Ceil"), (aten.round.default, "Round"),
):
    translates(_aten)(_unary(_onnx))

for _aten, _onnx in ((aten.abs.default, "Abs"), (aten.neg.default, "Neg"), (aten.sign.default, "Sign")):
    translates(_aten)(_unary(_onnx, float_only=False))


@translates(aten.rsqrt.default)
def rsqrt(ctx, x):
    return ctx.op.Reciprocal(ctx.op.Sqrt(ctx.cast(x, ctx.out_dtype)))


@translates(aten.log1p.default)
def log1p(ctx, x):
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Log(ctx.op.Add(x, ctx.scalar(1, ctx.out_dtype)))


@translates(aten.expm1.default)
def expm1(ctx, x):
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Sub(ctx.op.Exp(x), ctx.scalar(1, ctx.out_dtype))


@translates(aten.log2.default)
def log2(ctx, x):
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Div(ctx.op.Log(x), ctx.scalar(np.log(2.0), ctx.out_dtype))


@translates(aten.log10.default)
def log10(ctx, x):
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Div(ctx.op.Log(x), ctx.scalar(np.log(10.0), ctx.out_dtype))


@translates(aten.trunc.default)
def trunc(ctx, x):
    return _trunc(ctx, x) if dtypes.is_float(x.dtype) else x


@translates(aten.square.default)
def square(ctx, x):
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Mul(x, x)


@translates(aten.atan2.default)
def atan2(ctx, y, x):
    """atan2(y, x) from Atan with quadrant fix-ups."""
    to = ctx.out_dtype
    y, x = promote(ctx, y, x, to=to)
    zero, pi = ctx.scalar(0, to), ctx.scalar(np.pi, to)
    base = ctx.op.Atan(ctx.op.Div(y, x))
    neg_x = ctx.op.Less(x, zero)
    adj = ctx.op.Where(ctx.op.GreaterOrEqual(y, zero), pi, ctx.op.Neg(pi))
    out = ctx.op.Where(neg_x, ctx.op.Add(base, adj), base)
    half = ctx.scalar(np.pi / 2, to)
    x_zero = ctx.op.Equal(x, zero)
    return ctx.op.Where(x_zero, ctx.op.Mul(ctx.op.Sign(y), half), out)


@translates(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(ctx, a, b, w):
    to = ctx.out_dtype
    a, b, w = promote(ctx, a, b, w, to=to)
    return ctx.op.Add(a, ctx.op.Mul(w, ctx.op.Sub(b, a)))


@translates(aten.addcmul.default)
def addcmul(ctx, x, t1, t2, value=1):
    to = ctx.out_dtype
    x, t1, t2 = promote(ctx, x, t1, t2, to=to)
    prod = ctx.op.Mul(t1, t2)
    if value != 1:
        prod = ctx.op.Mul(prod, ctx.scalar(value, to))
    return ctx.op.Add(x, prod)


@translates(aten.addcdiv.default)
def addcdiv(ctx, x, t1, t2, value=1):
    to = ctx.out_dtype
    x, t1, t2 = promote(ctx, x, t1, t2, to=to)
    q = ctx.op.Div(t1, t2)
    if value != 1:
        q = ctx.op.Mul(q, ctx.scalar(value, to))
    return ctx.op.Add(x, q)
