"""Reductions: sum, mean, prod, amax/amin, max/min (values and indices), argmax/argmin, var/std,
any/all, logsumexp, linalg_vector_norm, cumprod.

Semantics: the PyTorch reductions (``dim`` an int, a list, or None / [] for every axis; ``keepdim``;
sum/prod of bool and integer tensors give int64; var/std with ``correction``, default 1) on the
ONNX Reduce* operators of opset 18+ (axes as an input), ArgMax/ArgMin; integer sums by CumSum, exact
where onnxruntime's integer ReduceSum is not (``integer_sum``). Sums, means, variances
and norms over long float32 axes are summed in levels (``_accurate``), as accurate as PyTorch's
cascade summation where one ReduceSum is not.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate import dtypes
from onnxport.translate.ops import _accurate
from onnxport.translate.ops._common import norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten
BOOL = ir.DataType.BOOL
I64 = ir.DataType.INT64


def _axes(rank: int, dim) -> list[int] | None:
    """Normalized axes of ``dim`` (int, list), or None for every axis (None, [] or a 0-d input)."""
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = [dim]
    if len(dim) == 0 or rank == 0:
        return None
    return sorted({norm_axis(d, rank) for d in dim})


def reduce(ctx, op_type: str, x: ir.Value, dim, keepdim: bool, rank: int | None = None) -> ir.Value:
    """ONNX ``op_type`` (ReduceSum, ReduceMax...) over ``dim`` (None or []: every axis) of ``x``.

    ``rank`` is x's rank when x is an intermediate value without a recorded shape.
    """
    rank = ctx.rank(x) if rank is None else rank
    axes = _axes(rank, dim)
    if axes is None:
        if rank == 0:  # a 0-d tensor is its own sum, mean, max...; its own norm is |x|
            if op_type in ("ReduceL1", "ReduceL2"):
                return ctx.op.Abs(x)
            if op_type == "ReduceSumSquare":
                return ctx.op.Mul(x, x)
            return ctx.op.Identity(x)
        return getattr(ctx.op, op_type)(x, keepdims=1 if keepdim else 0)
    return getattr(ctx.op, op_type)(x, ctx.const(np.array(axes, dtype=np.int64)), keepdims=1 if keepdim else 0)


def _in_out_dtype(ctx, x):
    """x cast to the node's result dtype (sum/prod of bool and ints give int64)."""
    return ctx.cast(x, ctx.out_dtype)


def _every(rank: int, dim) -> list[int]:
    """Normalized axes of ``dim``, every axis for None or []."""
    axes = _axes(rank, dim)
    return list(range(rank)) if axes is None else axes


def sum_over(ctx, x: ir.Value, dim, keepdim: bool, like: ir.Value | None = None, contiguous: int | None = None):
    """The sum of ``x`` over ``dim`` (None or []: every axis), in levels over long float32 axes
    (``_accurate.sum_over``); ``like``: a value of x's dtype and shape (default x)."""
    like = x if like is None else like
    if ctx.rank(like) == 0:
        return ctx.op.Identity(x)
    return _accurate.sum_over(ctx, x, _every(ctx.rank(like), dim), keepdim, like, contiguous)


@translates(aten.sum.default, aten.sum.dim_IntList)
def sum_(ctx, x, dim=None, keepdim=False, dtype=None):
    """sum(Tensor self, *, ScalarType? dtype) and sum.dim_IntList(Tensor self, int[1]? dim,
    bool keepdim=False, *, ScalarType? dtype): ONNX ReduceSum in the result dtype; an integer sum
    exact, wrapping around as PyTorch's does (``integer_sum``)."""
    x = _in_out_dtype(ctx, x)
    if dtypes.is_int(ctx.out_dtype) and ctx.rank(x) > 0:
        return integer_sum(ctx, x, dim, keepdim)
    return sum_over(ctx, x, dim, keepdim)


