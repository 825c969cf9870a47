"""Indexing: slice, select, narrow, index (advanced indexing), index_put, index_select, gather,
take, scatter / scatter_add / scatter_reduce, slice_scatter, select_scatter, masked_fill,
masked_scatter, masked_select, nonzero, nonzero_static.

Semantics: PyTorch indexing (https://pytorch.org/docs/stable/tensor_view.html and NumPy's advanced
indexing rules that torch follows) on ONNX Slice, Gather, GatherElements, GatherND,
ScatterElements (reductions add/mul/max/min), ScatterND (reduction="add"), NonZero, Compress and
Where. Negative indices stay as they are: these ONNX operators take indices in [-size, size - 1].
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate import dtypes
from onnxport.translate.ops._common import norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten
INT64_MAX = 2**63 - 1
_I64 = ir.DataType.INT64
BOOL = ir.DataType.BOOL


def where(ctx, cond: ir.Value, a: ir.Value, b: ir.Value, dtype: ir.DataType | None = None) -> ir.Value:
    """ONNX Where, through uint8 for bool operands (onnxruntime has no bool Where kernel);
    ``dtype`` is the operands' type when they carry none yet."""
    if (dtype or a.dtype or b.dtype) == BOOL:
        u8 = ir.DataType.UINT8
        return ctx.op.Cast(ctx.op.Where(cond, ctx.cast(a, u8), ctx.cast(b, u8)), to=BOOL)
    return ctx.op.Where(cond, a, b)


def _c(ctx, values) -> ir.Value:
    return ctx.const(np.array(values, dtype=np.int64))


def _typed(v: ir.Value, dtype: ir.DataType, shape) -> ir.Value:
    v.type = ir.TensorType(dtype)
    v.shape = ir.Shape(shape) if shape is not None else None
    return v


# ------------------------------------------------------------------------------ slicing
@translates(aten.slice.Tensor, aten.slice_copy.Tensor)
def slice_(ctx, x, dim=0, start=None, end=None, step=1):
    """slice.Tensor(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1).

    ONNX Slice: negative and out-of-range bounds clamp the way Python slicing does on both sides.
    """
    axis = norm_axis(dim, ctx.rank(x))
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    if isinstance(start, int) and start == 0 and isinstance(end, int) and end >= INT64_MAX \
            and isinstance(step, int) and step == 1:
        return x
    return ctx.op.Slice(x, ctx.shape_list([start]), ctx.shape_list([end]), _c(ctx, [axis]), ctx.shape_list([step]))


@translates(aten.select.int, aten.select_copy.int)
def select(ctx, x, dim, index):
    """select.int(Tensor self, int dim, SymInt index): ONNX Gather with a 0-d index (negative counts
    from the end, as in the Gather spec)."""
    axis = norm_axis(dim, ctx.rank(x))
    idx = ctx.scalar(index, _I64) if not isinstance(index, ir.Value) else ctx.cast(index, _I64)
    return ctx.op.Gather(x, idx, axis=axis)


@translates(aten.narrow.default, aten.narrow.Tensor, aten.narrow_copy.default)
def narrow(ctx, x, dim, start, length):
    """narrow(Tensor self, int dim, SymInt start, SymInt length): x.slice(dim, start, start + length);
    a negative ``start`` counts from the end."""
    axis = norm_axis(dim, ctx.rank(x))
    if isinstance(start, int) and isinstance(length, int):
        if start < 0:
            start = ctx.op.Add(ctx.dim(x, axis), ctx.scalar(start, _I64))
            start = _typed(start, _I64, [])
        else:
            return ctx.op.Slice(x, _c(ctx, [start]), _c(ctx, [start + length]), _c(ctx, [axis]))
    s = ctx.shape_list([start]) if not isinstance(start, ir.Value) or start.dtype == _I64 else \
        ctx.shape_list([_typed(ctx.op.Cast(start, to=_I64), _I64, start.shape)])
    if isinstance(start, ir.Value) and not (isinstance(start.shape, ir.Shape) and len(start.shape) == 1):
        # a negative tensor start counts from the end
        n = ctx.shape_list([ctx.dim(x, axis)])
        s = ctx.op.Where(ctx.op.Less(s, _c(ctx, [0])), ctx.op.Add(s, n), s)
    e = ctx.op.Add(s, ctx.shape_list([length]))
    return ctx.op.Slice(x, s, e, _c(ctx, [axis]))


