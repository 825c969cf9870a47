"""Bitwise and logical operators, and the float predicates isnan / isinf / isfinite.

Semantics: PyTorch's bitwise_* (and ``&``, ``|``, ``^``, ``~``) on bool and integer tensors with
type promotion, logical_* (operands taken as ``x != 0``, result bool), and torch.isnan / isinf /
isposinf / isneginf / isfinite (always False / False / True for integer and bool tensors), on ONNX
And/Or/Xor/Not, BitwiseAnd/BitwiseOr/BitwiseXor/BitwiseNot (opset 18), IsNaN, IsInf.
"""

from __future__ import annotations

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate import dtypes
from onnxport.translate.ops._common import promote
from onnxport.translate.registry import translates

aten = torch.ops.aten
BOOL = ir.DataType.BOOL


def _bitwise(logical_op: str, bitwise_op: str):
    def fn(ctx, a, b):
        to = ctx.out_dtype
        a, b = promote(ctx, a, b, to=to)
        if to == BOOL:
            return getattr(ctx.op, logical_op)(a, b)
        if not dtypes.is_int(to):
            raise TranslationError(f"{bitwise_op} of {to.name} tensors is not defined",
                                   hint="bitwise operators take bool and integer tensors, as in PyTorch")
        return getattr(ctx.op, bitwise_op)(a, b)

    fn.__name__ = bitwise_op.lower()
    fn.__doc__ = (f"bitwise op (Tensor self, Tensor|Scalar other): ONNX {logical_op} on bools, "
                  f"{bitwise_op} on integers, after PyTorch type promotion.")
    return fn


translates(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.bitwise_and.Scalar_Tensor,
           aten.__and__.Tensor, aten.__and__.Scalar)(_bitwise("And", "BitwiseAnd"))
translates(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, aten.bitwise_or.Scalar_Tensor,
           aten.__or__.Tensor, aten.__or__.Scalar)(_bitwise("Or", "BitwiseOr"))
translates(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.bitwise_xor.Scalar_Tensor,
           aten.__xor__.Tensor, aten.__xor__.Scalar)(_bitwise("Xor", "BitwiseXor"))


@translates(aten.bitwise_not.default)
def bitwise_not(ctx, x):
    """bitwise_not(Tensor self): ONNX Not on bools, BitwiseNot on integers."""
    if x.dtype == BOOL:
        return ctx.op.Not(x)
    if not dtypes.is_int(x.dtype):
        raise TranslationError(f"bitwise_not of a {x.dtype} tensor is not defined",
                               hint="bitwise_not takes bool and integer tensors, as in PyTorch")
    return ctx.op.BitwiseNot(x)


def _shift_factor(ctx, s, to):
    """2**s as ``to`` (s a shift amount, value or Python int), computed exactly with BitShift on uint64."""
    one = ctx.scalar(1, ir.DataType.UINT64)
    amount = ctx.scalar(s, ir.DataType.UINT64)
    return ctx.op.Cast(ctx.op.BitShift(one, amount, direction="LEFT"), to=to)


@translates(aten.bitwise_left_shift.Tensor, aten.bitwise_left_shift.Tensor_Scalar,
            aten.bitwise_left_shift.Scalar_Tensor, aten.__lshift__.Tensor, aten.__lshift__.Scalar)
def bitwise_left_shift(ctx, a, s):
    """bitwise_left_shift(Tensor self, Tensor|Scalar other) on integers: a * 2**s (two's complement
    wrap-around as in PyTorch)."""
    to = ctx.out_dtype
    a = promote(ctx, a, to=to)[0]
    return ctx.op.Mul(a, _shift_factor(ctx, s, to))


@translates(aten.bitwise_right_shift.Tensor, aten.bitwise_right_shift.Tensor_Scalar,
            aten.bitwise_right_shift.Scalar_Tensor, aten.__rshift__.Tensor, aten.__rshift__.Scalar)
