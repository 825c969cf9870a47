"""Conversions and pass-through ops (to, _to_copy, type_as, clone, contiguous, alias, detach,
lift_fresh_copy, dropout), embedding, cumsum, ordering (topk, sort, argsort), tril/triu, one_hot.

Semantics: torch.Tensor.to / clone / contiguous (a copy or a dtype Cast), torch.nn.functional
.dropout (identity in eval mode; ONNX Dropout when training; feature and alpha dropout with their
own masks), torch.nn.functional.embedding (padding_idx only affects gradients), torch.cumsum,
torch.topk / sort / argsort (ONNX TopK, which orders equal values by index, as a stable sort
does), torch.tril / triu (ONNX Trilu) and torch.nn.functional.one_hot (ONNX OneHot).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate import dtypes
from onnxport.translate.ops._common import norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten
_I64 = ir.DataType.INT64
BOOL = ir.DataType.BOOL


# ------------------------------------------------------------------------------ conversions
@translates(aten.to.dtype, aten.to.dtype_layout, aten.to.device, aten.to.other, aten._to_copy.default,
            aten.to.prim_dtype, aten.to.prim_Device)
def to(ctx, x, *args, **kwargs):
    """to.* / _to_copy(Tensor self, ...): a Cast to the result's dtype; device, layout and memory
    format do not exist in ONNX.

    ``self`` may be a Python number: ``torch.vmap`` wraps a scalar operand of the batched function
    (``a * 2``) as ``_to_copy(2, dtype=...)`` once its batching is decomposed; it becomes a constant
    of the result's dtype and shape."""
    if not isinstance(x, ir.Value):
        val = ctx.meta_val
        shape = tuple(int(d) for d in val.shape) if isinstance(val, torch.Tensor) else ()
        return ctx.const(np.full(shape, x, dtype=ctx.out_dtype.numpy()))
    return ctx.cast(x, ctx.out_dtype)


@translates(aten.type_as.default)
def type_as(ctx, x, other):
    """type_as(Tensor self, Tensor other): self cast to other's dtype."""
    return ctx.cast(x, ctx.out_dtype)


@translates(aten.clone.default, aten.contiguous.default, aten.alias.default, aten.detach.default,
            aten.lift_fresh_copy.default, aten.lift_fresh.default, aten.alias_copy.default, aten.detach_copy.default)
def identity(ctx, x, *args, **kwargs):
    """clone / contiguous / alias / detach / lift_fresh_copy(Tensor self, ...): the value itself
    (ONNX values are immutable, so a copy is the same value)."""
    return x


@translates(aten.copy.default)
def copy(ctx, x, src, non_blocking=False):
    """copy(Tensor self, Tensor src, bool non_blocking=False): ``src`` cast to self's dtype and
    broadcast to self's shape (the functional form of ``self.copy_(src)``).

    A constant size of ``src`` over a dynamic one of ``self`` is a size torch.export read as that
    constant where a slice clamps it (``x[:2] = v`` expands ``v`` to 2 rows; at ``x.shape[0] = 1`` the
    slice has one, ``translate.clamped``): the broadcast is cut to self's shape with a ``Slice``, as
    eager PyTorch's expansion to the slice's runtime size would be."""
    src = ctx.cast(src, x.dtype)
    if src.shape is not None and x.shape is not None and list(src.shape) == list(x.shape):
        return src
    out = ctx.op.Expand(src, ctx.shape(x))
    if src.shape is None or x.shape is None:
        return out
    rank = len(x.shape)
    cut = [rank - 1 - i for i, (d, s) in enumerate(zip(reversed(list(x.shape)), reversed(list(src.shape))))
           if not isinstance(d, int) and isinstance(s, int) and s > 1]
    if not cut:
        return out
    cut.sort()
    ends = ctx.op.Gather(ctx.shape(x), ctx.const(np.array(cut, dtype=np.int64)), axis=0)
    return ctx.op.Slice(out, ctx.const(np.zeros(len(cut), dtype=np.int64)), ends,
                        ctx.const(np.array(cut, dtype=np.int64)))


_ALPHA = 1.7580993408473766  # PyTorch's alpha dropout constant (SELU's scale * alpha)