def _axis_range(ctx, x, axis, start, end, step) -> ir.Value:
    """1-D int64 positions ``range(*slice(start, end, step).indices(size))`` along ``axis`` of ``x``."""
    n = ctx.dim(x, axis)
    all_pos = ctx.op.Range(ctx.scalar(0, _I64), n, ctx.scalar(1, _I64))
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    return ctx.op.Slice(all_pos, ctx.shape_list([start]), ctx.shape_list([end]), _c(ctx, [0]), ctx.shape_list([step]))


def _along(ctx, idx_1d: ir.Value, axis: int, rank: int, like: ir.Value) -> ir.Value:
    """Broadcast 1-D positions along ``axis`` to the shape of ``like``."""
    shape = [1] * rank
    shape[axis] = -1
    return ctx.op.Expand(ctx.op.Reshape(idx_1d, _c(ctx, shape)), ctx.shape(like))


@translates(aten.slice_scatter.default)
def slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start, SymInt? end, SymInt step=1):
    ``self`` with ``self[..., start:end:step, ...] = src`` (ONNX ScatterElements)."""
    rank = ctx.rank(x)
    axis = norm_axis(dim, rank)
    pos = _axis_range(ctx, x, axis, start, end, step)
    return ctx.op.ScatterElements(x, _along(ctx, pos, axis, rank, src), ctx.cast(src, x.dtype), axis=axis)


@translates(aten.select_scatter.default)
def select_scatter(ctx, x, src, dim, index):
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index): ``self`` with
    ``self.select(dim, index) = src``."""
    rank = ctx.rank(x)
    axis = norm_axis(dim, rank)
    src = ctx.op.Unsqueeze(ctx.cast(src, x.dtype), _c(ctx, [axis]))
    idx = ctx.shape_list([index])
    if not (isinstance(index, int) and index >= 0):
        idx = ctx.op.Where(ctx.op.Less(idx, _c(ctx, [0])), ctx.op.Add(idx, ctx.shape_list([ctx.dim(x, axis)])), idx)
    return ctx.op.ScatterElements(x, _along(ctx, idx, axis, rank, src), src, axis=axis)


# ------------------------------------------------------------------------------ advanced indexing
def _expand_masks(ctx, indices) -> list:
    """Replace each bool mask of rank k by k int64 index tensors (its nonzero coordinates)."""
    out: list = []
    for idx in indices:
        if isinstance(idx, ir.Value) and idx.dtype in (BOOL, ir.DataType.UINT8):
            k = len(idx.shape)
            nz = ctx.op.NonZero(ctx.cast(idx, BOOL))  # [k, N]
            for j in range(k):
                row = ctx.op.Gather(nz, ctx.scalar(j, _I64), axis=0)
                out.append(_typed(row, _I64, [None]))
        else:
            out.append(idx)
    return out


def _plan(ctx, x, indices):
    """Common part of index / index_put.

    Returns (x with the indexed axes moved first, the [B..., k] stacked index for GatherND /
    ScatterND, the indexed axes, the other axes, whether the indexed axes are adjacent).
    """
    rank = ctx.rank(x)
    indices = _expand_masks(ctx, list(indices))
    indices += [None] * (rank - len(indices))
    pos = [i for i, v in enumerate(indices) if v is not None]
    if not pos:
        raise TranslationError("index with no index tensor", hint="use slicing for an all-None index")
    # negative indices need no wrapping: GatherND and ScatterND take [-size, size - 1]
    idx = [ctx.cast(indices[p], _I64) for p in pos]
    shapes = [tuple(v.shape) if v.shape is not None else None for v in idx]
    if len(idx) > 1 and (None in shapes or len(set(shapes)) > 1):
        common = idx[0]
        for v in idx[1:]:
            common = ctx.op.Expand(common, ctx.shape(v))
        shape_b = ctx.op.Shape(common)
        idx = [ctx.op.Expand(v, shape_b) for v in idx]
    stacked = ctx.op.Concat(*[ctx.op.Unsqueeze(v, _c(ctx, [-1])) for v in idx], axis=-1) if len(idx) > 1 \
        else ctx.op.Unsqueeze(idx[0], _c(ctx, [-1]))
    rest = [i for i in range(rank) if i not in pos]
    perm = pos + rest
    xt = ctx.op.Transpose(x, perm=perm) if perm != list(range(rank)) else x
    adjacent = pos == list(range(pos[0], pos[-1] + 1))
    return xt, stacked, pos, rest, adjacent


