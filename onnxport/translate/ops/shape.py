"""Shape manipulation: view/reshape, flatten/unflatten, permute/transpose, (un)squeeze, expand, repeat,
repeat_interleave, flip, roll, unfold, diagonal (and diagonal_scatter), as_strided (and its scatter).

Semantics: the PyTorch view/shape ops (torch.Tensor.view, flatten, unflatten, permute, squeeze,
expand, repeat, roll, flip, Tensor.unfold) on ONNX Reshape (``allowzero=0``: a 0 in a shape list
only appears from SymInts, never as a copy request, unless the list holds a literal 0), Transpose,
Unsqueeze, Squeeze, Expand, Tile, Slice, Gather and Concat.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._common import axes_const, norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
_I64 = ir.DataType.INT64


def _typed_1d(v: ir.Value) -> ir.Value:
    v.type = ir.TensorType(_I64)
    v.shape = ir.Shape([None]) if v.shape is None else v.shape
    return v


def shape_slice(ctx, x: ir.Value, start: int, end: int | None = None) -> ir.Value:
    """1-D int64 ``Shape(x)[start:end]`` (static parts as constants)."""
    rank = ctx.rank(x)
    end = rank if end is None else end
    dims = list(x.shape)[start:end]
    if all(isinstance(d, int) for d in dims):
        return ctx.const(np.array(dims, dtype=np.int64))
    return _typed_1d(ctx.op.Shape(x, start=start, end=end))


@translates(aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.view_copy.default)
def reshape(ctx, x, shape):
    """view(Tensor self, SymInt[] size): ONNX Reshape; -1 infers one dimension (torch.Tensor.view).

    A size of 0 (literal, or a SymInt that is 0 at run time) means 0 in PyTorch, so the Reshape
    takes ``allowzero=1`` unless a -1 is present (ONNX forbids both; PyTorch cannot infer -1 next
    to a 0 either).
    """
    has_zero = any(not isinstance(s, int) or s == 0 for s in shape)
    infer = any(isinstance(s, int) and s == -1 for s in shape)
    allowzero = 1 if has_zero and not infer else None
    return ctx.op.Reshape(x, ctx.shape_list(list(shape)), allowzero=allowzero)


@translates(aten.flatten.using_ints)
def flatten(ctx, x, start_dim=0, end_dim=-1):
    """flatten.using_ints(Tensor self, int start_dim=0, int end_dim=-1): merges dims start..end."""
    rank = ctx.rank(x)
    if rank == 0:
        return ctx.op.Reshape(x, ctx.const(np.array([1], dtype=np.int64)))
    start, end = norm_axis(start_dim, rank), norm_axis(end_dim, rank)
    if start == end:
        return x
    if start == 0 and end == rank - 1:
        return ctx.op.Reshape(x, ctx.const(np.array([-1], dtype=np.int64)))
    merged = list(x.shape)[start:end + 1]
    mid = (ctx.const(np.array([int(np.prod(merged))], dtype=np.int64)) if all(isinstance(d, int) for d in merged)
           else ctx.op.ReduceProd(shape_slice(ctx, x, start, end + 1), keepdims=1))
    parts = [p for p in (shape_slice(ctx, x, 0, start) if start else None, mid,
                         shape_slice(ctx, x, end + 1) if end + 1 < rank else None) if p is not None]
    return ctx.op.Reshape(x, ctx.op.Concat(*parts, axis=0) if len(parts) > 1 else parts[0])


@translates(aten.unflatten.int)
def unflatten(ctx, x, dim, sizes):
    """unflatten.int(Tensor self, int dim, SymInt[] sizes): splits ``dim`` into ``sizes`` (one may be -1)."""
    rank = ctx.rank(x)
    dim = norm_axis(dim, rank)
    parts = []
    if dim:
        parts.append(shape_slice(ctx, x, 0, dim))
    parts.append(ctx.shape_list(list(sizes)))
    if dim + 1 < rank:
        parts.append(shape_slice(ctx, x, dim + 1))
    return ctx.op.Reshape(x, ctx.op.Concat(*parts, axis=0) if len(parts) > 1 else parts[0])


@translates(aten.permute.default, aten.permute_copy.default)
def permute(ctx, x, dims):
    """permute(Tensor self, int[] dims): ONNX Transpose."""
    rank = ctx.rank(x)
    return ctx.op.Transpose(x, perm=[norm_axis(d, rank) for d in dims])


@translates(aten.movedim.int, aten.movedim.intlist)
def movedim(ctx, x, source, destination):
    """movedim(Tensor self, int[]|int source, int[]|int destination): ONNX Transpose moving each
    source axis to its destination, the others keeping their order (torch.movedim)."""
    rank = ctx.rank(x)
    src = [norm_axis(d, rank) for d in (source if isinstance(source, (list, tuple)) else [source])]
    dst = [norm_axis(d, rank) for d in (destination if isinstance(destination, (list, tuple)) else [destination])]
    rest = iter(a for a in range(rank) if a not in src)
    placed = dict(zip(dst, src))
    perm = [placed[i] if i in placed else next(rest) for i in range(rank)]
    return x if perm == list(range(rank)) else ctx.op.Transpose(x, perm=perm)


@translates(aten.transpose.int, aten.transpose_copy.int)
def transpose(ctx, x, dim0, dim1):
    """transpose.int(Tensor self, int dim0, int dim1): ONNX Transpose swapping two axes."""
    rank = ctx.rank(x)
    if rank < 2:
        return x
    perm = list(range(rank))
    a, b = norm_axis(dim0, rank), norm_axis(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.op.Transpose(x, perm=perm) if a != b else x


@translates(aten.t.default, aten.numpy_T.default, aten.t_copy.default)
def t(ctx, x):
    """t(Tensor self): transpose of a matrix (identity on rank < 2)."""
    rank = ctx.rank(x)
    return ctx.op.Transpose(x, perm=list(reversed(range(rank)))) if rank > 1 else x


@translates(aten.unsqueeze.default, aten.unsqueeze_copy.default)
def unsqueeze(ctx, x, dim):
    """unsqueeze(Tensor self, int dim): ONNX Unsqueeze (negative dim counts from rank + 1)."""
    return ctx.op.Unsqueeze(x, axes_const(ctx, norm_axis(dim, ctx.rank(x) + 1)))


def _squeeze_axes(x, dims) -> list[int]:
    rank = len(x.shape)
    axes = sorted({norm_axis(d, rank) for d in dims}) if rank else []
    return [a for a in axes if x.shape[a] == 1]


@translates(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze_copy.default,
            aten.squeeze_copy.dim, aten.squeeze_copy.dims)
def squeeze(ctx, x, dim=None):
    """squeeze(self) / squeeze.dim(self, int dim) / squeeze.dims(self, int[] dim).

    Removes the listed axes (all axes when none is given) whose size is 1; torch.export has proved
    every symbolic size different from 1, so the axes removed are those of static size 1.
    """
    rank = ctx.rank(x)
    if dim is None:
        dims = list(range(rank))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    axes = _squeeze_axes(x, dims)
    if not axes:
        return x
    return ctx.op.Squeeze(x, axes_const(ctx, axes))


@translates(aten.expand.default, aten.expand_copy.default)
def expand(ctx, x, size, implicit=False):
    """expand(Tensor self, SymInt[] size): ONNX Expand; -1 keeps the input's size (becomes 1, which
    broadcasts to it). New leading dims may not be -1 (PyTorch raises)."""
    rank = ctx.rank(x)
    lead = len(size) - rank
    sizes = []
    for i, s in enumerate(size):
        if isinstance(s, int) and s == -1:
            if i < lead:
                raise TranslationError(f"expand: size -1 is not allowed for new leading dimension {i}",
                                       hint="give the new leading dimensions explicit sizes")
            sizes.append(1)
        else:
            sizes.append(s)
    return ctx.op.Expand(x, ctx.shape_list(sizes))


@translates(aten.expand_as.default)
def expand_as(ctx, x, other):
    """expand_as(Tensor self, Tensor other): ONNX Expand to ``Shape(other)``."""
    return ctx.op.Expand(x, ctx.shape(other))


@translates(aten.repeat.default)
def repeat(ctx, x, repeats):
    """repeat(Tensor self, SymInt[] repeats): ONNX Tile; extra leading repeats add leading dims."""
    rank = ctx.rank(x)
    extra = len(repeats) - rank
    if extra > 0:
        x = ctx.op.Reshape(x, ctx.op.Concat(ctx.const(np.ones(extra, dtype=np.int64)), ctx.shape(x), axis=0))
    return ctx.op.Tile(x, ctx.shape_list(list(repeats)))


@translates(aten.flip.default)
def flip(ctx, x, dims):
    """flip(Tensor self, int[] dims): ONNX Slice with step -1 on each axis in ``dims``."""
    rank = ctx.rank(x)
    axes = sorted({norm_axis(d, rank) for d in dims})
    if not axes:
        return x
    n = len(axes)
    return ctx.op.Slice(x, [-1] * n, [INT64_MIN] * n, axes, [-1] * n)


def _roll_one(ctx, x, shift, axis):
    d = x.shape[axis]
    if isinstance(d, int) and isinstance(shift, int):
        if d == 0:
            return x
        k = d - shift % d
        if k == d:
            return x
        k = ctx.const(np.array([k], dtype=np.int64))
    else:
        n = ctx.dim(x, axis)
        s = ctx.shape_list([shift])
        n1 = ctx.shape_list([n])
        k = ctx.op.Sub(n1, ctx.op.Mod(s, ctx.op.Max(n1, ctx.const(np.array([1], dtype=np.int64))), fmod=0))
    ax = [axis]
    tail = ctx.op.Slice(x, k, [INT64_MAX], ax)
    head = ctx.op.Slice(x, [0], k, ax)
    return ctx.op.Concat(tail, head, axis=axis)


@translates(aten.roll.default)
def roll(ctx, x, shifts, dims=()):
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]): two Slices and a Concat per axis;
    without dims the flattened tensor is rolled and the shape restored (torch.roll)."""
    shifts = [shifts] if not isinstance(shifts, (list, tuple)) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        flat = ctx.op.Reshape(x, ctx.const(np.array([-1], dtype=np.int64)))
        flat.type, flat.shape = x.type, ir.Shape([None])
        return ctx.op.Reshape(_roll_one(ctx, flat, shifts[0], 0), ctx.shape(x))
    rank = ctx.rank(x)
    out = x
    for s, d in zip(shifts, dims):
        axis = norm_axis(d, rank)
        nxt = _roll_one(ctx, out, s, axis)
        if nxt is not out:
            nxt.type, nxt.shape = x.type, x.shape
        out = nxt
    return out