def _keep_mask(ctx, x: ir.Value, p: float, per_channel: bool) -> ir.Value:
    """Bernoulli(1 - p) keep mask in ``x``'s dtype: one draw per element, or one per ``[N, C]``
    channel broadcast over the other axes (feature dropout)."""
    if per_channel:
        shape = ctx.op.Concat(ctx.op.Shape(x, start=0, end=2), ctx.const(np.ones([ctx.rank(x) - 2], dtype=np.int64)),
                              axis=0)
    else:
        shape = ctx.shape(x)
    zeros = ctx.op.ConstantOfShape(shape, value=ir.tensor(np.zeros([1], dtype=np.float32)))
    u = ctx.op.RandomUniformLike(zeros, dtype=ir.DataType.FLOAT)
    return ctx.op.Cast(ctx.op.GreaterOrEqual(u, ctx.scalar(float(p), ir.DataType.FLOAT)), to=x.dtype)


def _dropout(ctx, x, p, train, feature: bool, alpha: bool):
    """PyTorch's ``_dropout_impl``: identity in eval mode (or p == 0), zeros for p == 1; plain
    dropout on ONNX Dropout; feature dropout with one mask per channel, scaled by 1 / (1 - p);
    alpha dropout ``x * m * a + (m - 1) * alpha * a + alpha * a * p`` with
    ``a = 1 / sqrt((alpha^2 p + 1)(1 - p))`` (the input's mean and variance kept for SELU)."""
    if not train or p == 0:
        return x
    if p == 1:
        return ctx.op.Mul(x, ctx.scalar(0, x.dtype))
    if not feature and not alpha:
        out, _ = ctx.op.Dropout(x, ctx.scalar(float(p), ir.DataType.FLOAT), ctx.scalar(True, BOOL), _outputs=2)
        return out
    keep = _keep_mask(ctx, x, p, per_channel=feature)
    if not alpha:
        return ctx.op.Mul(ctx.op.Mul(x, keep), ctx.scalar(1.0 / (1.0 - p), x.dtype))
    a = 1.0 / ((_ALPHA * _ALPHA * p + 1) * (1 - p)) ** 0.5
    shift = ctx.op.Mul(ctx.op.Sub(keep, ctx.scalar(1, x.dtype)), ctx.scalar(_ALPHA * a, x.dtype))
    return ctx.op.Add(ctx.op.Add(ctx.op.Mul(ctx.op.Mul(x, keep), ctx.scalar(a, x.dtype)), shift),
                      ctx.scalar(_ALPHA * a * p, x.dtype))


@translates(aten.dropout.default)
def dropout(ctx, x, p, train):
    """dropout(Tensor input, float p, bool train): ONNX Dropout (training_mode) when training."""
    return _dropout(ctx, x, p, train, feature=False, alpha=False)


@translates(aten.feature_dropout.default)
def feature_dropout(ctx, x, p, train):
    """feature_dropout(Tensor input, float p, bool train): whole ``[N, C]`` channels dropped."""
    return _dropout(ctx, x, p, train, feature=True, alpha=False)


@translates(aten.alpha_dropout.default)
def alpha_dropout(ctx, x, p, train):
    """alpha_dropout(Tensor input, float p, bool train): dropped elements set to SELU's negative
    saturation, affinely corrected."""
    return _dropout(ctx, x, p, train, feature=False, alpha=True)


@translates(aten.feature_alpha_dropout.default)
def feature_alpha_dropout(ctx, x, p, train):
    """feature_alpha_dropout(Tensor input, float p, bool train): alpha dropout of whole channels."""
    return _dropout(ctx, x, p, train, feature=True, alpha=True)


@translates(aten.native_dropout.default)
def native_dropout(ctx, x, p, train):
    """native_dropout(Tensor input, float p, bool? train) -> (output, mask): (x, all-True) in eval,
    (zeros, all-False) for p == 1."""
    if train and p == 1:
        return (ctx.op.Mul(x, ctx.scalar(0, x.dtype)),
                ctx.op.ConstantOfShape(ctx.shape(x), value=ir.tensor(np.array([False]))))
    if not train or p == 0:
        return x, ctx.op.ConstantOfShape(ctx.shape(x), value=ir.tensor(np.array([True])))
    out, mask = ctx.op.Dropout(x, ctx.scalar(float(p), ir.DataType.FLOAT), ctx.scalar(True, BOOL), _outputs=2)
    return out, mask


