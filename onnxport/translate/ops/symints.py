"""SymInt / SymBool arithmetic (``operator.*``, ``aten.sym_size``) as int64 / bool scalars."""

from __future__ import annotations

import math
import operator

import numpy as np
import onnx_ir as ir
import sympy
import torch

from onnxport.errors import UnsupportedOpError
from onnxport.translate.registry import translates

aten = torch.ops.aten
_I64 = ir.DataType.INT64


def _v(ctx, x):
    if isinstance(x, ir.Value):
        return x
    if isinstance(x, bool):
        return ctx.scalar(x, ir.DataType.BOOL)
    if isinstance(x, int):
        return ctx.scalar(x, _I64)
    return ctx.scalar(x, ir.DataType.DOUBLE)


def _same(ctx, a, b):
    a, b = _v(ctx, a), _v(ctx, b)
    if a.dtype != b.dtype:
        to = ir.DataType.DOUBLE if ir.DataType.DOUBLE in (a.dtype, b.dtype) else _I64
        a, b = ctx.cast(a, to), ctx.cast(b, to)
    return a, b


@translates(aten.sym_size.int)
def sym_size(ctx, x, dim):
    """sym_size.int(Tensor self, int dim) -> SymInt: taken from the graph input carrying the symbol."""
    expr = ctx.meta_val.node.expr if isinstance(ctx.meta_val, torch.SymInt) else None
    if isinstance(expr, sympy.Symbol) and expr in ctx.sym_sources:
        src, axis = ctx.sym_sources[expr]
        return ctx.dim(src, axis)
    return ctx.dim(x, dim)


@translates(aten.size.default)
def size(ctx, x):
    """size(Tensor self) -> SymInt[]: each axis' size, a constant where static (as ``sym_size``)."""
    vals = ctx.meta_val if isinstance(ctx.meta_val, (list, tuple)) else [None] * ctx.rank(x)
    out = []
    for axis, v in enumerate(vals):
        expr = v.node.expr if isinstance(v, torch.SymInt) else None
        if isinstance(v, int):
            out.append(v)
        elif isinstance(expr, sympy.Symbol) and expr in ctx.sym_sources:
            out.append(ctx.dim(*ctx.sym_sources[expr]))
        else:
            out.append(ctx.dim(x, axis))
    return out


@translates(aten.sym_numel.default)
def sym_numel(ctx, x):
    return ctx.op.Size(x)


@translates(operator.add)
def add(ctx, a, b):
    return ctx.op.Add(*_same(ctx, a, b))


@translates(operator.sub)
def sub(ctx, a, b):
    return ctx.op.Sub(*_same(ctx, a, b))


@translates(operator.mul)
def mul(ctx, a, b):
    return ctx.op.Mul(*_same(ctx, a, b))


def _non_negative(arg) -> bool:
    """An FX argument known to be >= 0: an int, or a SymInt whose range (from the shape
    environment's size ranges) starts at 0 or above."""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
    if isinstance(val, int):
        return val >= 0
    if isinstance(val, torch.SymInt):
        try:
            return bool(val.node.shape_env.bound_sympy(val.node.expr).lower >= 0)
        except Exception:  # noqa: BLE001 - unknown range: not known non-negative
            return False
    return False


@translates(operator.floordiv)
def floordiv(ctx, a, b):
    """Python floor division (rounds toward -inf), unlike ONNX Div on ints (toward 0); ONNX Div
    alone where both operands are known non-negative (sizes), where the two agree."""
    node = ctx.current_node
    a, b = _same(ctx, a, b)
    if a.dtype == _I64 and node is not None and all(_non_negative(x) for x in node.args[:2]):
        return ctx.op.Div(a, b)
    if a.dtype == _I64:
        q = ctx.op.Div(a, b)
        r = ctx.op.Mod(a, b, fmod=0)
        # Div truncates; subtract 1 where the remainder is non-zero and signs differ
        fix = ctx.op.And(ctx.op.Not(ctx.op.Equal(r, ctx.scalar(0, _I64))),
                         ctx.op.Less(ctx.op.Mul(a, b), ctx.scalar(0, _I64)))
        return ctx.op.Sub(q, ctx.op.Cast(fix, to=_I64))
    return ctx.op.Floor(ctx.op.Div(a, b))