def integer_sum(ctx, x: ir.Value, dim, keepdim: bool) -> ir.Value:
    """The sum of integer ``x`` over ``dim`` (None or []: every axis), exact and wrapping around modulo
    2^bits as PyTorch's: onnxruntime's integer ReduceSum accumulates in double (inexact past 2^53, and
    saturated past the type: BLT's rolling hash sums products of ``prime ** k``), its CumSum in the type.
    Each axis: a zero slice (ReduceSum of ``x * 0``, so an empty axis sums to 0) before the axis, the
    CumSum along it, its last element."""
    op = ctx.op
    axes = _every(ctx.rank(x), dim)
    zero = ctx.scalar(0, ctx.out_dtype)
    for axis in axes:
        start = op.ReduceSum(op.Mul(x, zero), ctx.const([axis]), keepdims=1)
        running = op.CumSum(op.Concat(start, x, axis=axis), ctx.const(np.array(axis, dtype=np.int64)))
        x = op.Slice(running, ctx.const([-1]), ctx.const([np.iinfo(np.int64).max]), ctx.const([axis]))
    return x if keepdim else op.Squeeze(x, ctx.const(axes))


def _may_be_empty(ctx, x: ir.Value, axes: list[int] | None) -> bool:
    """True unless every reduced axis of ``x`` has a static nonzero size or, read from the FX
    node's first input (same rank), a dynamic size the export promises from 1 on
    (``TranslationContext.may_be_empty``)."""
    if x.shape is None:
        return True
    dims = list(x.shape)
    node = ctx.current_node
    first = node.args[0] if node is not None and node.args else None
    traced = first.meta.get("val") if isinstance(first, torch.fx.Node) else None
    sizes = list(traced.shape) if isinstance(traced, torch.Tensor) and traced.dim() == len(dims) else None

    def empty(a: int) -> bool:
        if isinstance(dims[a], int):
            return dims[a] == 0
        return sizes is None or ctx.may_be_empty(sizes[a])

    return any(empty(a) for a in (range(len(dims)) if axes is None else axes))


def mean_over(ctx, x: ir.Value, dim, keepdim: bool) -> ir.Value:
    """The mean of float ``x`` over ``dim``: ONNX ReduceMean where no reduced axis can be empty
    and one node is accurate, else sum / count (``_accurate``), NaN over an empty axis as in
    PyTorch (onnxruntime's ReduceMean gives 0)."""
    rank = ctx.rank(x)
    if rank == 0:
        return ctx.op.Identity(x)
    axes = _every(rank, dim)
    if not _may_be_empty(ctx, x, axes):
        return _accurate.mean_over(ctx, x, axes, keepdim)
    total = _accurate.sum_over(ctx, x, axes, keepdim)
    return ctx.op.Div(total, _accurate.count(ctx, x, total, axes))


@translates(aten.mean.default, aten.mean.dim)
def mean(ctx, x, dim=None, keepdim=False, dtype=None):
    """mean(Tensor self, *, dtype) and mean.dim(Tensor self, int[1]? dim, bool keepdim, *, dtype):
    ONNX ReduceMean; NaN over an empty axis."""
    return mean_over(ctx, _in_out_dtype(ctx, x), dim, keepdim)


@translates(aten.prod.default, aten.prod.dim_int)
def prod(ctx, x, dim=None, keepdim=False, dtype=None):
    """prod(Tensor self, *, dtype) and prod.dim_int(Tensor self, int dim, bool keepdim, *, dtype):
    ONNX ReduceProd in the result dtype."""
    return reduce(ctx, "ReduceProd", _in_out_dtype(ctx, x), dim, keepdim)


def _nan_flags(ctx, x):
    """IsNaN(x) as int32 (0/1), to reduce with ReduceMax / ArgMax."""
    return ctx.op.Cast(ctx.op.IsNaN(x), to=ir.DataType.INT32)


