"""Elementwise arithmetic, comparison and unary math, with PyTorch broadcasting and promotion.

Semantics: PyTorch's elementwise ops (type promotion per ``torch.result_type``) on ONNX Add, Sub,
Mul, Div, Pow, comparison and unary math operators (numpy-style broadcasting in both).
"""

from __future__ import annotations

import operator

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate import dtypes
from onnxport.translate.ops._common import promote
from onnxport.translate.registry import translates

aten = torch.ops.aten
BOOL = ir.DataType.BOOL


_BOOL_FORM = {"Add": "Or", "Mul": "And"}  # PyTorch's add/mul of bools are logical or/and


def _binary(onnx_op: str):
    def fn(ctx, a, b, alpha=1):
        to = ctx.out_dtype
        a, b = promote(ctx, a, b, to=to)
        if to == BOOL:
            if alpha != 1 and not alpha:
                return a
            return getattr(ctx.op, _BOOL_FORM[onnx_op])(a, b)
        if alpha != 1:
            b = ctx.op.Mul(b, ctx.scalar(alpha, to))
        return getattr(ctx.op, onnx_op)(a, b)

    fn.__name__ = onnx_op.lower()
    fn.__doc__ = (f"{onnx_op.lower()}.Tensor/.Scalar(Tensor self, Tensor|Scalar other, *, Scalar alpha=1): "
                  f"ONNX {onnx_op} of the operands cast to the PyTorch result dtype (``other * alpha``).")
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
    """div.Tensor/.Scalar(Tensor self, Tensor|Scalar other): true division (ONNX Div); integer
    operands are promoted to the default float dtype first, as in PyTorch."""
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
        if rounding_mode == "floor":
            return _float_floor_divide(ctx, a, b, to)
        return _trunc(ctx, ctx.op.Div(a, b))
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


def _sign_fixed_fmod(ctx, a, b, to):
    """(fmod(a, b), whether it must move by one divisor to take the divisor's sign)."""
    mod = ctx.op.Mod(a, b, fmod=1)
    zero = ctx.scalar(0, to)
    fix = ctx.op.And(ctx.op.Not(ctx.op.Equal(mod, zero)),
                     ctx.op.Xor(ctx.op.Less(b, zero), ctx.op.Less(mod, zero)))
    return mod, fix


def _float_floor_divide(ctx, a, b, to):
    """PyTorch's floating floor division (div_floor_floating): (a - fmod(a, b)) / b, minus 1 when
    the remainder's sign differs from b's, rounded to the nearest integer; a / b where b is 0.
    Closer to exact than floor(a / b) when a / b rounds up to an integer."""
    mod, fix = _sign_fixed_fmod(ctx, a, b, to)
    div = ctx.op.Div(ctx.op.Sub(a, mod), b)
    div = ctx.op.Sub(div, ctx.op.Cast(fix, to=to))
    floordiv = ctx.op.Floor(div)
    up = ctx.op.Greater(ctx.op.Sub(div, floordiv), ctx.scalar(0.5, to))
    floordiv = ctx.op.Add(floordiv, ctx.op.Cast(up, to=to))
    return ctx.op.Where(ctx.op.Equal(b, ctx.scalar(0, to)), ctx.op.Div(a, b), floordiv)


def _trunc(ctx, x):
    return ctx.op.Mul(ctx.op.Sign(x), ctx.op.Floor(ctx.op.Abs(x)))