@translates(aten.unfold.default)
def unfold(ctx, x, dimension, size, step):
    """unfold(Tensor(a) self, int dimension, int size, int step) (torch.Tensor.unfold): windows of
    ``size`` every ``step`` along ``dimension``, the window as a new last axis. One Gather with a
    [n, size] index (n = (D - size) // step + 1), then a Transpose."""
    rank = ctx.rank(x)
    if rank == 0:
        return ctx.op.Unsqueeze(x, ctx.const(np.array([0], dtype=np.int64)))
    axis = norm_axis(dimension, rank)
    d = x.shape[axis]
    if isinstance(d, int):
        n = (d - size) // step + 1
        idx = ctx.const((np.arange(n, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)[None, :]))
    else:
        dv = ctx.dim(x, axis)
        n = ctx.op.Add(ctx.op.Div(ctx.op.Sub(dv, ctx.scalar(size, _I64)), ctx.scalar(step, _I64)), ctx.scalar(1, _I64))
        starts = ctx.op.Mul(ctx.op.Range(ctx.scalar(0, _I64), n, ctx.scalar(1, _I64)), ctx.scalar(step, _I64))
        idx = ctx.op.Add(ctx.op.Unsqueeze(starts, ctx.const(np.array([1], dtype=np.int64))),
                         ctx.const(np.arange(size, dtype=np.int64)[None, :]))
    g = ctx.op.Gather(x, idx, axis=axis)
    perm = list(range(axis + 1)) + list(range(axis + 2, rank + 1)) + [axis + 1]
    return ctx.op.Transpose(g, perm=perm) if perm != list(range(rank + 1)) else g


