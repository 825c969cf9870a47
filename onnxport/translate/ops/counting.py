"""Counting and distinct values: bincount, _unique2 (torch.unique), unique_consecutive.

Semantics: torch.bincount, torch.unique (sorted on CPU whatever ``sorted`` says, which is what
eager PyTorch gives) and torch.unique_consecutive, on ONNX ScatterElements (reduction "add"),
Unique, CumSum and Compress. Their output sizes depend on the data: torch.export gives them
unbacked sizes, which the ONNX model computes at run time.
"""

from __future__ import annotations


import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import UnsupportedOpError
from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64


def _flat(ctx, x: ir.Value) -> ir.Value:
    out = ctx.op.Reshape(x, ctx.const([-1]))
    out.type, out.shape = x.type, ir.Shape([None])
    return out


def _empty(ctx, dtype: ir.DataType) -> ir.Value:
    return ctx.const(np.zeros([0], dtype=dtype.numpy()))


@translates(aten.bincount.default)
def bincount(ctx, x, weights=None, minlength=0):
    """bincount(Tensor self, Tensor? weights=None, SymInt minlength=0): out[v] = number (or summed
    weight) of the elements equal to v, for v in 0 .. max(max(self) + 1, minlength) - 1."""
    to = ctx.out_dtype
    x = ctx.cast(x, I64)
    top = ctx.op.ReduceMax(ctx.op.Concat(x, ctx.const([-1]), axis=0), keepdims=1)  # -1 when x is empty
    size = ctx.op.Max(ctx.op.Add(top, ctx.scalar(1, I64)), ctx.shape_list([minlength]))
    zeros = ctx.op.ConstantOfShape(size, value=ir.tensor(np.zeros([1], dtype=to.numpy())))
    updates = ctx.cast(weights, to) if weights is not None else \
        ctx.op.ConstantOfShape(ctx.op.Shape(x), value=ir.tensor(np.ones([1], dtype=to.numpy())))
    return ctx.op.ScatterElements(zeros, x, updates, axis=0, reduction="add")


@translates(aten._unique2.default)
def unique2(ctx, x, sorted=True, return_inverse=False, return_counts=False):
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False)
    -> (values, inverse, counts): ONNX Unique over the flattened input (sorted); ``inverse`` has
    the input's shape, and inverse / counts not asked for are empty."""
    values, _, inverse, counts = ctx.op.Unique(_flat(ctx, x), sorted=1, _outputs=4)
    inverse = ctx.op.Reshape(inverse, ctx.op.Shape(x)) if return_inverse else _empty(ctx, I64)
    return values, inverse, counts if return_counts else _empty(ctx, I64)


@translates(aten.unique_consecutive.default)
def unique_consecutive(ctx, x, return_inverse=False, return_counts=False, dim=None):
    """unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None)
    -> (values, inverse, counts): the first element of every run of equal elements of the flattened
    input; ``inverse`` (input's shape) numbers the runs, ``counts`` gives their lengths."""
    if dim is not None:
        raise UnsupportedOpError("unique_consecutive along a dimension (dim=...)",
                                 hint="call it without dim (over the flattened tensor)")
    flat = _flat(ctx, x)
    n = ctx.op.Shape(flat)
    previous = ctx.op.Slice(flat, ctx.const([0]), ctx.op.Sub(n, ctx.const([1])))
    changed = ctx.op.Not(ctx.op.Equal(ctx.op.Slice(flat, ctx.const([1]), n), previous))
    starts = ctx.op.Concat(ctx.op.Greater(n, ctx.const([0])), changed, axis=0)  # a run starts at 0 when not empty
    values = ctx.op.Compress(flat, starts, axis=0)
    inverse = _empty(ctx, I64)
    if return_inverse:
        run = ctx.op.Sub(ctx.op.CumSum(ctx.op.Cast(starts, to=I64), ctx.const(np.array(0, dtype=np.int64))),
                         ctx.scalar(1, I64))
        inverse = ctx.op.Reshape(run, ctx.op.Shape(x))
    counts = _empty(ctx, I64)
    if return_counts:
        positions = ctx.op.Reshape(ctx.op.NonZero(starts), ctx.const([-1]))
        counts = ctx.op.Sub(ctx.op.Concat(ctx.op.Slice(positions, ctx.const([1]), ctx.const([2**62])), n, axis=0),
                            positions)
    return values, inverse, counts
