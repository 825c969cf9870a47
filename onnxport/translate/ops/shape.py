"""Shape manipulation: view/reshape, permute/transpose, (un)squeeze, expand, flatten.

Semantics: the PyTorch view/shape ops (torch.Tensor.view, permute, unsqueeze...) on ONNX Reshape
(``allowzero=0``: a 0 in a shape list only appears from SymInts, never as a copy request),
Transpose, Unsqueeze, Squeeze, Expand.
"""

from __future__ import annotations

import torch

from onnxport.translate.ops._common import axes_const, norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten


@translates(aten.view.default, aten.reshape.default, aten._unsafe_view.default)
def reshape(ctx, x, shape):
    return ctx.op.Reshape(x, ctx.shape_list(shape))


@translates(aten.permute.default)
def permute(ctx, x, dims):
    rank = ctx.rank(x)
    return ctx.op.Transpose(x, perm=[norm_axis(d, rank) for d in dims])


@translates(aten.transpose.int)
def transpose(ctx, x, dim0, dim1):
    rank = ctx.rank(x)
    perm = list(range(rank))
    a, b = norm_axis(dim0, rank), norm_axis(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.op.Transpose(x, perm=perm) if a != b else ctx.op.Identity(x)


@translates(aten.t.default, aten.numpy_T.default)
def t(ctx, x):
    rank = ctx.rank(x)
    return ctx.op.Transpose(x, perm=list(reversed(range(rank)))) if rank > 1 else ctx.op.Identity(x)


@translates(aten.unsqueeze.default)
def unsqueeze(ctx, x, dim):
    return ctx.op.Unsqueeze(x, axes_const(ctx, norm_axis(dim, ctx.rank(x) + 1)))
