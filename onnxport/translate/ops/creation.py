"""Tensor creation: arange, full/zeros/ones/empty, their new_* and *_like forms, scalar_tensor, fill,
tril/triu_indices, rand/randn (ONNX's own random generators: same distributions, other samples).

Semantics: torch.arange / full / zeros / ones / empty (``empty`` is filled with zeros, a valid
choice of its unspecified contents) on ONNX Range, ConstantOfShape and Expand. The result dtype
is the FX node's (torch's default-dtype rules already applied by torch.export).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate import dtypes
from onnxport.translate.registry import translates

aten = torch.ops.aten
_I64 = ir.DataType.INT64
_F64 = ir.DataType.DOUBLE


def _is_int_arg(v) -> bool:
    if isinstance(v, ir.Value):
        return dtypes.is_int(v.dtype)
    return isinstance(v, int) and not isinstance(v, bool)


def _as(ctx, v, dtype: ir.DataType) -> ir.Value:
    return ctx.cast(v, dtype) if isinstance(v, ir.Value) else ctx.scalar(v, dtype)


def _arange(ctx, start, end, step) -> ir.Value:
    to = ctx.out_dtype
    if all(_is_int_arg(v) for v in (start, end, step)):
        if all(isinstance(v, int) for v in (start, end, step)):
            return ctx.const(np.arange(start, end, step).astype(to.numpy()))
        out = ctx.op.Range(_as(ctx, start, _I64), _as(ctx, end, _I64), _as(ctx, step, _I64))
        return ctx.cast(_with_type(out, _I64), to)
    # float bounds or steps: n = ceil((end - start) / step) in double, values start + i * step
    # (torch computes each element from the index, not by accumulation)
    s, e, st = _as(ctx, start, _F64), _as(ctx, end, _F64), _as(ctx, step, _F64)
    n = ctx.op.Cast(ctx.op.Ceil(ctx.op.Div(ctx.op.Sub(e, s), st)), to=_I64)
    n = ctx.op.Max(n, ctx.scalar(0, _I64))
    i = ctx.op.Cast(ctx.op.Range(ctx.scalar(0, _I64), n, ctx.scalar(1, _I64)), to=_F64)
    return ctx.cast(_with_type(ctx.op.Add(s, ctx.op.Mul(i, st)), _F64), to)


def _with_type(v: ir.Value, dtype: ir.DataType) -> ir.Value:
    v.type = ir.TensorType(dtype)
    return v


@translates(aten.arange.default)
def arange(ctx, end, **_):
    """arange(Scalar end, *, dtype...): [0, end) in steps of 1 (ONNX Range; double math for floats)."""
    return _arange(ctx, 0, end, 1)


@translates(aten.arange.start)
def arange_start(ctx, start, end, **_):
    """arange.start(Scalar start, Scalar end, *, dtype...): [start, end) in steps of 1."""
    return _arange(ctx, start, end, 1)


@translates(aten.arange.start_step)
def arange_start_step(ctx, start, end, step=1, **_):
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, dtype...): torch.arange."""
    return _arange(ctx, start, end, step)


def _fill(ctx, shape: ir.Value, value, to: ir.DataType) -> ir.Value:
    """A tensor of ``shape`` (1-D int64 value) filled with ``value`` (Python number or 0-d value)."""
    if isinstance(value, ir.Value):
        return ctx.op.Expand(ctx.cast(value, to), shape)
    return ctx.op.ConstantOfShape(shape, value=ir.tensor(np.array([value], dtype=to.numpy())))


def _full(ctx, size, value) -> ir.Value:
    return _fill(ctx, ctx.shape_list(list(size)), value, ctx.out_dtype)


@translates(aten.full.default)
def full(ctx, size, fill_value, **_):
    """full(SymInt[] size, Scalar fill_value, *, dtype...): ONNX ConstantOfShape (Expand for a SymInt value)."""
    return _full(ctx, size, fill_value)


@translates(aten.zeros.default, aten.empty.memory_format)
def zeros(ctx, size, **_):
    """zeros(SymInt[] size, *, dtype...) and empty.memory_format (zero-filled)."""
    return _full(ctx, size, 0)


@translates(aten.ones.default)
def ones(ctx, size, **_):
    """ones(SymInt[] size, *, dtype...)."""
    return _full(ctx, size, 1)


@translates(aten.empty_strided.default)
def empty_strided(ctx, size, stride, **_):
    """empty_strided(SymInt[] size, SymInt[] stride, *, dtype...): zero-filled (strides are layout only)."""
    return _full(ctx, size, 0)


@translates(aten.empty_permuted.default)
def empty_permuted(ctx, size, physical_layout, **_):
    """empty_permuted(SymInt[] size, int[] physical_layout, *, dtype...): zero-filled (layout only)."""
    return _full(ctx, size, 0)


def _tri_indices(ctx, coords) -> ir.Value:
    return ctx.op.Identity(ctx.const(np.stack(coords).astype(ctx.out_dtype.numpy()).reshape(2, -1)))