# ------------------------------------------------------------------------------ embedding, cumsum
@translates(aten.embedding.default)
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """embedding(Tensor weight[V, D], Tensor indices[...], int padding_idx=-1, ...) -> [..., D]:
    ONNX Gather on axis 0 (padding_idx changes only the gradient)."""
    return ctx.op.Gather(weight, ctx.cast(indices, _I64), axis=0)


# torch's CPU accumulation type of a cumsum (at::acc_type<T, /*is_cuda=*/false>), by result dtype
_CUMSUM_ACCUMULATES_IN = {ir.DataType.FLOAT: ir.DataType.DOUBLE, ir.DataType.DOUBLE: ir.DataType.DOUBLE,
                          ir.DataType.INT32: ir.DataType.INT32, ir.DataType.INT64: ir.DataType.INT64}


@translates(aten.cumsum.default)
def cumsum(ctx, x, dim, dtype=None):
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None): ONNX CumSum in torch's CPU
    accumulation type, cast to the result dtype: float32 accumulates in float64 (a float32 running
    sum over 65,536 elements is 100-200x farther from float64 than eager's; in float64 it is as
    close as eager, for 1.2-2x the time: benchmarks/NUMERICS.md), float16 and bfloat16 in float32,
    integers and bool in int64 (an int32 result in int32: the same sum, wrapped)."""
    to = ctx.out_dtype
    rank = ctx.rank(x)
    if rank == 0:
        return ctx.cast(x, to)
    work = _CUMSUM_ACCUMULATES_IN.get(to, ir.DataType.FLOAT if dtypes.is_float(to) else _I64)
    out = ctx.op.CumSum(ctx.cast(x, work), ctx.scalar(norm_axis(dim, rank), _I64))
    out.type = ir.TensorType(work)
    return ctx.cast(out, to)


# ------------------------------------------------------------------------------ ordering
def _topk(ctx, x, k, axis: int, largest: bool):
    """ONNX TopK (sorted); bool and bfloat16, which TopK does not take, go through int32 / float."""
    work = {BOOL: ir.DataType.INT32, ir.DataType.BFLOAT16: ir.DataType.FLOAT}.get(x.dtype)
    values, idx = ctx.op.TopK(ctx.cast(x, work) if work else x, ctx.shape_list([k]), axis=axis,
                              largest=int(bool(largest)), sorted=1, _outputs=2)
    if work:
        values = ctx.op.Cast(values, to=x.dtype)
    return values, idx


@translates(aten.topk.default)
def topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (values,
    indices): ONNX TopK."""
    rank = ctx.rank(x)
    if rank == 0:
        return x, ctx.const(np.array(0, dtype=np.int64))
    return _topk(ctx, x, k, norm_axis(dim, rank), largest)


def _sort(ctx, x, dim, descending):
    rank = ctx.rank(x)
    if rank == 0:
        return x, ctx.const(np.array(0, dtype=np.int64))
    axis = norm_axis(dim, rank)
    return _topk(ctx, x, ctx.dim(x, axis), axis, descending)


@translates(aten.sort.default)
def sort(ctx, x, dim=-1, descending=False):
    """sort(Tensor self, int dim=-1, bool descending=False) -> (values, indices): ONNX TopK with
    k = size of ``dim`` (ties keep their order)."""
    return _sort(ctx, x, dim, descending)


@translates(aten.sort.stable)
def sort_stable(ctx, x, *, stable=None, dim=-1, descending=False):
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False): as sort."""
    return _sort(ctx, x, dim, descending)


@translates(aten.argsort.default)
def argsort(ctx, x, dim=-1, descending=False):
    """argsort(Tensor self, int dim=-1, bool descending=False): the indices of sort."""
    return _sort(ctx, x, dim, descending)[1]


@translates(aten.argsort.stable)
def argsort_stable(ctx, x, *, stable, dim=-1, descending=False):
    """argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False)."""
    return _sort(ctx, x, dim, descending)[1]


@translates(aten.kthvalue.default)
def kthvalue(ctx, x, k, dim=-1, keepdim=False):
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (values, indices): the
    k-th smallest along ``dim`` (ONNX TopK with largest=0, then the (k-1)-th entry)."""
    rank = ctx.rank(x)
    if rank == 0:
        return x, ctx.const(np.array(0, dtype=np.int64))
    axis = norm_axis(dim, rank)
    values, idx = _topk(ctx, x, k, axis, False)
    pos = ctx.op.Sub(ctx.shape_list([k]), ctx.const(np.array([1], dtype=np.int64)))
    if not keepdim:
        pos = ctx.op.Squeeze(pos, ctx.const(np.array([0], dtype=np.int64)))
    return ctx.op.Gather(values, pos, axis=axis), ctx.op.Gather(idx, pos, axis=axis)