def _result_perm(nb: int, p0: int, n_rest: int) -> list[int]:
    """Permutation moving the nb broadcast dims (first) to position p0 among the rest dims."""
    return [nb + i for i in range(p0)] + list(range(nb)) + [nb + i for i in range(p0, n_rest)]


@translates(aten.index.Tensor, aten._unsafe_index.Tensor)
def index(ctx, x, indices):
    """index.Tensor(Tensor self, Tensor?[] indices): advanced indexing (``x[i]``, ``x[:, i, j]``,
    ``x[mask]``).

    One int index tensor: ONNX Gather on its axis. Otherwise bool masks become their nonzero
    coordinates, the index tensors broadcast together and ONNX GatherND reads the indexed axes
    (moved first); the broadcast dims take the place of the first indexed axis when the indexed
    axes are adjacent, else they come first (NumPy rules).
    """
    present = [(i, v) for i, v in enumerate(indices) if v is not None]
    if len(present) == 1 and present[0][1].dtype not in (BOOL, ir.DataType.UINT8):
        axis, idx = present[0]
        return ctx.op.Gather(x, ctx.cast(idx, _I64), axis=axis)
    xt, stacked, pos, rest, adjacent = _plan(ctx, x, indices)
    out = ctx.op.GatherND(xt, stacked, batch_dims=0)
    nb = ctx.out_rank - len(rest)
    if adjacent and pos[0] > 0:
        out = ctx.op.Transpose(out, perm=_result_perm(nb, pos[0], len(rest)))
    return out


@translates(aten.index_put.default, aten._unsafe_index_put.default)
def index_put(ctx, x, indices, values, accumulate=False):
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False):
    ``self[indices] = values`` (or ``+=`` with accumulate).

    A single bool mask over the leading axes with broadcastable values becomes Where; otherwise
    ONNX ScatterND (reduction="add" when accumulating) on ``self`` with the indexed axes moved
    first, ``values`` broadcast to the shape ``self[indices]`` has.
    """
    rank = ctx.rank(x)
    values = ctx.cast(values, x.dtype)
    present = [v for v in indices if v is not None]
    if (len(indices) == 1 and len(present) == 1 and present[0].dtype == BOOL and values.shape is not None
            and len(values.shape) <= rank - len(present[0].shape)):
        mask = present[0]
        mask_rank = len(mask.shape)
        if mask_rank < rank:
            mask = ctx.op.Unsqueeze(mask, _c(ctx, list(range(mask_rank, rank))))
        new = ctx.op.Add(x, values) if accumulate else values
        return where(ctx, mask, new, x)
    xt, stacked, pos, rest, adjacent = _plan(ctx, x, indices)
    # shape of xt[stacked] (broadcast dims first): Shape(stacked)[:-1] + Shape(xt)[k:]
    k = len(pos)
    shape_first = ctx.op.Concat(ctx.op.Slice(ctx.op.Shape(stacked), _c(ctx, [0]), _c(ctx, [-1])),
                                ctx.op.Shape(xt, start=k), axis=0)
    nb = _stacked_rank(ctx, indices) - 1  # broadcast dims; the result has nb + len(rest) dims
    out_rank = nb + len(rest)
    vr = len(values.shape)
    if vr < out_rank:
        values = ctx.op.Unsqueeze(values, _c(ctx, list(range(out_rank - vr))))
    if adjacent and pos[0] > 0:
        perm = _result_perm(nb, pos[0], len(rest))  # B-first -> torch layout
        torch_shape = ctx.op.Gather(shape_first, _c(ctx, perm), axis=0)
        values = ctx.op.Expand(values, torch_shape)
        inv = [perm.index(i) for i in range(out_rank)]
        values = ctx.op.Transpose(values, perm=inv)
    else:
        values = ctx.op.Expand(values, shape_first)
    out = ctx.op.ScatterND(xt, stacked, values, reduction="add" if accumulate else None)
    perm = pos + rest
    if perm != list(range(rank)):
        out = ctx.op.Transpose(out, perm=[perm.index(i) for i in range(rank)])
    return out


def _stacked_rank(ctx, indices) -> int:
    """Rank of the broadcast index tensors (+1 for the stacked coordinate axis)."""
    ranks = []
    for v in indices:
        if v is None:
            continue
        ranks.append(1 if v.dtype in (BOOL, ir.DataType.UINT8) else len(v.shape))
    return max(ranks) + 1


@translates(aten.index_select.default)
def index_select(ctx, x, dim, index):
    """index_select(Tensor self, int dim, Tensor index): ONNX Gather with a 1-D index (a 0-d index
    selects one element and keeps the axis)."""
    axis = norm_axis(dim, max(ctx.rank(x), 1))
    index = ctx.cast(index, _I64)
    if index.shape is not None and len(index.shape) == 0:
        index = ctx.op.Unsqueeze(index, _c(ctx, [0]))
    if ctx.rank(x) == 0:
        return x
    return ctx.op.Gather(x, index, axis=axis)


@translates(aten.gather.default)
def gather(ctx, x, dim, index, sparse_grad=False):
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False): ONNX GatherElements."""
    if ctx.rank(x) == 0:
        return x
    return ctx.op.GatherElements(x, ctx.cast(index, _I64), axis=norm_axis(dim, ctx.rank(x)))


