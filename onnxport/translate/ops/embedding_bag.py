"""Embedding bags: _embedding_bag_forward_only / _embedding_bag (torch.nn.functional.embedding_bag).

Semantics: torch.nn.functional.embedding_bag (https://pytorch.org/docs/stable/generated/torch.nn.functional.embedding_bag.html):
bag ``b`` holds the indices from ``offsets[b]`` to the next offset; its rows, weighted by
``per_sample_weights`` (sum mode), are summed, averaged (an empty bag gives zeros) or maxed; an
index equal to ``padding_idx`` is left out. On ONNX Gather and ScatterElements with reduction.
"""

from __future__ import annotations

import operator

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import UnsupportedOpError
from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64


@translates(aten._embedding_bag_forward_only.default, aten._embedding_bag.default)
def embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """_embedding_bag_forward_only(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq,
    int mode (0 sum, 1 mean, 2 max), bool sparse, Tensor? per_sample_weights, bool include_last_offset,
    int padding_idx) -> (output [bags, D], offset2bag, bag_size, max_indices); max_indices is
    refused where read."""
    for user in ctx.current_node.users:
        if user.target is operator.getitem and user.args[1] == 3 and user.users:
            raise UnsupportedOpError("the max_indices output of embedding_bag", hint="use only the bag values")
    to = weight.dtype
    indices = ctx.cast(indices, I64)
    offsets = ctx.cast(offsets, I64)
    if include_last_offset:
        offsets = ctx.op.Slice(offsets, ctx.const([0]), ctx.const([-1]))
    n = ctx.op.Shape(indices)
    positions = ctx.op.Range(ctx.scalar(0, I64), ctx.op.Squeeze(n, ctx.const([0])), ctx.scalar(1, I64))
    # offset2bag[i] = number of bags starting at or before i, minus one
    started = ctx.op.LessOrEqual(ctx.op.Unsqueeze(offsets, ctx.const([0])), ctx.op.Unsqueeze(positions, ctx.const([1])))
    bag = ctx.op.Sub(ctx.op.ReduceSum(ctx.op.Cast(started, to=I64), ctx.const([1]), keepdims=0), ctx.scalar(1, I64))
    keep = ctx.op.Not(ctx.op.Equal(indices, ctx.scalar(padding_idx, I64))) \
        if padding_idx is not None and padding_idx >= 0 else ctx.op.Equal(indices, indices)
    rows = ctx.op.Gather(weight, indices, axis=0)  # [n, D]
    if per_sample_weights is not None:
        rows = ctx.op.Mul(rows, ctx.op.Unsqueeze(ctx.cast(per_sample_weights, to), ctx.const([1])))
    bags = ctx.op.Shape(offsets)
    out_shape = ctx.op.Concat(bags, ctx.op.Shape(weight, start=1, end=2), axis=0)
    target = ctx.op.Expand(ctx.op.Unsqueeze(bag, ctx.const([1])), ctx.op.Shape(rows))
    keep_rows = ctx.op.Unsqueeze(keep, ctx.const([1]))
    count = ctx.op.ScatterElements(ctx.op.ConstantOfShape(bags, value=ir.tensor(np.zeros([1], dtype=np.int64))),
                                   bag, ctx.op.Cast(keep, to=I64), axis=0, reduction="add")
    if int(mode) == 2:
        low = ctx.op.ConstantOfShape(out_shape, value=ir.tensor(np.array([-np.inf], dtype=to.numpy())))
        picked = ctx.op.Where(keep_rows, rows, ctx.scalar(-np.inf, to))
        out = ctx.op.ScatterElements(low, target, picked, axis=0, reduction="max")
        empty = ctx.op.Unsqueeze(ctx.op.Equal(count, ctx.scalar(0, I64)), ctx.const([1]))
        out = ctx.op.Where(empty, ctx.scalar(0, to), out)
    else:
        zeros = ctx.op.ConstantOfShape(out_shape, value=ir.tensor(np.zeros([1], dtype=to.numpy())))
        picked = ctx.op.Where(keep_rows, rows, ctx.scalar(0, to))
        out = ctx.op.ScatterElements(zeros, target, picked, axis=0, reduction="add")
        if int(mode) == 1:
            denom = ctx.cast(ctx.op.Max(count, ctx.scalar(1, I64)), to)
            out = ctx.op.Div(out, ctx.op.Unsqueeze(denom, ctx.const([1])))
    return out, _as_traced(ctx, 1, bag), _as_traced(ctx, 2, count), None


def _as_traced(ctx, index: int, value: ir.Value) -> ir.Value:
    """The op's output ``index`` as torch's kernel gives it: empty where torch's shape of it is ``[0]``
    (a sum without padding takes the kernel's fast path, which fills no ``offset2bag``), else ``value``."""
    traced = ctx.current_node.meta.get("val")
    shape = getattr(traced[index], "shape", None) if isinstance(traced, (list, tuple)) and len(traced) > index \
        else None
    if shape is not None and len(shape) == 1 and isinstance(shape[0], int) and shape[0] == 0:
        return ctx.const(np.zeros([0], dtype=np.int64))
    return value
