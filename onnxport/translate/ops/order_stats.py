"""Order statistics along an axis: median.dim, nanmedian (all elements and along an axis).

Semantics: torch.median / torch.nanmedian (https://pytorch.org/docs/stable/generated/torch.median.html):
the lower median, the ((n - 1) // 2)-th smallest; median is NaN (at the first NaN's index) where
a slice holds a NaN, nanmedian takes the median of the slice's other values (NaN for an all-NaN
slice, at index 0: PyTorch's index there depends on its selection algorithm). Built on ONNX TopK,
which orders equal values by index, so ties pick the first occurrence.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate import dtypes
from onnxport.translate.ops._common import norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64


def median_along(ctx, x: ir.Value, axis: int, keepdim: bool, ignore_nan: bool) -> tuple[ir.Value, ir.Value]:
    """(values, int64 indices) of the lower median of ``x`` along ``axis``."""
    rank = ctx.rank(x)
    if rank == 0:
        return ctx.op.Identity(x), ctx.const(np.array(0, dtype=np.int64))
    axis = norm_axis(axis, rank)
    is_float = dtypes.is_float(x.dtype)
    nan = ctx.op.IsNaN(x) if is_float else None
    key = ctx.op.Where(nan, ctx.scalar(np.inf, x.dtype), x) if is_float else x  # NaN sorts last
    n = ctx.op.Shape(x, start=axis, end=axis + 1)
    _, order = ctx.op.TopK(key, n, axis=axis, largest=0, sorted=1, _outputs=2)
    if is_float and ignore_nan:  # a position per slice: (count of non-NaN - 1) // 2
        count = ctx.op.ReduceSum(ctx.op.Cast(ctx.op.Not(nan), to=I64), ctx.const([axis]), keepdims=1)
        k = ctx.op.Max(ctx.op.Div(ctx.op.Sub(count, ctx.scalar(1, I64)), ctx.scalar(2, I64)), ctx.scalar(0, I64))
    else:  # one position for every slice: (n - 1) // 2, broadcast to x's shape with 1 along axis
        k = ctx.op.Max(ctx.op.Div(ctx.op.Sub(n, ctx.scalar(1, I64)), ctx.scalar(2, I64)), ctx.scalar(0, I64))
        ones_at_axis = ctx.op.Concat(ctx.op.Shape(x, start=0, end=axis), ctx.const([1]),
                                     ctx.op.Shape(x, start=axis + 1), axis=0)
        k = ctx.op.Expand(ctx.op.Reshape(k, ctx.const([1] * rank)), ones_at_axis)
    index = ctx.op.GatherElements(order, k, axis=axis)
    if is_float and not ignore_nan:
        flags = ctx.op.Cast(nan, to=ir.DataType.INT32)
        has_nan = ctx.op.Cast(ctx.op.ReduceMax(flags, ctx.const([axis]), keepdims=1), to=ir.DataType.BOOL)
        index = ctx.op.Where(has_nan, ctx.op.ArgMax(flags, axis=axis, keepdims=1, select_last_index=0), index)
    values = ctx.op.GatherElements(x, index, axis=axis)
    if not keepdim:
        values, index = ctx.op.Squeeze(values, ctx.const([axis])), ctx.op.Squeeze(index, ctx.const([axis]))
    return values, index


@translates(aten.median.dim)
def median_dim(ctx, x, dim, keepdim=False):
    """median.dim(Tensor self, int dim, bool keepdim=False) -> (values, indices)."""
    return median_along(ctx, x, dim, keepdim, ignore_nan=False)


@translates(aten.nanmedian.dim)
def nanmedian_dim(ctx, x, dim, keepdim=False):
    """nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (values, indices): NaN ignored."""
    return median_along(ctx, x, dim, keepdim, ignore_nan=True)


@translates(aten.nanmedian.default)
def nanmedian(ctx, x):
    """nanmedian(Tensor self) -> 0-d: the lower median of the non-NaN elements."""
    flat = ctx.op.Reshape(x, ctx.const([-1]))
    flat.type, flat.shape = x.type, ir.Shape([None])
    return median_along(ctx, flat, 0, False, ignore_nan=True)[0]