@translates(operator.mod)
def mod(ctx, a, b):
    a, b = _same(ctx, a, b)
    return ctx.op.Mod(a, b, fmod=0 if a.dtype == _I64 else 1)


@translates(operator.truediv)
def truediv(ctx, a, b):
    a, b = _v(ctx, a), _v(ctx, b)
    return ctx.op.Div(ctx.cast(a, ir.DataType.DOUBLE), ctx.cast(b, ir.DataType.DOUBLE))


@translates(operator.neg)
def neg(ctx, a):
    return ctx.op.Neg(_v(ctx, a))


def _cmp(op):
    def fn(ctx, a, b):
        return getattr(ctx.op, op)(*_same(ctx, a, b))

    return fn


for _pyop, _onnx in ((operator.eq, "Equal"), (operator.lt, "Less"), (operator.gt, "Greater"),
                     (operator.le, "LessOrEqual"), (operator.ge, "GreaterOrEqual")):
    translates(_pyop)(_cmp(_onnx))


@translates(operator.ne)
def ne(ctx, a, b):
    return ctx.op.Not(ctx.op.Equal(*_same(ctx, a, b)))


def _bits(logical: str, bitwise: str):
    """``&`` / ``|`` of SymBools (ONNX ``And`` / ``Or``) or of SymInts (``BitwiseAnd`` / ``BitwiseOr`` of
    int64, as Python's ``w & 3``), by the result's type (``ctx.meta_val``)."""

    def fn(ctx, a, b):
        if isinstance(ctx.meta_val, (bool, torch.SymBool)):
            return getattr(ctx.op, logical)(*(ctx.cast(_v(ctx, x), ir.DataType.BOOL) for x in (a, b)))
        return getattr(ctx.op, bitwise)(*(ctx.cast(_v(ctx, x), _I64) for x in (a, b)))

    return fn


translates(operator.and_)(_bits("And", "BitwiseAnd"))
translates(operator.or_)(_bits("Or", "BitwiseOr"))


@translates(torch.sym_not)
def sym_not(ctx, a):
    return ctx.op.Not(_v(ctx, a))


@translates(torch.sym_max)
def sym_max(ctx, a, b):
    return ctx.op.Max(*_same(ctx, a, b))


@translates(torch.sym_min)
def sym_min(ctx, a, b):
    return ctx.op.Min(*_same(ctx, a, b))


@translates(torch.sym_sum)
def sym_sum(ctx, args):
    """``torch.sym_sum([a, b, ...])``: the sum of symbolic sizes (PyTorch doc of ``torch.sym_sum``: ``sum``
    of a list of SymInts as one node), a Sum of int64 scalars (an empty list: 0)."""
    values = [_v(ctx, a) for a in args]
    if not values:
        return ctx.scalar(0, _I64)
    if any(v.dtype == ir.DataType.DOUBLE for v in values):
        values = [ctx.cast(v, ir.DataType.DOUBLE) for v in values]
    return values[0] if len(values) == 1 else ctx.op.Sum(*values)


@translates(torch.sym_float)
def sym_float(ctx, a):
    return ctx.cast(_v(ctx, a), ir.DataType.DOUBLE)


@translates(math.floor)
def floor(ctx, a):
    a = _v(ctx, a)
    return ctx.cast(ctx.op.Floor(a) if a.dtype == ir.DataType.DOUBLE else a, _I64)


@translates(torch.sym_int, math.trunc)
def sym_int(ctx, a):
    """``int(x)`` of a symbolic float: toward zero (Floor above 0, Ceil below), as Python's ``int``."""
    a = _v(ctx, a)
    if a.dtype != ir.DataType.DOUBLE:
        return ctx.cast(a, _I64)
    toward_zero = ctx.op.Where(ctx.op.Less(a, ctx.scalar(0.0, ir.DataType.DOUBLE)), ctx.op.Ceil(a), ctx.op.Floor(a))
    return ctx.cast(toward_zero, _I64)