def bitwise_right_shift(ctx, a, s):
    """bitwise_right_shift(Tensor self, Tensor|Scalar other) on integers: arithmetic shift, i.e.
    floor(a / 2**s) (negative values stay negative, as in PyTorch)."""
    to = ctx.out_dtype
    a = promote(ctx, a, to=to)[0]
    d = _shift_factor(ctx, s, to)
    q = ctx.op.Div(a, d)  # truncates toward zero
    fix = ctx.op.And(ctx.op.Less(a, ctx.scalar(0, to)), ctx.op.Not(ctx.op.Equal(ctx.op.Mul(q, d), a)))
    return ctx.op.Sub(q, ctx.op.Cast(fix, to=to))


def as_bool(ctx, x) -> ir.Value:
    """``x != 0`` as a bool value (x itself when already bool; Python scalars become constants)."""
    if not isinstance(x, ir.Value):
        return ctx.scalar(bool(x), BOOL)
    if x.dtype == BOOL:
        return x
    return ctx.op.Not(ctx.op.Equal(x, ctx.scalar(0, x.dtype)))


def _logical(onnx_op: str):
    def fn(ctx, a, b):
        out = getattr(ctx.op, onnx_op)(as_bool(ctx, a), as_bool(ctx, b))
        return ctx.cast(out, ctx.out_dtype) if ctx.out_dtype != BOOL else out

    fn.__name__ = f"logical_{onnx_op.lower()}"
    fn.__doc__ = f"logical_{onnx_op.lower()}(Tensor self, Tensor other): ONNX {onnx_op} of ``x != 0``."
    return fn


translates(aten.logical_and.default)(_logical("And"))
translates(aten.logical_or.default)(_logical("Or"))
translates(aten.logical_xor.default)(_logical("Xor"))


@translates(aten.logical_not.default)
def logical_not(ctx, x):
    """logical_not(Tensor self): ``x == 0`` as bool."""
    out = ctx.op.Not(as_bool(ctx, x))
    return ctx.cast(out, ctx.out_dtype) if ctx.out_dtype != BOOL else out


def _const_flags(ctx, x, value: bool):
    """A bool tensor shaped like ``x`` filled with ``value`` (predicates on integer tensors)."""
    same = ctx.op.Equal(x, x)  # True everywhere for integers and bools
    same.type, same.shape = ir.TensorType(BOOL), x.shape
    return same if value else ctx.op.Not(same)


@translates(aten.isnan.default)
def isnan(ctx, x):
    """isnan(Tensor self): ONNX IsNaN; all False for integer and bool tensors."""
    return ctx.op.IsNaN(x) if dtypes.is_float(x.dtype) else _const_flags(ctx, x, False)


@translates(aten.isinf.default)
def isinf(ctx, x):
    """isinf(Tensor self): ONNX IsInf; all False for integer and bool tensors."""
    return ctx.op.IsInf(x) if dtypes.is_float(x.dtype) else _const_flags(ctx, x, False)


@translates(aten.isposinf.default)
def isposinf(ctx, x):
    """isposinf(Tensor self): ONNX IsInf(detect_negative=0)."""
    return ctx.op.IsInf(x, detect_negative=0) if dtypes.is_float(x.dtype) else _const_flags(ctx, x, False)


@translates(aten.isneginf.default)
def isneginf(ctx, x):
    """isneginf(Tensor self): ONNX IsInf(detect_positive=0)."""
    return ctx.op.IsInf(x, detect_positive=0) if dtypes.is_float(x.dtype) else _const_flags(ctx, x, False)


@translates(aten.isfinite.default)
def isfinite(ctx, x):
    """isfinite(Tensor self): neither NaN nor infinite; all True for integer and bool tensors."""
    if not dtypes.is_float(x.dtype):
        return _const_flags(ctx, x, True)
    return ctx.op.Not(ctx.op.Or(ctx.op.IsNaN(x), ctx.op.IsInf(x)))
