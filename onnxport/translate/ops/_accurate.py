"""Sums of many float32 elements in levels, the accurate form of long reductions.

onnxruntime's ReduceSum and ReduceMean add the elements of a reduced run into a few float32
running sums, one after another: the error grows with the run's length. Against eager PyTorch's
(cascade summation) it is 2x at 1,024 contiguous elements, 4.5x at 16,384, 10-16x at 65,536 and
more; along an axis with kept axes after it (``x.sum(0)``: one row added at a time) 2.5x at 64,
6x at 256, 18x at 1,024, 120x at 65,536. Summed in levels of at most ``LEVEL`` elements (the run
reshaped to ``[.., b3, b2, b1, ..]``, each level reduced in turn) it stays within 1-3x of eager's
at the speed of one node (0.8-1.1x: the Reshape copies nothing). Short runs keep the one Reduce
node: contiguous runs up to ``CONTIGUOUS`` elements (within 5x of eager's error there, and the
ReduceMean the LayerNormalization and RMSNormalization fusions, ours and onnxruntime's, read) or
``SQUARES`` for a variance (eager accumulates it in float64: one node is 4x its error at 1,024,
9x at 4,096), strided axes up to ``STRIDED``. A run of a dynamic size, which may be long,
accumulates in float64 (Cast, ReduceSum or ReduceMean, Cast back: three nodes, no shape
arithmetic, right at every length; summing it in padded levels instead took some twenty nodes of
shape arithmetic and a Pad copying the input, and an ``If`` on the length would put control flow the
model does not have in every graph that sums over a dynamic axis). A contiguous run of several
dynamic axes (an image's height and width) is summed axis by axis instead, each axis a level, with
no copy (efficientnet_b0 with dynamic height and width: 1.15x the latency of one node per pooling).
Figures: ``benchmarks/NUMERICS.md``.

Semantics: a sum is a sum in any order; NaN and infinities propagate through every level as
through one ReduceSum; zeros padded to whole blocks add nothing; an empty axis sums to 0.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

CONTIGUOUS = 16384  # the longest run of contiguous reduced elements summed by one Reduce node
SQUARES = 1024  # the same for the squares of a variance (eager accumulates it in float64)
STRIDED = 64  # the longest reduced axis with kept axes after it summed by one Reduce node
LEVEL = 64  # the most elements added per level of the blocked form (where the length has such factors)
I64 = ir.DataType.INT64
F64 = ir.DataType.DOUBLE


def _runs(axes: list[int]) -> list[list[int]]:
    """Maximal runs of adjacent axes in sorted ``axes``."""
    runs: list[list[int]] = []
    for a in axes:
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    return runs


def _contiguous(run: list[int], dims: list) -> bool:
    """Whether every axis after ``run`` has size 1 (the run's elements are adjacent in memory)."""
    return all(d == 1 for d in dims[run[-1] + 1:])


def _limit(run: list[int], dims: list, contiguous: int | None = None) -> int:
    """The longest ``run`` one Reduce node sums accurately: ``contiguous`` (default ``CONTIGUOUS``)
    for a contiguous run, ``STRIDED`` otherwise."""
    return (contiguous or CONTIGUOUS) if _contiguous(run, dims) else STRIDED


def _length(run: list[int], dims: list) -> int | None:
    """Elements summed per output over ``run``; None when a size is not static."""
    sizes = [dims[a] for a in run]
    return math.prod(sizes) if all(isinstance(s, int) for s in sizes) else None


def _short(run: list[int], dims: list, contiguous: int | None = None) -> bool:
    n = _length(run, dims)
    return n is not None and n <= _limit(run, dims, contiguous)


def one_node(like: ir.Value, axes: list[int], contiguous: int | None = None) -> bool:
    """True when one Reduce node over ``axes`` of a value shaped and typed as ``like`` is accurate:
    not float32, or every run of reduced axes static and short (``_limit``)."""
    return like.dtype != ir.DataType.FLOAT or all(_short(run, list(like.shape), contiguous) for run in _runs(axes))


def sum_over(ctx, x: ir.Value, axes: list[int], keepdim: bool, like: ir.Value | None = None,
             contiguous: int | None = None) -> ir.Value:
    """The sum of ``x`` over ``axes`` (normalized, sorted, not empty); ``like``: a value of x's
    dtype and shape (default x); ``contiguous``: the longest contiguous run for one node (default
    ``CONTIGUOUS``). ReduceSum where one node is accurate (``one_node``); otherwise each run of
    reduced axes in turn, from the last (``_sum_run``)."""
    like = x if like is None else like
    if one_node(like, axes, contiguous):
        return ctx.op.ReduceSum(x, ctx.const(axes), keepdims=int(keepdim))
    dims = list(like.shape)
    out = x
    for run in reversed(_runs(axes)):
        out = _sum_run(ctx, out, like.dtype, dims, run, contiguous)
        dims = [1 if a in run else d for a, d in enumerate(dims)]
    return out if keepdim else ctx.op.Squeeze(out, ctx.const(axes))


def _sum_run(ctx, x: ir.Value, dtype: ir.DataType, dims: list, run: list[int], contiguous: int | None) -> ir.Value:
    """x (of ``dtype``, sizes ``dims``) summed over ``run`` (kept, size 1): one ReduceSum for a
    short run, a long one in ``levels``; with dynamic sizes, a contiguous run of several axes axis
    by axis, each axis a level (one ReduceSum for a dynamic one: an image's height and width are
    summed as accurately as a static plane while each is at most ``CONTIGUOUS``, and nothing is
    copied), any other accumulated in float64 whatever its length (``_dynamic_run``)."""
    n = _length(run, dims)
    if _short(run, dims, contiguous):
        return ctx.op.ReduceSum(x, ctx.const(run), keepdims=1)
    if n is not None:
        lengths = levels(n)
        padded = ctx.const([math.prod(lengths)]) if math.prod(lengths) > n else None
        return _in_levels(ctx, x, dtype, dims, run, ctx.const([n]), lengths, padded)
    if len(run) > 1 and _contiguous(run, dims):
        dims = list(dims)
        for a in reversed(run):
            x = _sum_run(ctx, x, dtype, dims, [a], contiguous) if isinstance(dims[a], int) else \
                ctx.op.ReduceSum(x, ctx.const([a]), keepdims=1)
            dims[a] = 1
        return x
    return _dynamic_run(ctx, x, dtype, dims, run)


def mean_over(ctx, x: ir.Value, axes: list[int], keepdim: bool, like: ir.Value | None = None) -> ir.Value:
    """The mean of ``x`` over ``axes`` (none of them empty): ReduceMean where one node is accurate,
    else ``sum_over`` divided by the count."""
    like = x if like is None else like
    if one_node(like, axes):
        return ctx.op.ReduceMean(x, ctx.const(axes), keepdims=int(keepdim))
    if wide(like, axes):  # a dynamic run: the mean accumulated in float64, no count to compute
        return ctx.op.Cast(ctx.op.ReduceMean(ctx.op.Cast(x, to=F64), ctx.const(axes), keepdims=int(keepdim)),
                           to=like.dtype)
    by_axis = _mean_by_axis(ctx, x, axes, keepdim, list(like.shape))
    if by_axis is not None:
        return by_axis
    total = sum_over(ctx, x, axes, keepdim, like)
    return ctx.op.Div(total, count(ctx, x, total, axes, like))


def _mean_by_axis(ctx, x: ir.Value, axes: list[int], keepdim: bool, dims: list) -> ir.Value | None:
    """The mean over ``axes`` as means of means, last run first: one ReduceMean for each short static
    run, one for each axis of a contiguous run of dynamic sizes (as ``_sum_run`` sums it, each axis a
    level), so no count is computed at run time (a mean of equal-length means is the mean); None when
    some run needs levels (a long static run or a dynamic one that is not contiguous). An image's
    mean over its dynamic height and width is two nodes rather than two sums, the count's
    Size/Max/Div/Cast and a Div."""
    dims = list(dims)
    steps: list[list[int]] = []
    for run in reversed(_runs(axes)):
        if _short(run, dims):
            steps.append(run)
        elif _length(run, dims) is None and len(run) > 1 and _contiguous(run, dims):
            for a in reversed(run):
                if isinstance(dims[a], int) and not _short([a], dims):
                    return None
                steps.append([a])
                dims[a] = 1
        else:
            return None
        for a in run:
            dims[a] = 1
    for step in steps:  # the last axes first: the earlier axes keep their index without keepdims
        x = ctx.op.ReduceMean(x, ctx.const(step), keepdims=int(keepdim))
    return x


def count(ctx, x: ir.Value, total: ir.Value, axes: list[int], like: ir.Value | None = None) -> ir.Value:
    """Elements summed into each element of ``total`` (x summed over ``axes``), in x's dtype: a
    constant where the reduced sizes are static, else size(x) / max(size(total), 1)."""
    like = x if like is None else like
    n = _length(axes, list(like.shape))
    if n is not None:
        return ctx.scalar(n, like.dtype)
    n = ctx.op.Div(ctx.op.Size(x), ctx.op.Max(ctx.op.Size(total), ctx.scalar(1, I64)))
    return ctx.op.Cast(n, to=like.dtype)


def levels(n: int) -> list[int]:
    """Lengths, outermost first, of the levels a static axis of ``n`` elements is summed in: each
    at most ``LEVEL`` where ``n`` has such factors, nearly equal; their product ``n`` or, when no
    factor fits, the least multiple of the inner levels at or above ``n`` (zeros padded)."""
    inner = []
    rest = n
    while rest > LEVEL:
        k = math.ceil(math.log(rest) / math.log(LEVEL))
        target = math.ceil(rest ** (1 / k))
        b = next((d for d in range(target, LEVEL + 1) if rest % d == 0), target)
        inner.append(b)
        rest = -(-rest // b)
    return [rest] + inner[::-1]


def _dynamic_run(ctx, x: ir.Value, dtype: ir.DataType, dims: list, run: list[int]) -> ir.Value:
    """x summed over ``run`` (kept, size 1), some of whose sizes are dynamic: accumulated in float64
    (Cast, ReduceSum, Cast back), right at every length with no shape arithmetic and no copy of x
    beyond the cast; measured against summing in padded levels in ``benchmarks/NUMERICS.md``."""
    total = ctx.op.ReduceSum(ctx.op.Cast(x, to=F64), ctx.const(run), keepdims=1)
    return ctx.op.Cast(total, to=dtype)


def wide(like: ir.Value, axes: list[int]) -> bool:
    """True when a float32 reduction over ``axes`` of a value shaped as ``like`` has a run of reduced
    axes whose length is dynamic and that is not summed axis by axis (a contiguous run of several
    axes): it accumulates in float64 (``_dynamic_run``)."""
    dims = list(like.shape)
    return like.dtype == ir.DataType.FLOAT and any(
        _length(run, dims) is None and not (len(run) > 1 and _contiguous(run, dims)) for run in _runs(axes))


def _in_levels(ctx, x: ir.Value, dtype: ir.DataType, dims: list, run: list[int], n: ir.Value, lengths: list,
               padded: ir.Value | None) -> ir.Value:
    """x (of ``dtype``, sizes ``dims``) summed over ``run`` (kept, size 1) of ``n`` elements: the
    run reshaped to ``lengths`` (outermost first; ints or 1-D int64 values), after zeros padded to
    ``padded`` elements when given, and summed level by level, innermost first."""
    first, last = run[0], run[-1]
    lead = [ctx.const([0] * first)] if first else []  # Reshape's 0: the input's size there
    after = dims[last + 1:]
    tail = [ctx.const(after) if all(isinstance(d, int) for d in after) else ctx.op.Shape(x, start=last + 1)] \
        if after else []
    if padded is not None:
        if len(run) > 1:
            x = ctx.op.Reshape(x, ctx.op.Concat(*lead, n, *tail, axis=0))
        x = ctx.op.Pad(x, ctx.op.Concat(ctx.const([0]), ctx.op.Sub(padded, n), axis=0),
                       ctx.const(np.zeros((), dtype.numpy())), ctx.const([first]))
    out = ctx.op.Reshape(x, ctx.op.Concat(*lead, *(ctx.const([k]) if isinstance(k, int) else k for k in lengths),
                                          *tail, axis=0))
    for k in reversed(range(1, len(lengths))):
        out = ctx.op.ReduceSum(out, ctx.const([first + k]), keepdims=0)
    out = ctx.op.ReduceSum(out, ctx.const([first]), keepdims=1)
    return ctx.op.Unsqueeze(out, ctx.const(run[1:])) if len(run) > 1 else out