@translates(torch.sym_ite)
def sym_ite(ctx, condition, if_true, if_false):
    """``torch.sym_ite(b, t, f)``: ``t`` where the symbolic bool ``b`` holds, else ``f`` (Where)."""
    return ctx.op.Where(_v(ctx, condition), *_same(ctx, if_true, if_false))


@translates(math.ceil)
def ceil(ctx, a):
    a = _v(ctx, a)
    return ctx.cast(ctx.op.Ceil(a) if a.dtype == ir.DataType.DOUBLE else a, _I64)


@translates(aten._assert_scalar.default, aten._assert_tensor_metadata.default,
            aten.sym_constrain_range_for_size.default, aten._assert_async.msg, aten.sym_constrain_range.default)
def assert_noop(ctx, *args, **kwargs):
    """Runtime assertions of torch.export carry no computation."""
    return None


@translates(aten._local_scalar_dense.default, aten.item.default)
def local_scalar_dense(ctx, x):
    """``tensor.item()``: the single element as a 0-d value (int64, double or bool), kept in the graph
    so that sizes computed from data (``x[:, :lengths.max()]``) stay dynamic."""
    to = ctx.out_dtype
    flat = ctx.op.Reshape(x, ctx.const(np.array([], dtype=np.int64)))
    return ctx.cast(flat, to)


@translates(torch._sym_sqrt)
def sym_sqrt(ctx, a):
    return ctx.op.Sqrt(ctx.cast(_v(ctx, a), ir.DataType.DOUBLE))


_VIEWS_BY_OFFSET = {aten.slice.Tensor, aten.select.int, aten.narrow.default}
_SAME_STORAGE = {aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.alias.default,
                 aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default}


@translates(aten.sym_storage_offset.default)
def sym_storage_offset(ctx, x):
    """sym_storage_offset(Tensor self) -> SymInt: where a view starts in its base's storage, in
    elements (torch.tensor_split asserts on it). Followed back through slice / select / narrow
    (start times the base's row-major stride along the axis, negative starts counted from the end
    and clamped as PyTorch does) and reshapes of contiguous tensors; 0 for a tensor that is no
    view. Other views (transposes, expands) are refused: their strides are not row-major."""
    node = ctx.current_node.args[0]
    total = ctx.scalar(0, _I64)
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if node.target in _SAME_STORAGE:
            node = node.args[0]
            continue
        if node.target not in _VIEWS_BY_OFFSET:
            if node.target in (aten.permute.default, aten.transpose.int, aten.expand.default, aten.t.default,
                               aten.as_strided.default, aten.diagonal.default, aten.unfold.default):
                raise UnsupportedOpError(f"the storage offset of a view made by {node.target}",
                                         hint="make the tensor contiguous (.contiguous()) before slicing it")
            break
        base = node.args[0]
        base_value = ctx.lookup(base)
        rank = ctx.rank(base_value)
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        dim = dim % rank
        start = node.args[2] if len(node.args) > 2 else node.kwargs.get("start", 0)
        start = 0 if start is None else start
        size = ctx.dim(base_value, dim)
        start = _v(ctx, ctx.lookup(start) if isinstance(start, torch.fx.Node) else start)
        start = ctx.op.Where(ctx.op.Less(start, ctx.scalar(0, _I64)), ctx.op.Add(start, size), start)
        start = ctx.op.Min(ctx.op.Max(start, ctx.scalar(0, _I64)), size)
        stride = ctx.scalar(1, _I64)
        for axis in range(dim + 1, rank):
            stride = ctx.op.Mul(stride, ctx.dim(base_value, axis))
        total = ctx.op.Add(total, ctx.op.Mul(start, stride))
        node = base
    return total
