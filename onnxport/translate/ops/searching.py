"""Searching sorted sequences: searchsorted and bucketize.

Semantics: torch.searchsorted and torch.bucketize (https://pytorch.org/docs/stable/generated/
torch.searchsorted.html): the index where each value would be inserted into its sorted row,
left of equal elements (right=False, side="left") or right of them. That index is the number
of elements of the row below the value (left) or not above it (right), which ONNX computes as a
broadcast comparison (Less / LessOrEqual) summed with ReduceSum; ``sorter`` orders the row first
(GatherElements). The result is int64, int32 with out_int32.
"""

from __future__ import annotations

import onnx_ir as ir
import torch

from onnxport.translate import dtypes
from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64


def _count(ctx, boundaries, values, right: bool, out_int32: bool, one_d: bool):
    """Number of ``boundaries`` along the last axis below (right: not above) each value."""
    op = ctx.op
    if not isinstance(values, ir.Value):
        values = ctx.scalar(values, boundaries.dtype)
    if boundaries.dtype != values.dtype:
        common = ir.DataType.DOUBLE if dtypes.is_float(boundaries.dtype) or dtypes.is_float(values.dtype) else I64
        boundaries, values = ctx.cast(boundaries, common), ctx.cast(values, common)
    v = op.Unsqueeze(values, ctx.const([-1]))  # [..., K, 1]
    b = boundaries if one_d else op.Unsqueeze(boundaries, ctx.const([-2]))  # [M] or [..., 1, M]
    below = op.LessOrEqual(b, v) if right else op.Less(b, v)
    out = op.ReduceSum(ctx.cast(below, I64), ctx.const([-1]), keepdims=0)
    return ctx.cast(out, ir.DataType.INT32) if out_int32 else out


@translates(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def searchsorted(ctx, sorted_sequence, x, *, out_int32=False, right=False, side=None, sorter=None):
    """searchsorted(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False,
    str? side=None, Tensor? sorter=None): for a 1-D sequence every value is searched in it, else
    row by row (the leading dims of sequence and values match)."""
    one_d = len(sorted_sequence.shape) == 1
    if sorter is not None:
        sorted_sequence = ctx.op.GatherElements(sorted_sequence, sorter, axis=-1)
    right = right or side == "right"
    return _count(ctx, sorted_sequence, x, right, out_int32, one_d)


@translates(aten.bucketize.Tensor, aten.bucketize.Scalar)
def bucketize(ctx, x, boundaries, *, out_int32=False, right=False):
    """bucketize(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False): the
    bucket i of each value with boundaries[i-1] < x <= boundaries[i] (right: boundaries[i-1] <= x
    < boundaries[i]), i.e. searchsorted in the 1-D boundaries with right=True meaning side right."""
    return _count(ctx, boundaries, x, right, out_int32, one_d=True)