@translates(aten.histc.default)
def histc(ctx, x, bins=100, min=0, max=0):
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> [bins] of self's dtype: counts
    of the elements in ``bins`` equal-width bins over [min, max]; elements outside are ignored, the
    value max falls in the last bin; min == max takes the data's min and max (widened by 1 when
    equal). Bin = floor((x - min) * bins / (max - min)), as PyTorch's CPU kernel computes it;
    the counts come from an [n, bins] comparison summed over n."""
    to = ctx.out_dtype
    flat = ctx.op.Reshape(ctx.cast(x, to), ctx.const(np.array([-1], dtype=np.int64)))
    if min == max:
        lo, hi = ctx.op.ReduceMin(flat, keepdims=0), ctx.op.ReduceMax(flat, keepdims=0)
        same = ctx.op.Equal(lo, hi)
        one = ctx.scalar(1, to)
        lo = ctx.op.Where(same, ctx.op.Sub(lo, one), lo)
        hi = ctx.op.Where(same, ctx.op.Add(hi, one), hi)
    else:
        lo, hi = ctx.scalar(min, to), ctx.scalar(max, to)
    inside = ctx.op.And(ctx.op.GreaterOrEqual(flat, lo), ctx.op.LessOrEqual(flat, hi))
    pos = ctx.op.Div(ctx.op.Mul(ctx.op.Sub(flat, lo), ctx.scalar(bins, to)), ctx.op.Sub(hi, lo))
    pos = ctx.op.Min(ctx.op.Cast(ctx.op.Floor(pos), to=_I64), ctx.scalar(bins - 1, _I64))
    hit = ctx.op.And(ctx.op.Equal(ctx.op.Unsqueeze(pos, ctx.const(np.array([1], dtype=np.int64))),
                                  ctx.const(np.arange(bins, dtype=np.int64)[None, :])),
                     ctx.op.Unsqueeze(inside, ctx.const(np.array([1], dtype=np.int64))))
    return ctx.op.ReduceSum(ctx.op.Cast(hit, to=to), ctx.const(np.array([0], dtype=np.int64)), keepdims=0)


# ------------------------------------------------------------------------------ triangles, one_hot
def _trilu(ctx, x, diagonal, upper: int):
    k = ctx.shape_list([diagonal]) if not isinstance(diagonal, int) else ctx.const(np.array(diagonal, dtype=np.int64))
    if not isinstance(diagonal, int):
        k = ctx.op.Reshape(k, ctx.const(np.array([], dtype=np.int64)))
    return ctx.op.Trilu(x, k, upper=upper)


@translates(aten.tril.default)
def tril(ctx, x, diagonal=0):
    """tril(Tensor self, int diagonal=0): ONNX Trilu(upper=0) on the last two axes."""
    return _trilu(ctx, x, diagonal, 0)


@translates(aten.triu.default)
def triu(ctx, x, diagonal=0):
    """triu(Tensor self, int diagonal=0): ONNX Trilu(upper=1) on the last two axes."""
    return _trilu(ctx, x, diagonal, 1)


@translates(aten.one_hot.default)
def one_hot(ctx, x, num_classes=-1):
    """one_hot(Tensor self, int num_classes=-1) -> int64 [..., num_classes]: ONNX OneHot;
    num_classes=-1 takes max(self) + 1. OneHot needs indices of rank >= 1: a 0-d index is made
    [1] and the result [num_classes]."""
    x = ctx.cast(x, _I64)
    scalar = ctx.rank(x) == 0
    if scalar:
        x = ctx.op.Unsqueeze(x, ctx.const([0]))
    if isinstance(num_classes, int) and num_classes < 0:
        depth = ctx.op.Add(ctx.op.ReduceMax(x, keepdims=0), ctx.scalar(1, _I64))
    else:
        depth = ctx.scalar(num_classes, _I64) if isinstance(num_classes, int) else num_classes
    out = ctx.op.OneHot(x, depth, ctx.const(np.array([0, 1], dtype=np.int64)), axis=-1)
    return ctx.op.Squeeze(out, ctx.const([0])) if scalar else out