@translates(aten.take.default)
def take(ctx, x, index):
    """take(Tensor self, Tensor index): self flattened, read at ``index`` (its shape; negative
    indices count from the end), ONNX Gather."""
    flat = ctx.op.Reshape(x, ctx.const(np.array([-1], dtype=np.int64)))
    return ctx.op.Gather(flat, ctx.cast(index, _I64), axis=0)


# ------------------------------------------------------------------------------ scatter
_ONNX_REDUCTION = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min"}


def _updates(ctx, src, index, x) -> ir.Value:
    """``src`` (tensor or scalar) cut or broadcast to the shape of ``index`` (torch uses src[:index.shape])."""
    if not isinstance(src, ir.Value) or (src.shape is not None and len(src.shape) == 0):
        return ctx.op.Expand(ctx.scalar(src, x.dtype) if not isinstance(src, ir.Value) else ctx.cast(src, x.dtype),
                             ctx.shape(index))
    src = ctx.cast(src, x.dtype)
    if src.shape is not None and index.shape is not None and list(src.shape) == list(index.shape) \
            and all(isinstance(d, int) for d in src.shape):
        return src
    r = len(index.shape)
    return ctx.op.Slice(src, _c(ctx, [0] * r), ctx.shape(index), _c(ctx, list(range(r))))


def _identity_of(reduce: str, dtype: ir.DataType):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == BOOL:
        return reduce == "amin"
    info = np.finfo(dtype.numpy()) if dtypes.is_float(dtype) else np.iinfo(dtype.numpy())
    if dtypes.is_float(dtype):
        return -np.inf if reduce == "amax" else np.inf
    return info.min if reduce == "amax" else info.max