@translates(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(ctx, a, b):
    """floor_divide(Tensor self, Tensor|Scalar other) = div(a, b, rounding_mode="floor")."""
    return div_mode(ctx, a, b, rounding_mode="floor")


@translates(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
def remainder(ctx, a, b):
    """remainder.Tensor/.Scalar/.Scalar_Tensor: Python-style remainder, with the sign of the divisor
    (floats: fmod(a, b), plus b where the signs differ, as PyTorch computes it)."""
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    if dtypes.is_float(to):
        mod, fix = _sign_fixed_fmod(ctx, a, b, to)
        return ctx.op.Where(fix, ctx.op.Add(mod, b), mod)
    return ctx.op.Mod(a, b, fmod=0)


@translates(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(ctx, a, b):
    """fmod.Tensor/.Scalar(Tensor self, Tensor|Scalar other): C-style remainder, the sign of the
    dividend (ONNX Mod with fmod=1)."""
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    return ctx.op.Mod(a, b, fmod=1)


@translates(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def pow_(ctx, a, b):
    """pow.Tensor_Tensor/.Tensor_Scalar/.Scalar: ONNX Pow in the result dtype; ``x ** 2`` of integers
    is x * x (floats keep ``Pow(x, 2)``, which onnxruntime computes as x * x and its fusion tools read
    in RMS norms), ``x ** 0.5`` Sqrt; other integer results exact, wrapping around as PyTorch's do
    (``integer.integer_pow``: squaring and multiplying)."""
    to = ctx.out_dtype
    if not isinstance(b, ir.Value) and b == 2 and isinstance(a, ir.Value) and not dtypes.is_float(to):
        a = ctx.cast(a, to)
        return ctx.op.Mul(a, a)
    if not isinstance(b, ir.Value) and b == 0.5 and isinstance(a, ir.Value) and dtypes.is_float(to):
        return ctx.op.Sqrt(ctx.cast(a, to))
    if dtypes.is_int(to) and (isinstance(b, ir.Value) or int(b) >= 0):
        from onnxport.translate.ops.integer import integer_pow

        return integer_pow(ctx, a, b)
    a, b = promote(ctx, a, b, to=to)
    return ctx.op.Pow(a, b)


@translates(operator.pow)
def sym_pow(ctx, a, b):
    """``operator.pow`` on SymInt/SymFloat sizes (``head_dim ** -0.5``): a 0-d value of the
    node's type (int64 for SymInt results, double for SymFloat), computed in double."""
    to = ctx.out_dtype
    base, exp = (ctx.cast(v, ir.DataType.DOUBLE) if isinstance(v, ir.Value) else ctx.scalar(v, ir.DataType.DOUBLE)
                 for v in (a, b))
    out = ctx.op.Pow(base, exp)
    return ctx.cast(ctx.op.Round(out), to) if dtypes.is_int(to) else ctx.cast(out, to)


def _compare(onnx_op: str, negate: bool = False):
    def fn(ctx, a, b):
        a, b = promote(ctx, a, b)
        if onnx_op != "Equal" and a.dtype == BOOL:  # ONNX orders numbers only: False < True as 0 < 1
            a, b = ctx.cast(a, ir.DataType.INT32), ctx.cast(b, ir.DataType.INT32)
        out = getattr(ctx.op, onnx_op)(a, b)
        return ctx.op.Not(out) if negate else out

    fn.__name__ = onnx_op.lower()
    fn.__doc__ = (f"comparison (Tensor self, Tensor|Scalar other) -> bool: ONNX {onnx_op}"
                  f"{' negated' if negate else ''} after PyTorch type promotion.")
    return fn


translates(aten.eq.Tensor, aten.eq.Scalar)(_compare("Equal"))
translates(aten.ne.Tensor, aten.ne.Scalar)(_compare("Equal", negate=True))
translates(aten.lt.Tensor, aten.lt.Scalar)(_compare("Less"))
translates(aten.le.Tensor, aten.le.Scalar)(_compare("LessOrEqual"))
translates(aten.gt.Tensor, aten.gt.Scalar)(_compare("Greater"))
translates(aten.ge.Tensor, aten.ge.Scalar)(_compare("GreaterOrEqual"))


def _extremum(ctx, onnx_op: str, a, b):
    to = ctx.out_dtype
    if to == BOOL:  # onnxruntime's Max/Min take numbers: go through uint8
        a, b = promote(ctx, a, b, to=ir.DataType.UINT8)
        return ctx.cast(getattr(ctx.op, onnx_op)(a, b), BOOL)
    a, b = promote(ctx, a, b, to=to)
    return getattr(ctx.op, onnx_op)(a, b)


@translates(aten.maximum.default, aten.max.other)
def maximum(ctx, a, b):
    """maximum(Tensor self, Tensor other) / max.other: ONNX Max (NaN propagates, as in PyTorch)."""
    return _extremum(ctx, "Max", a, b)


@translates(aten.minimum.default, aten.min.other)
def minimum(ctx, a, b):
    """minimum(Tensor self, Tensor other) / min.other: ONNX Min (NaN propagates, as in PyTorch)."""
    return _extremum(ctx, "Min", a, b)


def _fextremum(ctx, onnx_op: str, a, b):
    """fmax/fmin: like maximum/minimum, but a NaN operand yields the other one."""
    out = _extremum(ctx, onnx_op, a, b)
    if not dtypes.is_float(ctx.out_dtype):
        return out
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.Where(ctx.op.IsNaN(a), b, ctx.op.Where(ctx.op.IsNaN(b), a, out))


@translates(aten.fmax.default)
def fmax(ctx, a, b):
    """fmax(Tensor self, Tensor other): maximum ignoring NaN (NaN only where both are NaN)."""
    return _fextremum(ctx, "Max", a, b)


@translates(aten.fmin.default)
def fmin(ctx, a, b):
    """fmin(Tensor self, Tensor other): minimum ignoring NaN (NaN only where both are NaN)."""
    return _fextremum(ctx, "Min", a, b)


@translates(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(ctx, cond, a, b):
    """where(Tensor condition, Tensor|Scalar self, Tensor|Scalar other): ONNX Where with both
    branches in the result dtype (bool branches go through uint8, which onnxruntime's Where takes)."""
    to = ctx.out_dtype
    cond = ctx.cast(cond, BOOL)
    if to == BOOL:
        a, b = promote(ctx, a, b, to=ir.DataType.UINT8)
        return ctx.cast(ctx.op.Where(cond, a, b), BOOL)
    a, b = promote(ctx, a, b, to=to)
    return ctx.op.Where(cond, a, b)


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
    """clamp_min(Tensor self, Scalar|Tensor min) = clamp(x, min=min)."""
    return clamp(ctx, x, min=min)


@translates(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(ctx, x, max):
    """clamp_max(Tensor self, Scalar|Tensor max) = clamp(x, max=max)."""
    return clamp(ctx, x, max=max)


def _unary(onnx_op: str, float_only: bool = True):
    def fn(ctx, x):
        to = ctx.out_dtype
        return getattr(ctx.op, onnx_op)(ctx.cast(x, to) if float_only else x)

    fn.__name__ = onnx_op.lower()
    fn.__doc__ = f"(Tensor self): ONNX {onnx_op}" + (
        " in the result dtype (float for integer inputs)." if float_only else ".")
    return fn


for _aten, _onnx in (
    (aten.exp.default, "Exp"), (aten.log.default, "Log"), (aten.sqrt.default, "Sqrt"),
    (aten.sin.default, "Sin"), (aten.cos.default, "Cos"), (aten.tan.default, "Tan"),
    (aten.asin.default, "Asin"), (aten.acos.default, "Acos"), (aten.atan.default, "Atan"),
    (aten.sinh.default, "Sinh"), (aten.cosh.default, "Cosh"), (aten.tanh.default, "Tanh"),
    (aten.asinh.default, "Asinh"), (aten.acosh.default, "Acosh"), (aten.atanh.default, "Atanh"),
    (aten.sigmoid.default, "Sigmoid"), (aten.reciprocal.default, "Reciprocal"),
):
    translates(_aten)(_unary(_onnx))


def _rounding(onnx_op: str):
    def fn(ctx, x):
        return getattr(ctx.op, onnx_op)(x) if dtypes.is_float(x.dtype) else ctx.op.Identity(x)

    fn.__name__ = onnx_op.lower()
    fn.__doc__ = f"(Tensor self): ONNX {onnx_op} on floats; integer and bool tensors are returned unchanged."
    return fn


for _aten, _onnx in ((aten.floor.default, "Floor"), (aten.ceil.default, "Ceil"), (aten.round.default, "Round")):
    translates(_aten)(_rounding(_onnx))

for _aten, _onnx in ((aten.abs.default, "Abs"), (aten.neg.default, "Neg")):
    translates(_aten)(_unary(_onnx, float_only=False))


@translates(aten.sign.default, aten.sgn.default)
def sign(ctx, x):
    """sign(Tensor self): ONNX Sign; 0 where x is NaN (PyTorch's sign of NaN is 0)."""
    if x.dtype == BOOL:
        return ctx.op.Identity(x)
    out = ctx.op.Sign(x)
    if dtypes.is_float(x.dtype):
        out = ctx.op.Where(ctx.op.IsNaN(x), ctx.scalar(0, x.dtype), out)
    return out


@translates(aten.exp2.default)
def exp2(ctx, x):
    """exp2(Tensor self) = 2 ** x in the result dtype (float for integer inputs)."""
    return ctx.op.Pow(ctx.scalar(2.0, ctx.out_dtype), ctx.cast(x, ctx.out_dtype))


@translates(aten.frac.default)
def frac(ctx, x):
    """frac(Tensor self) = x - trunc(x)."""
    return ctx.op.Sub(x, _trunc(ctx, x))


@translates(aten.round.decimals)
def round_decimals(ctx, x, decimals=0):
    """round.decimals(Tensor self, *, int decimals): round half to even of x * 10^decimals, scaled back."""
    if not dtypes.is_float(x.dtype):
        return ctx.op.Identity(x)
    if decimals == 0:
        return ctx.op.Round(x)
    scale = ctx.scalar(10.0 ** decimals, x.dtype)
    return ctx.op.Div(ctx.op.Round(ctx.op.Mul(x, scale)), scale)


@translates(aten.nan_to_num.default)
def nan_to_num(ctx, x, nan=0.0, posinf=None, neginf=None):
    """nan_to_num(Tensor self, float? nan=0., float? posinf=None, float? neginf=None): NaN, +inf and
    -inf replaced (infinities by the dtype's largest / lowest finite value by default); integer
    and bool tensors are returned unchanged."""
    if not dtypes.is_float(x.dtype):
        return ctx.op.Identity(x)
    to = x.dtype
    info = np.finfo(to.numpy()) if to != ir.DataType.BFLOAT16 else torch.finfo(torch.bfloat16)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = ctx.op.Where(ctx.op.IsNaN(x), ctx.scalar(nan if nan is not None else 0.0, to), x)
    out = ctx.op.Where(ctx.op.IsInf(x, detect_negative=0), ctx.scalar(posinf, to), out)
    return ctx.op.Where(ctx.op.IsInf(x, detect_positive=0), ctx.scalar(neginf, to), out)


@translates(aten.erf.default)
def erf(ctx, x):
    """erf(Tensor self): ONNX Erf in the result dtype (float for integer inputs; double computed in
    float32, onnxruntime having no double Erf kernel)."""
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    if to in (ir.DataType.FLOAT, ir.DataType.FLOAT16):
        return ctx.op.Erf(x)
    return ctx.cast(ctx.op.Erf(ctx.cast(x, ir.DataType.FLOAT)), to)


@translates(aten.hypot.default)
def hypot(ctx, a, b):
    """hypot(Tensor self, Tensor other) = sqrt(a^2 + b^2)."""
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.Sqrt(ctx.op.Add(ctx.op.Mul(a, a), ctx.op.Mul(b, b)))


@translates(aten.copysign.Tensor, aten.copysign.Scalar)
def copysign(ctx, a, b):
    """copysign(Tensor self, Tensor|Scalar other): |a| with the sign bit of b (-0.0 counts as negative)."""
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    zero = ctx.scalar(0, to)
    negative = ctx.op.Or(ctx.op.Less(b, zero),
                         ctx.op.And(ctx.op.Equal(b, zero), ctx.op.Less(ctx.op.Reciprocal(b), zero)))
    mag = ctx.op.Abs(a)
    return ctx.op.Where(negative, ctx.op.Neg(mag), mag)


@translates(aten.rsqrt.default)
def rsqrt(ctx, x):
    """rsqrt(Tensor self) = 1 / sqrt(x), in the result dtype (float for integer inputs)."""
    return ctx.op.Reciprocal(ctx.op.Sqrt(ctx.cast(x, ctx.out_dtype)))


@translates(aten.log1p.default)
def log1p(ctx, x):
    """log1p(Tensor self) = log(1 + x)."""
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Log(ctx.op.Add(x, ctx.scalar(1, ctx.out_dtype)))


@translates(aten.expm1.default)
def expm1(ctx, x):
    """expm1(Tensor self) = exp(x) - 1."""
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Sub(ctx.op.Exp(x), ctx.scalar(1, ctx.out_dtype))


@translates(aten.log2.default)
def log2(ctx, x):
    """log2(Tensor self) = log(x) / log(2)."""
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Div(ctx.op.Log(x), ctx.scalar(np.log(2.0), ctx.out_dtype))


@translates(aten.log10.default)
def log10(ctx, x):
    """log10(Tensor self) = log(x) / log(10)."""
    x = ctx.cast(x, ctx.out_dtype)
    return ctx.op.Div(ctx.op.Log(x), ctx.scalar(np.log(10.0), ctx.out_dtype))


@translates(aten.trunc.default)
def trunc(ctx, x):
    """trunc(Tensor self): rounding toward zero, sign(x) * floor(|x|); integers unchanged."""
    return _trunc(ctx, x) if dtypes.is_float(x.dtype) else ctx.op.Identity(x)


@translates(aten.square.default)
def square(ctx, x):
    """square(Tensor self) = x * x in the result dtype."""
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
    """lerp.Scalar/.Tensor(Tensor self, Tensor end, Scalar|Tensor weight) = a + w * (b - a)."""
    to = ctx.out_dtype
    a, b, w = promote(ctx, a, b, w, to=to)
    return ctx.op.Add(a, ctx.op.Mul(w, ctx.op.Sub(b, a)))


@translates(aten.addcmul.default)
def addcmul(ctx, x, t1, t2, value=1):
    """addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) = x + value * t1 * t2."""
    to = ctx.out_dtype
    x, t1, t2 = promote(ctx, x, t1, t2, to=to)
    prod = ctx.op.Mul(t1, t2)
    if value != 1:
        prod = ctx.op.Mul(prod, ctx.scalar(value, to))
    return ctx.op.Add(x, prod)


@translates(aten.addcdiv.default)
def addcdiv(ctx, x, t1, t2, value=1):
    """addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) = x + value * t1 / t2."""
    to = ctx.out_dtype
    x, t1, t2 = promote(ctx, x, t1, t2, to=to)
    q = ctx.op.Div(t1, t2)
    if value != 1:
        q = ctx.op.Mul(q, ctx.scalar(value, to))
    return ctx.op.Add(x, q)