def _minmax(ctx, op_type: str, x, dim, keepdim):
    """ReduceMax/ReduceMin over ``dim``; bools go through int32; a NaN in a float slice makes the
    result NaN, as in PyTorch (onnxruntime's reductions skip NaN)."""
    rank = ctx.rank(x)
    if x.dtype == BOOL:  # reduce bools as int32, back to bool
        out = reduce(ctx, op_type, ctx.cast(x, ir.DataType.INT32), dim, keepdim, rank=rank)
        return ctx.cast(out, BOOL)
    out = reduce(ctx, op_type, x, dim, keepdim)
    if not dtypes.is_float(x.dtype) or rank == 0:
        return out
    has_nan = ctx.op.Cast(reduce(ctx, "ReduceMax", _nan_flags(ctx, x), dim, keepdim, rank=rank), to=BOOL)
    return ctx.op.Where(has_nan, ctx.scalar(np.nan, x.dtype), out)


@translates(aten.amax.default)
def amax(ctx, x, dim=(), keepdim=False):
    """amax(Tensor self, int[1] dim=[], bool keepdim=False): ONNX ReduceMax ([]: every axis)."""
    return _minmax(ctx, "ReduceMax", x, dim, keepdim)


@translates(aten.amin.default)
def amin(ctx, x, dim=(), keepdim=False):
    """amin(Tensor self, int[1] dim=[], bool keepdim=False): ONNX ReduceMin ([]: every axis)."""
    return _minmax(ctx, "ReduceMin", x, dim, keepdim)


@translates(aten.max.default)
def max_all(ctx, x):
    """max(Tensor self) -> Tensor: the maximum of every element (0-d)."""
    return _minmax(ctx, "ReduceMax", x, None, False)


@translates(aten.min.default)
def min_all(ctx, x):
    """min(Tensor self) -> Tensor: the minimum of every element (0-d)."""
    return _minmax(ctx, "ReduceMin", x, None, False)


def _arg_along(ctx, op_type: str, x, axis: int, keepdims: int):
    """ArgMax/ArgMin along ``axis``, first occurrence; for floats the first NaN wins, as in PyTorch."""
    out = getattr(ctx.op, op_type)(x, axis=axis, keepdims=keepdims, select_last_index=0)
    if not dtypes.is_float(x.dtype):
        return out
    flags = _nan_flags(ctx, x)
    nan_at = ctx.op.ArgMax(flags, axis=axis, keepdims=keepdims, select_last_index=0)
    has_nan = ctx.op.Cast(ctx.op.ReduceMax(flags, ctx.const([axis]), keepdims=keepdims), to=BOOL)
    return ctx.op.Where(has_nan, nan_at, out)


def _arg(ctx, op_type: str, x, dim, keepdim):
    """ArgMax/ArgMin (first occurrence, as PyTorch) over ``dim``; None flattens x first."""
    if x.dtype == BOOL:
        x = ctx.cast(x, ir.DataType.INT32)
    rank = ctx.rank(x)
    if dim is None:
        flat = ctx.op.Reshape(x, ctx.const([-1]))
        flat.type, flat.shape = ir.TensorType(x.dtype), ir.Shape([None])
        out = _arg_along(ctx, op_type, flat, 0, 0)
        if keepdim and rank > 0:
            out = ctx.op.Reshape(out, ctx.const([1] * rank))
        return out
    if rank == 0:
        return ctx.op.Identity(ctx.const(np.array(0, dtype=np.int64)))
    return _arg_along(ctx, op_type, x, norm_axis(dim, rank), 1 if keepdim else 0)


@translates(aten.argmax.default)
def argmax(ctx, x, dim=None, keepdim=False):
    """argmax(Tensor self, int? dim=None, bool keepdim=False): ONNX ArgMax (int64 indices)."""
    return _arg(ctx, "ArgMax", x, dim, keepdim)


@translates(aten.argmin.default)
def argmin(ctx, x, dim=None, keepdim=False):
    """argmin(Tensor self, int? dim=None, bool keepdim=False): ONNX ArgMin (int64 indices)."""
    return _arg(ctx, "ArgMin", x, dim, keepdim)