def _scatter(ctx, x, dim, index, src, reduce=None, include_self=True):
    rank = ctx.rank(x)
    if rank == 0:
        x1 = ctx.op.Reshape(x, _c(ctx, [1]))
        x1 = _typed(x1, x.dtype, [1])
        idx1 = _typed(ctx.op.Reshape(index, _c(ctx, [1])), _I64, [1])
        src1 = ctx.op.Reshape(src, _c(ctx, [1])) if isinstance(src, ir.Value) else src
        if isinstance(src1, ir.Value):
            src1 = _typed(src1, src.dtype, [1])
        return ctx.op.Reshape(_scatter(ctx, x1, 0, idx1, src1, reduce, include_self), _c(ctx, []))
    axis = norm_axis(dim, rank)
    upd = _updates(ctx, src, index, x)
    index = ctx.cast(index, _I64)
    if reduce is None:
        return ctx.op.ScatterElements(x, index, upd, axis=axis)
    if reduce == "mean":
        return _scatter_mean(ctx, x, axis, index, upd, include_self)
    if reduce not in _ONNX_REDUCTION:
        raise TranslationError(f"scatter_reduce: reduction {reduce!r} is not supported",
                               hint="use one of sum, prod, mean, amax, amin")
    if not include_self:
        ident = ctx.op.Expand(ctx.scalar(_identity_of(reduce, x.dtype), x.dtype), ctx.shape(index))
        x = ctx.op.ScatterElements(x, index, ident, axis=axis)
    red = _ONNX_REDUCTION[reduce]
    if x.dtype == BOOL and red in ("add", "max"):
        return ctx.op.Cast(ctx.op.ScatterElements(ctx.op.Cast(x, to=ir.DataType.INT32), index,
                                                  ctx.op.Cast(upd, to=ir.DataType.INT32), axis=axis, reduction="max"),
                           to=BOOL)
    return ctx.op.ScatterElements(x, index, upd, axis=axis, reduction=red)


def _scatter_mean(ctx, x, axis, index, upd, include_self):
    """scatter_reduce 'mean': (self? + sum of src) / (1? + count); untouched elements keep self."""
    dt = x.dtype
    work = dt if dtypes.is_float(dt) else ir.DataType.DOUBLE
    xw, uw = ctx.cast(x, work), ctx.cast(upd, work)
    zero_like = ctx.op.Expand(ctx.scalar(0, work), ctx.shape(index))
    ones_upd = ctx.op.Expand(ctx.scalar(1, work), ctx.shape(index))
    base = xw if include_self else ctx.op.ScatterElements(xw, index, zero_like, axis=axis)
    total = ctx.op.ScatterElements(base, index, uw, axis=axis, reduction="add")
    zeros_x = ctx.op.Mul(xw, ctx.scalar(0, work))
    count = ctx.op.ScatterElements(zeros_x, index, ones_upd, axis=axis, reduction="add")
    if include_self:
        count = ctx.op.Add(count, ctx.scalar(1, work))
    mean = ctx.op.Div(total, ctx.op.Max(count, ctx.scalar(1, work)))
    if not dtypes.is_float(dt):
        mean = ctx.op.Floor(mean)
    return ctx.cast(_typed(mean, work, None), dt)


@translates(aten.scatter.src, aten.scatter.value)
def scatter(ctx, x, dim, index, src):
    """scatter.src / scatter.value(Tensor self, int dim, Tensor index, src): ONNX ScatterElements."""
    return _scatter(ctx, x, dim, index, src)


@translates(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_legacy(ctx, x, dim, index, src, reduce):
    """scatter.reduce / value_reduce(..., str reduce): reduce "add" or "multiply", self included."""
    return _scatter(ctx, x, dim, index, src, {"add": "sum", "multiply": "prod"}[reduce])


@translates(aten.scatter_add.default)
def scatter_add(ctx, x, dim, index, src):
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src): ScatterElements reduction="add"."""
    return _scatter(ctx, x, dim, index, src, "sum")


@translates(aten.scatter_reduce.two)
def scatter_reduce(ctx, x, dim, index, src, reduce, include_self=True):
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *,
    bool include_self=True): reduce in sum / prod / mean / amax / amin. Without include_self the
    scattered positions are first set to the reduction's identity."""
    return _scatter(ctx, x, dim, index, src, reduce, include_self)



@translates(aten.index_reduce.default)
def index_reduce(ctx, x, dim, index, source, reduce, include_self=True):
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool
    include_self=True): self[..., index[i], ...] reduced (prod / mean / amax / amin) with
    source[..., i, ...] along ``dim`` (torch.Tensor.index_reduce_). It is scatter_reduce with the
    1-D index broadcast over source's shape along ``dim``."""
    rank = ctx.rank(source)
    if rank > 0:
        axis = norm_axis(dim, rank)
        index = ctx.op.Reshape(ctx.cast(index, _I64), _c(ctx, [1] * axis + [-1] + [1] * (rank - axis - 1)))
        index = _typed(ctx.op.Expand(index, ctx.op.Shape(source)), _I64,
                       list(source.shape) if source.shape is not None else None)
    return _scatter(ctx, x, dim, index, source, reduce, include_self)