def _interleave_int(ctx, x, repeats, axis):
    rank = ctx.rank(x)
    xu = ctx.op.Unsqueeze(x, ctx.const(np.array([axis + 1], dtype=np.int64)))
    ones = [1] * (rank + 1)
    ones[axis + 1] = repeats
    big = ctx.op.Expand(xu, ctx.shape_list(ones))
    parts = []
    if axis:
        parts.append(shape_slice(ctx, x, 0, axis))
    parts.append(ctx.const(np.array([-1], dtype=np.int64)))
    if axis + 1 < rank:
        parts.append(shape_slice(ctx, x, axis + 1))
    return ctx.op.Reshape(big, ctx.op.Concat(*parts, axis=0) if len(parts) > 1 else parts[0])


def repeat_index(ctx, repeats: ir.Value) -> ir.Value:
    """``repeat_interleave(repeats)`` for a 1-D int64 ``repeats``: [0]*r0 + [1]*r1 + ...

    Position p goes to the number of cumulative sums <= p (a [total, n] comparison).
    """
    repeats = ctx.cast(repeats, _I64)
    if ctx.rank(repeats) == 0:
        repeats = ctx.op.Unsqueeze(repeats, ctx.const(np.array([0], dtype=np.int64)))
    cs = ctx.op.CumSum(repeats, ctx.const(np.array(0, dtype=np.int64)))
    total = ctx.op.ReduceSum(repeats, keepdims=0)
    pos = ctx.op.Range(ctx.scalar(0, _I64), total, ctx.scalar(1, _I64))
    ge = ctx.op.GreaterOrEqual(ctx.op.Unsqueeze(pos, ctx.const(np.array([1], dtype=np.int64))),
                               ctx.op.Unsqueeze(cs, ctx.const(np.array([0], dtype=np.int64))))
    return ctx.op.ReduceSum(ctx.op.Cast(ge, to=_I64), ctx.const(np.array([1], dtype=np.int64)), keepdims=0)