@translates(aten.max.dim)
def max_dim(ctx, x, dim, keepdim=False):
    """max.dim(Tensor self, int dim, bool keepdim=False) -> (values, indices)."""
    return _minmax(ctx, "ReduceMax", x, [dim], keepdim), _arg(ctx, "ArgMax", x, dim, keepdim)


@translates(aten.min.dim)
def min_dim(ctx, x, dim, keepdim=False):
    """min.dim(Tensor self, int dim, bool keepdim=False) -> (values, indices)."""
    return _minmax(ctx, "ReduceMin", x, [dim], keepdim), _arg(ctx, "ArgMin", x, dim, keepdim)


def _count(ctx, x, kept_mean, to):
    """Number of elements reduced into each output element, as a 0-d ``to`` value (no division
    by zero when the result is empty)."""
    n = ctx.op.Div(ctx.op.Size(x), ctx.op.Max(ctx.op.Size(kept_mean), ctx.scalar(1, I64)))
    return ctx.cast(n, to)


def _var_mean(ctx, x, dim, correction, keepdim):
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    if correction is None:
        correction = 1
    if ctx.rank(x) == 0:
        dim = None
    mean_k = mean_over(ctx, x, dim, True)
    d = ctx.op.Sub(x, mean_k)
    ss = sum_over(ctx, ctx.op.Mul(d, d), dim, keepdim, like=x, contiguous=_accurate.SQUARES)
    n = _count(ctx, x, mean_k, to)
    denom = ctx.op.Max(ctx.op.Sub(n, ctx.scalar(correction, to)), ctx.scalar(0, to))
    var = ctx.op.Div(ss, denom)
    mean = mean_over(ctx, x, dim, keepdim)
    return var, mean


def _correction(unbiased_or_correction):
    if isinstance(unbiased_or_correction, bool):
        return 1 if unbiased_or_correction else 0
    return unbiased_or_correction