# ------------------------------------------------------------------------------ masks
@translates(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(ctx, x, mask, value):
    """masked_fill.Scalar / Tensor(Tensor self, Tensor mask, value): Where(mask, value, self)."""
    to = ctx.out_dtype
    v = ctx.cast(value, to) if isinstance(value, ir.Value) else ctx.scalar(value, to)
    return where(ctx, ctx.cast(mask, BOOL), v, ctx.cast(x, to))


@translates(aten.masked_scatter.default)
def masked_scatter(ctx, x, mask, source):
    """masked_scatter(Tensor self, Tensor mask, Tensor source): the masked positions of ``self``
    (mask broadcast with self), in row-major order, take the leading elements of ``source``.
    The k-th True reads ``source.flatten()[k]`` (k from a CumSum of the mask), then Where; the
    source is read with one element appended, so that an empty source (a mask with no True: an
    audio model given no audio tokens) is read in bounds."""
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    mask = ctx.cast(mask, BOOL)
    shape = ctx.op.Shape(ctx.op.Expand(x, ctx.shape(mask)))
    mask_b = ctx.op.Expand(mask, shape)
    x_b = ctx.op.Expand(x, shape)
    flat_mask = ctx.op.Reshape(ctx.op.Cast(mask_b, to=_I64), _c(ctx, [-1]))
    k = ctx.op.Sub(ctx.op.CumSum(flat_mask, ctx.scalar(0, _I64)), ctx.scalar(1, _I64))
    k = ctx.op.Max(k, ctx.scalar(0, _I64))
    src = ctx.op.Reshape(ctx.cast(source, to), _c(ctx, [-1]))
    # one element more, read where the mask is False: an empty source (no True) stays in bounds
    src = ctx.op.Concat(src, ctx.const(np.zeros(1, dtype=to.numpy())), axis=0)
    picked = ctx.op.Reshape(ctx.op.Gather(src, k, axis=0), shape)
    return where(ctx, mask_b, picked, x_b, to)


@translates(aten.masked_select.default)
def masked_select(ctx, x, mask):
    """masked_select(Tensor self, Tensor mask) -> 1-D: self and mask broadcast together, the
    elements where mask is True in row-major order (ONNX Compress on the flattened tensors)."""
    mask = ctx.cast(mask, BOOL)
    shape = ctx.op.Shape(ctx.op.Expand(x, ctx.shape(mask)))
    flat = _c(ctx, [-1])
    return ctx.op.Compress(ctx.op.Reshape(ctx.op.Expand(x, shape), flat),
                           ctx.op.Reshape(ctx.op.Expand(mask, shape), flat), axis=0)


@translates(aten.nonzero.default)
def nonzero(ctx, x):
    """nonzero(Tensor self) -> [n, rank] int64 coordinates (n is data-dependent): Transpose(NonZero)."""
    if ctx.rank(x) == 0:
        x = ctx.op.Reshape(x, _c(ctx, [1]))
        nz = ctx.op.NonZero(x)
        return ctx.op.Slice(ctx.op.Transpose(nz, perm=[1, 0]), _c(ctx, [0]), _c(ctx, [0]), _c(ctx, [1]))
    return ctx.op.Transpose(ctx.op.NonZero(x), perm=[1, 0])


@translates(aten.nonzero_static.default)
def nonzero_static(ctx, x, *, size, fill_value=-1):
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> [size, rank] int64: the
    first ``size`` coordinates of ``nonzero(self)`` in row-major order, rows past the count filled
    with ``fill_value``. ``size`` may be a SymInt. Concat(Transpose(NonZero), fill rows) sliced to
    ``size`` rows. Semantics: ``torch.nonzero_static`` (PyTorch doc); torch 2.14's decomposition of
    ``aten.combinations`` goes through it.
    """
    coords = nonzero(ctx, x)
    fill = ctx.op.Expand(_c(ctx, fill_value), ctx.shape_list([size, ctx.rank(x)]))
    rows = ctx.shape_list([size])
    return ctx.op.Slice(ctx.op.Concat(coords, fill, axis=0), _c(ctx, [0]), rows, _c(ctx, [0]))