@translates(aten.repeat_interleave.self_int, aten.repeat_interleave.self_Tensor)
def repeat_interleave(ctx, x, repeats, dim=None, output_size=None):
    """repeat_interleave.self_int / self_Tensor(Tensor self, repeats, int? dim, SymInt? output_size).

    Int repeats: Unsqueeze + Expand + Reshape. Tensor repeats (one per element along ``dim``, or a
    single one): Gather with the ``repeat_interleave(repeats)`` index. Without ``dim`` the input is
    flattened first (torch.repeat_interleave).
    """
    if dim is None:
        x = ctx.op.Reshape(x, ctx.const(np.array([-1], dtype=np.int64)))
        x.type, x.shape = ir.TensorType(ctx.out_dtype), ir.Shape([None])
        dim = 0
    axis = norm_axis(dim, ctx.rank(x))
    if not isinstance(repeats, ir.Value):
        return _interleave_int(ctx, x, repeats, axis)
    if repeats.shape is not None and (len(repeats.shape) == 0 or list(repeats.shape) == [1]):
        return _interleave_int(ctx, x, ctx.cast(repeats, _I64), axis)
    return ctx.op.Gather(x, repeat_index(ctx, repeats), axis=axis)


@translates(aten.repeat_interleave.Tensor)
def repeat_interleave_tensor(ctx, repeats, output_size=None):
    """repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size): index i repeated repeats[i] times."""
    return repeat_index(ctx, repeats)


def _diagonal_plan(ctx, x, offset, dim1, dim2):
    """(x with dim1, dim2 moved last and flattened, its permutation, the [L] flat diagonal positions)."""
    rank = ctx.rank(x)
    a, b = norm_axis(dim1, rank), norm_axis(dim2, rank)
    rest = [i for i in range(rank) if i not in (a, b)]
    perm = rest + [a, b]
    xt = ctx.op.Transpose(x, perm=perm) if perm != list(range(rank)) else x
    d1, d2 = ctx.dim(x, a), ctx.dim(x, b)
    r0, c0 = max(-offset, 0), max(offset, 0)
    n = ctx.op.Max(ctx.op.Min(ctx.op.Sub(d1, ctx.scalar(r0, _I64)), ctx.op.Sub(d2, ctx.scalar(c0, _I64))),
                   ctx.scalar(0, _I64))
    i = ctx.op.Range(ctx.scalar(0, _I64), n, ctx.scalar(1, _I64))
    flat_idx = ctx.op.Add(ctx.op.Mul(ctx.op.Add(i, ctx.scalar(r0, _I64)), d2), ctx.op.Add(i, ctx.scalar(c0, _I64)))
    parts = [ctx.op.Shape(xt, start=0, end=rank - 2)] if rest else []
    minus1 = ctx.const(np.array([-1], dtype=np.int64))
    flat = ctx.op.Reshape(xt, ctx.op.Concat(*parts, minus1, axis=0) if parts else minus1)
    return xt, flat, perm, flat_idx