@translates(aten.var.correction, aten.var.dim, aten.var.default)
def var(ctx, x, dim=None, correction=None, keepdim=False, *, unbiased=None):
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False),
    var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False), var(Tensor self,
    bool unbiased=True): sum((x - mean)^2) / max(N - correction, 0); correction defaults to 1."""
    if isinstance(dim, bool):  # var.default(self, unbiased)
        dim, correction = None, _correction(dim)
    return _var_mean(ctx, x, dim, _correction(correction if unbiased is None else unbiased), keepdim)[0]


@translates(aten.std.correction, aten.std.dim, aten.std.default)
def std(ctx, x, dim=None, correction=None, keepdim=False, *, unbiased=None):
    """std: the square root of ``var`` with the same arguments."""
    return ctx.op.Sqrt(var(ctx, x, dim, correction, keepdim, unbiased=unbiased))


@translates(aten.var_mean.correction, aten.var_mean.dim)
def var_mean(ctx, x, dim=None, correction=None, keepdim=False, *, unbiased=None):
    """var_mean.correction(Tensor self, int[1]? dim, *, Scalar? correction, bool keepdim) -> (var, mean)."""
    return _var_mean(ctx, x, dim, _correction(correction if unbiased is None else unbiased), keepdim)


@translates(aten.std_mean.correction, aten.std_mean.dim)
def std_mean(ctx, x, dim=None, correction=None, keepdim=False, *, unbiased=None):
    """std_mean.correction(Tensor self, int[1]? dim, *, Scalar? correction, bool keepdim) -> (std, mean)."""
    v, m = _var_mean(ctx, x, dim, _correction(correction if unbiased is None else unbiased), keepdim)
    return ctx.op.Sqrt(v), m


def _as_bool(ctx, x):
    if x.dtype == BOOL:
        return x
    return ctx.op.Not(ctx.op.Equal(x, ctx.scalar(0, x.dtype)))


def _any_all(ctx, op_type, x, dim, keepdim):
    flags = ctx.op.Cast(_as_bool(ctx, x), to=ir.DataType.INT32)
    out = reduce(ctx, op_type, flags, dim, keepdim, rank=ctx.rank(x))
    return ctx.op.Cast(out, to=ctx.out_dtype)


@translates(aten.any.default, aten.any.dim, aten.any.dims)
def any_(ctx, x, dim=None, keepdim=False):
    """any(Tensor self), any.dim(Tensor self, int dim, bool keepdim), any.dims(Tensor self,
    int[]? dim, bool keepdim): True where some element is nonzero (ReduceMax of the flags)."""
    return _any_all(ctx, "ReduceMax", x, dim, keepdim)


@translates(aten.all.default, aten.all.dim, aten.all.dims)
def all_(ctx, x, dim=None, keepdim=False):
    """all(Tensor self), all.dim(Tensor self, int dim, bool keepdim), all.dims(...): True where
    every element is nonzero (ReduceMin of the flags)."""
    return _any_all(ctx, "ReduceMin", x, dim, keepdim)


@translates(aten._is_all_true.default)
def is_all_true(ctx, x):
    """_is_all_true(Tensor self) -> Tensor: a 0-d bool, True where every element of the bool tensor
    ``self`` is True (``torch.Tensor.all`` behind ``torch._check`` and ``torch_compilable_check``);
    ``all`` over every axis."""
    return _any_all(ctx, "ReduceMin", x, None, False)


@translates(aten.logsumexp.default)
def logsumexp(ctx, x, dim, keepdim=False):
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) = m + log(sum(exp(x - m))) with m the
    maximum over ``dim`` (0 where infinite), as PyTorch computes it for stability."""
    to = ctx.out_dtype
    r = ctx.rank(x)
    x = ctx.cast(x, to)
    m = reduce(ctx, "ReduceMax", x, dim, True, rank=r)
    m = ctx.op.Where(ctx.op.IsInf(m), ctx.scalar(0, to), m)
    s = sum_over(ctx, ctx.op.Exp(ctx.op.Sub(x, m)), dim, keepdim, like=x)
    m_out = m if keepdim or ctx.rank(x) == 0 else reduce(ctx, "ReduceMax", m, dim, False, rank=r)
    return ctx.op.Add(ctx.op.Log(s), m_out)


