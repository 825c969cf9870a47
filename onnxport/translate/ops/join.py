"""Joining and splitting: cat, stack, split, split_with_sizes, chunk, unbind.

Semantics: torch.cat / stack / split / chunk / unbind on ONNX Concat, Unsqueeze, Split and Squeeze.
The number of pieces a split produces is fixed at export (it is the length of the FX node's
``meta["val"]``); piece sizes may be symbolic.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate.ops._common import axes_const, norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten
_I64 = ir.DataType.INT64


def _is_legacy_empty(v: ir.Value, out_rank: int) -> bool:
    """A 1-D tensor of static size 0, which torch.cat skips whatever the other inputs' rank."""
    return v.shape is not None and list(v.shape) == [0] and out_rank != 1


@translates(aten.cat.default, aten.concat.default, aten.concatenate.default)
def cat(ctx, tensors, dim=0):
    """cat(Tensor[] tensors, int dim=0): ONNX Concat after casting every input to the promoted dtype.

    Legacy empty inputs (1-D of size 0) are skipped, as torch.cat does.
    """
    to = ctx.out_dtype
    rank = ctx.out_rank
    kept = [ctx.cast(t, to) for t in tensors if not _is_legacy_empty(t, rank)]
    if not kept:
        return ctx.cast(tensors[0], to)
    if len(kept) == 1:
        return kept[0]
    return ctx.op.Concat(*kept, axis=norm_axis(dim, rank))


@translates(aten.stack.default)
def stack(ctx, tensors, dim=0):
    """stack(Tensor[] tensors, int dim=0): Unsqueeze every input at ``dim``, then Concat."""
    to = ctx.out_dtype
    axis = norm_axis(dim, ctx.out_rank)
    parts = [ctx.op.Unsqueeze(ctx.cast(t, to), axes_const(ctx, axis)) for t in tensors]
    return parts[0] if len(parts) == 1 else ctx.op.Concat(*parts, axis=axis)


def _pieces(ctx) -> int:
    val = ctx.meta_val
    return len(val) if isinstance(val, (list, tuple)) else 1


def _split_equal(ctx, x, size, axis: int, n: int):
    """Split ``x`` along ``axis`` into ``n`` pieces of ``size`` (the last one takes the rest)."""
    if n == 1:
        return [x]
    d = x.shape[axis]
    if isinstance(d, int) and isinstance(size, int):
        sizes = [size] * (n - 1) + [d - size * (n - 1)]
        return list(ctx.op.Split(x, ctx.const(np.array(sizes, dtype=np.int64)), axis=axis, _outputs=n))
    size_v = ctx.scalar(size, _I64) if isinstance(size, int) else size
    last = ctx.op.Sub(ctx.dim(x, axis), ctx.op.Mul(size_v, ctx.scalar(n - 1, _I64)))
    last.type, last.shape = ir.TensorType(_I64), ir.Shape([])
    return list(ctx.op.Split(x, ctx.shape_list([size] * (n - 1) + [last]), axis=axis, _outputs=n))


@translates(aten.split.Tensor, aten.split_copy.Tensor, aten.unsafe_split.Tensor)
def split(ctx, x, split_size, dim=0):
    """split.Tensor(Tensor self, SymInt split_size, int dim=0): pieces of ``split_size``, the last smaller."""
    axis = norm_axis(dim, ctx.rank(x))
    return _split_equal(ctx, x, split_size, axis, _pieces(ctx))


@translates(aten.split_with_sizes.default, aten.split_with_sizes_copy.default,
            aten.unsafe_split_with_sizes.default)
def split_with_sizes(ctx, x, split_sizes, dim=0):
    """split_with_sizes(Tensor self, SymInt[] split_sizes, int dim=0): ONNX Split with those sizes."""
    axis = norm_axis(dim, ctx.rank(x))
    n = len(split_sizes)
    if n == 1:
        return [x]
    return list(ctx.op.Split(x, ctx.shape_list(list(split_sizes)), axis=axis, _outputs=n))


@translates(aten.chunk.default, aten.unsafe_chunk.default)
def chunk(ctx, x, chunks, dim=0):
    """chunk(Tensor self, int chunks, int dim=0): pieces of ceil(size / chunks); torch may return
    fewer than ``chunks`` pieces (their number is read from the node's result)."""
    axis = norm_axis(dim, ctx.rank(x))
    n = _pieces(ctx)
    d = x.shape[axis]
    if isinstance(d, int):
        size = -(-d // chunks)
    else:
        dv = ctx.dim(x, axis)
        size = ctx.op.Div(ctx.op.Add(dv, ctx.scalar(chunks - 1, _I64)), ctx.scalar(chunks, _I64))
        size.type, size.shape = ir.TensorType(_I64), ir.Shape([])
    return _split_equal(ctx, x, size, axis, n)


@translates(aten.unbind.int, aten.unbind_copy.int)
def unbind(ctx, x, dim=0):
    """unbind.int(Tensor self, int dim=0): Split into size-1 pieces then Squeeze ``dim``."""
    axis = norm_axis(dim, ctx.rank(x))
    n = _pieces(ctx)
    axes = axes_const(ctx, axis)
    if n == 1:
        return [ctx.op.Squeeze(x, axes)]
    parts = ctx.op.Split(x, ctx.const(np.ones(n, dtype=np.int64)), axis=axis, _outputs=n)
    return [ctx.op.Squeeze(p, axes) for p in parts]