@translates(aten.diagonal.default, aten.diagonal_copy.default)
def diagonal(ctx, x, offset=0, dim1=0, dim2=1):
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1): the other axes in order, then
    the diagonal (length max(0, min(d1 - max(-offset, 0), d2 - max(offset, 0)))) as the last axis.
    The two axes are moved last and flattened; one Gather reads positions r * d2 + c."""
    _, flat, perm, flat_idx = _diagonal_plan(ctx, x, offset, dim1, dim2)
    return ctx.op.Gather(flat, flat_idx, axis=len(perm) - 2)


@translates(aten.diagonal_scatter.default)
def diagonal_scatter(ctx, x, src, offset=0, dim1=0, dim2=1):
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1): ``self``
    with ``self.diagonal(offset, dim1, dim2) = src`` (ScatterElements on the flattened axes)."""
    xt, flat, perm, flat_idx = _diagonal_plan(ctx, x, offset, dim1, dim2)
    src = ctx.cast(src, x.dtype)
    idx = ctx.op.Expand(flat_idx, ctx.shape(src))
    out = ctx.op.Reshape(ctx.op.ScatterElements(flat, idx, src, axis=len(perm) - 2), ctx.op.Shape(xt))
    if perm == list(range(len(perm))):
        return out
    return ctx.op.Transpose(out, perm=[perm.index(i) for i in range(len(perm))])


def _strided_positions(ctx, size, stride, storage_offset) -> ir.Value:
    """Positions, relative to the first element of the node's input, that an as_strided view of
    ``size`` / ``stride`` reads; raises TranslationError for a non-contiguous input."""
    node = ctx.current_node
    src = node.args[0].meta.get("val") if node is not None and isinstance(node.args[0], torch.fx.Node) else None
    if src is not None and not src.is_contiguous():
        raise TranslationError(f"{node.target} of a non-contiguous tensor cannot be expressed without storage",
                               hint="call .contiguous() before as_strided, or use view/unfold/expand instead")
    base = src.storage_offset() if src is not None else 0
    offset = storage_offset if storage_offset is not None else base
    if isinstance(offset, int) and isinstance(base, int):
        idx = ctx.scalar(offset - base, _I64)
    else:
        idx = ctx.op.Sub(ctx.scalar(offset, _I64) if isinstance(offset, int) else offset,
                         ctx.scalar(base, _I64) if isinstance(base, int) else base)
    n = len(size)
    for k, (sz, st) in enumerate(zip(size, stride)):
        r = ctx.op.Range(ctx.scalar(0, _I64), ctx.scalar(sz, _I64) if isinstance(sz, int) else sz, ctx.scalar(1, _I64))
        r = ctx.op.Mul(r, ctx.scalar(st, _I64) if isinstance(st, int) else st)
        shape = [1] * n
        shape[k] = -1
        idx = ctx.op.Add(idx, ctx.op.Reshape(r, ctx.const(np.array(shape, dtype=np.int64))))
    return idx


@translates(aten.as_strided.default, aten.as_strided_copy.default)
def as_strided(ctx, x, size, stride, storage_offset=None):
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None).

    ONNX has no storage: the view is read from the row-major elements of ``self`` with one Gather
    at positions ``offset + sum_k i_k * stride_k`` (relative to self's own offset). Raises
    TranslationError when ``self`` is not contiguous (its storage layout differs from its values).
    """
    idx = _strided_positions(ctx, size, stride, storage_offset)
    flat = ctx.op.Reshape(x, ctx.const(np.array([-1], dtype=np.int64)))
    return ctx.op.Gather(flat, idx, axis=0)


@translates(aten.as_strided_scatter.default)
def as_strided_scatter(ctx, x, src, size, stride, storage_offset=None):
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset):
    ``self`` with the elements the as_strided view reads replaced by ``src`` (ScatterElements on the
    flattened tensor; same contiguity requirement as as_strided)."""
    idx = _strided_positions(ctx, size, stride, storage_offset)
    minus1 = ctx.const(np.array([-1], dtype=np.int64))
    src = ctx.op.Reshape(ctx.op.Expand(ctx.cast(src, x.dtype), ctx.op.Shape(idx)), minus1)
    flat = ctx.op.ScatterElements(ctx.op.Reshape(x, minus1), ctx.op.Reshape(idx, minus1), src, axis=0)
    return ctx.op.Reshape(flat, ctx.shape(x))