@translates(aten.linalg_vector_norm.default)
def linalg_vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, dtype):
    sqrt(sum x^2) (ord 2), sum |x| (1), max/min of |x| (+-inf), count of nonzeros (0), else
    (sum |x|^ord)^(1/ord); the sums by ``sum_over`` (in levels over long float32 axes). Not ReduceL2
    and ReduceL1: onnxruntime adds their terms one at a time, 2-18x eager's error for ReduceL2 from
    64 to 65,536 elements, where ReduceSum of the squares is 0.9-1.0x, at the same speed or faster
    from 768 elements on (benchmarks/NUMERICS.md)."""
    to = ctx.out_dtype
    r = ctx.rank(x)
    x = ctx.cast(x, to)
    if r == 0 and ord in (1, 2):
        return ctx.op.Abs(x)
    if ord == 2:
        return ctx.op.Sqrt(sum_over(ctx, ctx.op.Mul(x, x), dim, keepdim, like=x))
    if ord == 1:
        return sum_over(ctx, ctx.op.Abs(x), dim, keepdim, like=x)
    a = ctx.op.Abs(x)
    if ord == math.inf:
        return reduce(ctx, "ReduceMax", a, dim, keepdim, rank=r)
    if ord == -math.inf:
        return reduce(ctx, "ReduceMin", a, dim, keepdim, rank=r)
    if ord == 0:
        nz = ctx.op.Cast(ctx.op.Not(ctx.op.Equal(x, ctx.scalar(0, to))), to=to)
        return sum_over(ctx, nz, dim, keepdim, like=x)
    s = sum_over(ctx, ctx.op.Pow(a, ctx.scalar(ord, to)), dim, keepdim, like=x)
    return ctx.op.Pow(s, ctx.scalar(1.0 / ord, to))


def _prefix_square(ctx, x, dim):
    """x moved so ``dim`` is last, as rows[..., 1, n], with mask[i, j] = j <= i (bool [n, n]) and the
    permutation to move results back (None when ``dim`` already is last)."""
    rank = ctx.rank(x)
    axis = norm_axis(dim, rank)
    perm = None
    if axis != rank - 1:
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        x = ctx.op.Transpose(x, perm=perm)
    n = ctx.op.Shape(x, start=-1)  # [n]
    ones = ctx.op.ConstantOfShape(ctx.op.Concat(n, n, axis=0), value=ir.tensor(np.array([1], dtype=np.int64)))
    mask = ctx.op.Cast(ctx.op.Trilu(ones, upper=0), to=BOOL)
    return ctx.op.Unsqueeze(x, ctx.const([-2])), mask, perm


def _back(ctx, value, perm):
    return ctx.op.Transpose(value, perm=perm) if perm is not None else value


@translates(aten.cumprod.default)
def cumprod(ctx, x, dim, dtype=None):
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None): exact products of prefixes.

    ONNX has no CumProd: x is moved so ``dim`` is last, repeated into an [..., n, n] tensor whose
    row i keeps x[..., :i+1] (1 elsewhere, a Trilu mask), and reduced with ReduceProd. Memory is
    O(n^2) in the length n along ``dim``; integers stay exact.
    """
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    if ctx.rank(x) == 0:
        return ctx.op.Identity(x)
    rows, mask, perm = _prefix_square(ctx, x, dim)
    picked = ctx.op.Where(mask, rows, ctx.scalar(1, to))
    return _back(ctx, ctx.op.ReduceProd(picked, ctx.const([-1]), keepdims=0), perm)


def _cum_extremum(ctx, x, dim, largest: bool):
    to = x.dtype
    if ctx.rank(x) == 0:
        return ctx.op.Identity(x), ctx.op.Identity(ctx.const(np.array(0, dtype=np.int64)))
    work = ctx.cast(x, ir.DataType.INT32) if to == BOOL else x
    wt = ir.DataType.INT32 if to == BOOL else to
    rows, mask, perm = _prefix_square(ctx, work, dim)
    info = np.finfo(wt.numpy()) if dtypes.is_float(wt) else np.iinfo(wt.numpy())
    fill = ctx.scalar(-np.inf if dtypes.is_float(wt) and largest else np.inf if dtypes.is_float(wt) else
                      (info.min if largest else info.max), wt)
    picked = ctx.op.Where(mask, rows, fill)  # [..., n(i), n(j)]
    values = ctx.op.ReduceMax(picked, ctx.const([-1]), keepdims=1) if largest else \
        ctx.op.ReduceMin(picked, ctx.const([-1]), keepdims=1)
    # index: the last j <= i where x[j] equals the running extremum (PyTorch's choice on ties)
    n = ctx.op.Shape(rows, start=-1)
    j = ctx.op.Range(ctx.scalar(0, I64), ctx.op.Squeeze(n, ctx.const([0])), ctx.scalar(1, I64))
    hit = ctx.op.And(mask, ctx.op.Equal(rows, values))
    idx = ctx.op.ReduceMax(ctx.op.Where(hit, j, ctx.scalar(-1, I64)), ctx.const([-1]), keepdims=0)
    values = ctx.op.Squeeze(values, ctx.const([-1]))
    if dtypes.is_float(wt):  # after a NaN: NaN, at the index of the last NaN so far (PyTorch)
        nan_hit = ctx.op.And(mask, ctx.op.IsNaN(rows))
        last_nan = ctx.op.ReduceMax(ctx.op.Where(nan_hit, j, ctx.scalar(-1, I64)), ctx.const([-1]), keepdims=0)
        has_nan = ctx.op.GreaterOrEqual(last_nan, ctx.scalar(0, I64))
        values = ctx.op.Where(has_nan, ctx.scalar(np.nan, wt), values)
        idx = ctx.op.Where(has_nan, last_nan, idx)
    values = ctx.cast(values, BOOL) if to == BOOL else values
    return _back(ctx, values, perm), _back(ctx, idx, perm)