@translates(aten.tril_indices.default)
def tril_indices(ctx, row, col, offset=0, **_):
    """tril_indices(int row, int col, int offset=0, *, dtype...) -> [2, n]: coordinates of the lower
    triangle in row-major order (a constant, as numpy.tril_indices computes it)."""
    return _tri_indices(ctx, np.tril_indices(row, offset, col))


@translates(aten.triu_indices.default)
def triu_indices(ctx, row, col, offset=0, **_):
    """triu_indices(int row, int col, int offset=0, *, dtype...) -> [2, n]: the upper triangle's."""
    return _tri_indices(ctx, np.triu_indices(row, offset, col))


@translates(aten.new_full.default)
def new_full(ctx, x, size, fill_value, **_):
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, dtype=self.dtype...)."""
    return _full(ctx, size, fill_value)


@translates(aten.new_zeros.default, aten.new_empty.default)
def new_zeros(ctx, x, size, **_):
    """new_zeros / new_empty(Tensor self, SymInt[] size, *, dtype=self.dtype...)."""
    return _full(ctx, size, 0)


@translates(aten.new_ones.default)
def new_ones(ctx, x, size, **_):
    """new_ones(Tensor self, SymInt[] size, *, dtype=self.dtype...)."""
    return _full(ctx, size, 1)


@translates(aten.new_empty_strided.default)
def new_empty_strided(ctx, x, size, stride, **_):
    """new_empty_strided(Tensor self, SymInt[] size, SymInt[] stride, ...): zero-filled."""
    return _full(ctx, size, 0)


@translates(aten.full_like.default)
def full_like(ctx, x, fill_value, **_):
    """full_like(Tensor self, Scalar fill_value, *, dtype...): ``fill_value`` in the shape of ``self``."""
    return _fill(ctx, ctx.shape(x), fill_value, ctx.out_dtype)


@translates(aten.zeros_like.default, aten.empty_like.default)
def zeros_like(ctx, x, **_):
    """zeros_like / empty_like(Tensor self, *, dtype...)."""
    return _fill(ctx, ctx.shape(x), 0, ctx.out_dtype)


@translates(aten.ones_like.default)
def ones_like(ctx, x, **_):
    """ones_like(Tensor self, *, dtype...)."""
    return _fill(ctx, ctx.shape(x), 1, ctx.out_dtype)


@translates(aten.fill.Scalar, aten.fill.Tensor)
def fill(ctx, x, value):
    """fill.Scalar / fill.Tensor(Tensor self, value): ``value`` (cast to self's dtype) in self's shape."""
    if isinstance(value, ir.Value) and value.shape is not None and len(value.shape) > 0:
        value = ctx.op.Reshape(value, ctx.const(np.array([], dtype=np.int64)))
    return _fill(ctx, ctx.shape(x), value, ctx.out_dtype)


@translates(aten.zero.default)
def zero(ctx, x):
    """zero(Tensor self): zeros in self's shape and dtype."""
    return _fill(ctx, ctx.shape(x), 0, ctx.out_dtype)


def _random(ctx, shape: ir.Value, normal: bool) -> ir.Value:
    """Samples of ``shape``; types the ONNX random operators lack (bfloat16) are drawn in float."""
    to = ctx.out_dtype
    work = to if to in (ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE) else ir.DataType.FLOAT
    like = ctx.op.ConstantOfShape(shape, value=ir.tensor(np.array([0], dtype=work.numpy())))
    out = ctx.op.RandomNormalLike(like, dtype=work) if normal else ctx.op.RandomUniformLike(like, dtype=work)
    return ctx.op.Cast(out, to=to) if work != to else out


@translates(aten.rand.default)
def rand(ctx, size, **_):
    """rand(SymInt[] size, *, dtype...): uniform on [0, 1) (ONNX RandomUniformLike; its own generator)."""
    return _random(ctx, ctx.shape_list(list(size)), False)


@translates(aten.randn.default)
def randn(ctx, size, **_):
    """randn(SymInt[] size, *, dtype...): standard normal samples (ONNX RandomNormalLike)."""
    return _random(ctx, ctx.shape_list(list(size)), True)


@translates(aten.rand_like.default)
def rand_like(ctx, x, **_):
    """rand_like(Tensor self, *, dtype...): uniform on [0, 1) in self's shape."""
    return _random(ctx, ctx.shape(x), False)


@translates(aten.randn_like.default)
def randn_like(ctx, x, **_):
    """randn_like(Tensor self, *, dtype...): standard normal samples in self's shape."""
    return _random(ctx, ctx.shape(x), True)


@translates(aten.scalar_tensor.default)
def scalar_tensor(ctx, s, **_):
    """scalar_tensor(Scalar s, *, dtype...): a 0-d tensor (a constant, or a Cast of a SymInt/SymFloat)."""
    to = ctx.out_dtype
    if isinstance(s, ir.Value):
        return ctx.op.Cast(s, to=to)
    return ctx.op.Identity(ctx.scalar(s, to))
