"""Pairwise distances: _cdist_forward (torch.cdist) and _pdist_forward (F.pdist).

Semantics: torch.cdist and torch.nn.functional.pdist (https://pytorch.org/docs/stable/generated/
torch.cdist.html): the p-norm ||a - b||_p = (sum |a_k - b_k|^p)^(1/p) between rows; p = 0 counts
the differing coordinates, p = inf takes the largest difference. Built from the broadcast
differences of the rows (ONNX Sub, Abs, Pow, ReduceSum / ReduceMax), which is exact where
PyTorch's matrix-product form of p = 2 rounds.
"""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64


def _p_norm(ctx, diff, p: float, to: ir.DataType):
    """The p-norm of ``diff`` over its last axis (dropped)."""
    op = ctx.op
    axes = ctx.const([-1])
    a = op.Abs(diff)
    if p == 0:
        return op.ReduceSum(ctx.cast(op.Not(op.Equal(a, ctx.scalar(0, to))), to), axes, keepdims=0)
    if math.isinf(p):
        # over no coordinates the norm is 0 (ReduceMax of nothing is -inf)
        return op.Max(op.ReduceMax(a, axes, keepdims=0), ctx.scalar(0, to))
    if p == 1:
        return op.ReduceSum(a, axes, keepdims=0)
    if p == 2:
        return op.Sqrt(op.ReduceSum(op.Mul(a, a), axes, keepdims=0))
    return op.Pow(op.ReduceSum(op.Pow(a, ctx.scalar(p, to)), axes, keepdims=0), ctx.scalar(1.0 / p, to))


@translates(aten._cdist_forward.default)
def cdist_forward(ctx, x1, x2, p, compute_mode=None):
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> [..., P, R]: the p-norm
    distance between every row of x1 [..., P, M] and every row of x2 [..., R, M] (batch dims
    broadcast), from the differences x1[..., :, None, :] - x2[..., None, :, :]."""
    to = ctx.out_dtype
    a = ctx.op.Unsqueeze(ctx.cast(x1, to), ctx.const([-2]))
    b = ctx.op.Unsqueeze(ctx.cast(x2, to), ctx.const([-3]))
    return _p_norm(ctx, ctx.op.Sub(a, b), float(p), to)


@translates(aten._pdist_forward.default)
def pdist_forward(ctx, x, p=2.0):
    """_pdist_forward(Tensor self, float p=2) -> [N (N - 1) / 2]: the p-norm distance between rows
    i < j of self [N, M], in row-major order of (i, j): the full [N, N] distance matrix, then its
    strict upper triangle kept with Compress."""
    op = ctx.op
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    full = _p_norm(ctx, op.Sub(op.Unsqueeze(x, ctx.const([1])), op.Unsqueeze(x, ctx.const([0]))), float(p), to)
    n = op.Gather(op.Shape(x), ctx.const(0), axis=0)
    idx = op.Range(ctx.scalar(0, I64), n, ctx.scalar(1, I64))
    upper = op.Less(op.Unsqueeze(idx, ctx.const([1])), op.Unsqueeze(idx, ctx.const([0])))
    flat = ctx.const([-1])
    return op.Compress(op.Reshape(full, flat), op.Reshape(upper, flat), axis=0)