@translates(aten.cummax.default)
def cummax(ctx, x, dim):
    """cummax(Tensor self, int dim) -> (values, indices): running maximum along ``dim`` and the
    last index holding it; NaN once a NaN was seen (O(n^2) memory along ``dim``, as cumprod)."""
    return _cum_extremum(ctx, x, dim, True)


@translates(aten.cummin.default)
def cummin(ctx, x, dim):
    """cummin(Tensor self, int dim) -> (values, indices): running minimum along ``dim`` and the
    last index holding it."""
    return _cum_extremum(ctx, x, dim, False)


@translates(aten.logcumsumexp.default)
def logcumsumexp(ctx, x, dim):
    """logcumsumexp(Tensor self, int dim): out[i] = logsumexp(x[:i+1]) along ``dim``, each prefix
    shifted by its own maximum (0 where infinite) so small values do not underflow; O(n^2) memory
    along ``dim`` as cumprod."""
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    if ctx.rank(x) == 0:
        return ctx.op.Identity(x)
    rows, mask, perm = _prefix_square(ctx, x, dim)
    picked = ctx.op.Where(mask, rows, ctx.scalar(-np.inf, to))  # [..., n(i), n(j)]
    m = ctx.op.ReduceMax(picked, ctx.const([-1]), keepdims=1)
    m = ctx.op.Where(ctx.op.IsInf(m), ctx.scalar(0, to), m)
    s = ctx.op.ReduceSum(ctx.op.Exp(ctx.op.Sub(picked, m)), ctx.const([-1]), keepdims=1)
    out = ctx.op.Squeeze(ctx.op.Add(ctx.op.Log(s), m), ctx.const([-1]))
    return _back(ctx, out, perm)


@translates(aten.median.default)
def median(ctx, x):
    """median(Tensor self) -> 0-d: the lower median of every element (the ((n-1)//2)-th smallest);
    NaN when any element is NaN."""
    flat = ctx.op.Reshape(x, ctx.const([-1]))
    n = ctx.op.Size(x)
    k = ctx.op.Add(ctx.op.Div(ctx.op.Sub(n, ctx.scalar(1, I64)), ctx.scalar(2, I64)), ctx.scalar(1, I64))
    vals, _ = ctx.op.TopK(flat, ctx.op.Unsqueeze(k, ctx.const([0])), axis=0, largest=0, sorted=1, _outputs=2)
    out = ctx.op.Squeeze(ctx.op.Slice(vals, ctx.const([-1]), ctx.const([2**62]), ctx.const([0])), ctx.const([0]))
    if not dtypes.is_float(x.dtype):
        return out
    has_nan = ctx.op.Cast(ctx.op.ReduceMax(_nan_flags(ctx, flat), keepdims=0), to=BOOL)
    return ctx.op.Where(has_nan, ctx.scalar(np.nan, x.dtype), out)


@translates(aten.dist.default)
def dist(ctx, a, b, p=2):
    """dist(Tensor self, Tensor other, Scalar p=2): the p-norm of a - b over every element."""
    to = ctx.out_dtype
    a, b = ctx.cast(a, to), ctx.cast(b, to)
    diff = ctx.op.Sub(a, b)
    diff.type = ir.TensorType(to)
    if a.shape == b.shape:
        diff.shape = a.shape
    else:  # broadcast: the norm of every element, flattened
        diff = ctx.op.Reshape(diff, ctx.const([-1]))
        diff.type, diff.shape = ir.TensorType(to), ir.Shape([None])
    return linalg_vector_norm(ctx, diff, p, None, False)
