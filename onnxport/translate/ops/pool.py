"""Pooling: max_pool 1d/2d/3d (with indices), avg_pool 1d/2d/3d, adaptive_avg_pool 1d/2d/3d,
adaptive_max_pool 1d/2d/3d (with indices).

Semantics: torch.nn.functional.max_pool{1,2,3}d / avg_pool{1,2,3}d / adaptive_avg_pool{1,2,3}d on
ONNX MaxPool, AveragePool and, pooled to size 1, ReduceMean (opset 19+ forms: ``dilations`` on both, the
ceil-mode rule that drops a last window starting in the right padding, as PyTorch does).
PyTorch's max-pool indices count positions within each ``[N, C]`` plane; ONNX counts them over the
whole tensor, so they are taken modulo the plane size.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError, UnsupportedOpError
from onnxport.translate import dtypes
from onnxport.translate.ops import _accurate
from onnxport.translate.ops._common import axes_const
from onnxport.translate.ops.conv import expand_param
from onnxport.capture.patches import TRANSLATIONS, Patch, SetKernel, register
from onnxport.capture.tracing import translating
from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64


def _spatial(kernel_size) -> int:
    return 1 if isinstance(kernel_size, int) else len(kernel_size)


def _batched(ctx, x: ir.Value, n: int, float_only: bool = True) -> tuple[ir.Value, bool]:
    """``x`` with a batch axis: unbatched ``[C, *spatial]`` inputs get a leading 1. Integer inputs
    are refused unless ``float_only`` is False: onnxruntime averages floating-point tensors only."""
    if float_only and x.dtype is not None and not dtypes.is_float(x.dtype):
        raise UnsupportedOpError(f"pooling of {x.dtype.name.lower()} tensors: onnxruntime's pooling operators "
                                 "take floating-point tensors only",
                                 hint="convert the input to a float dtype (x.float()) and back after")
    if ctx.rank(x) == n + 1:
        y = ctx.op.Unsqueeze(x, axes_const(ctx, 0))
        y.type, y.shape = x.type, ir.Shape([1, *x.shape])
        return y, True
    if ctx.rank(x) != n + 2:
        raise TranslationError(f"a {n}-d pooling got an input of rank {ctx.rank(x)}",
                               hint=f"pass [N, C, *spatial] or [C, *spatial] with {n} spatial axes")
    return x, False


def _unbatched(ctx, y: ir.Value, added: bool) -> ir.Value:
    return ctx.op.Squeeze(y, axes_const(ctx, 0)) if added else y


def _window(kernel_size, stride, padding, dilation, n: int) -> dict:
    kernel = expand_param(kernel_size, n, "kernel_size")
    stride = expand_param(stride, n, "stride") if stride else list(kernel)
    pads = expand_param(padding, n, "padding")
    dil = expand_param(dilation, n, "dilation")
    return dict(kernel_shape=kernel, strides=stride, pads=pads + pads, dilations=dil)


def _static_sizes(xb: ir.Value, n: int) -> list[int] | None:
    sizes = list(xb.shape)[2:] if xb.shape is not None else []
    return sizes if len(sizes) == n and all(isinstance(v, int) for v in sizes) else None


def ceil_mode_as_floor(sizes: list[int], attrs: dict, explicit_pads: bool = False) -> tuple[dict, list[int]]:
    """Pooling attributes with ``ceil_mode=0`` giving PyTorch's ceil-mode windows on static sizes.

    PyTorch's ceil-mode count is ``ceil((L + pads - eff_kernel) / stride) + 1``, minus one when the
    last window would start in the right padding. The end pads are set so that the floor formula
    reaches that count (a window's padded part is ignored by MaxPool, and by AveragePool without
    ``count_include_pad``). ONNX shape inference does not apply the "start in the padding" rule, so
    a static graph written with ``ceil_mode=1`` would be rejected by the checker.

    ``explicit_pads``: the input was already padded with the original pads (AveragePool counting
    padding); the implicit pads then only extend the end. Returns (attributes, output count per
    axis); the floor count can exceed it by one, the caller slices.
    """
    n = len(sizes)
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    dil = attrs.get("dilations", [1] * n)
    begins, ends, outs = [], [], []
    for i, length in enumerate(sizes):
        pl, pr, st = pads[i], pads[n + i], strides[i]
        eff = dil[i] * (kernel[i] - 1) + 1
        out = -(-(length + pl + pr - eff) // st) + 1
        if (out - 1) * st >= length + pl:
            out -= 1
        if explicit_pads:
            length, pl = length + pl + pr, 0
        begins.append(pl)
        ends.append(max(0, (out - 1) * st + eff - length - pl))
        outs.append(out)
    return dict(attrs, pads=begins + ends, ceil_mode=0), outs


def ceil_mode_partly_static(xb: ir.Value, attrs: dict) -> tuple[dict, list[tuple[int, int]]]:
    """Ceil-mode attributes when only some spatial sizes are static: on each static axis whose last
    window PyTorch drops, the end pad is cut so that ONNX's plain ceil formula (shape inference)
    and onnxruntime both give PyTorch's count. For windows where the padding is ignored (MaxPool,
    AveragePool without ``count_include_pad``). Returns (attributes, [(axis, count)] of the axes
    where no pad does it: the caller slices them to PyTorch's count)."""
    sizes = list(xb.shape)[2:] if xb.shape is not None else []
    n = len(attrs["kernel_shape"])
    if len(sizes) != n:
        return attrs, []
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], list(attrs["pads"])
    dil = attrs.get("dilations", [1] * n)
    cuts = []
    for i, length in enumerate(sizes):
        if not isinstance(length, int):
            continue
        pl, pr, st = pads[i], pads[n + i], strides[i]
        eff = dil[i] * (kernel[i] - 1) + 1
        out = -(-(length + pl + pr - eff) // st) + 1
        if (out - 1) * st < length + pl:
            continue  # no window dropped: ONNX's formula already agrees
        end = (out - 2) * st + eff - length - pl
        if 0 <= end < kernel[i]:
            pads[n + i] = end
        else:
            cuts.append((2 + i, out - 1))
    return dict(attrs, pads=pads), cuts


def _cut(ctx, y: ir.Value, cuts: list[tuple[int, int]]) -> ir.Value:
    if not cuts:
        return y
    return ctx.op.Slice(y, ctx.const([0] * len(cuts)), ctx.const([c for _, c in cuts]),
                        ctx.const([a for a, _ in cuts]))


def _slice_to(ctx, y: ir.Value, sizes: list[int], attrs: dict, outs: list[int]) -> ir.Value:
    """Drop the extra last window the floor formula may add on each axis."""
    n = len(sizes)
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    dil = attrs.get("dilations", [1] * n)
    axes, ends = [], []
    for i, length in enumerate(sizes):
        got = (length + pads[i] + pads[n + i] - (dil[i] * (kernel[i] - 1) + 1)) // strides[i] + 1
        if got > outs[i]:
            axes.append(2 + i)
            ends.append(outs[i])
    if not axes:
        return y
    return ctx.op.Slice(y, ctx.const([0] * len(axes)), ctx.const(ends), ctx.const(axes))


# ------------------------------------------------------------------------------------ max pool
def max_pool(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, with_indices: bool):
    """ONNX MaxPool of ``x[N, C, *S]`` (or unbatched ``[C, *S]``): out, or (out, indices) with
    indices flattened per ``[N, C]`` plane as PyTorch returns them. Integers are pooled as float64
    (onnxruntime's MaxPool has no int64 kernel; exact up to 2^53)."""
    if x.dtype is not None and not dtypes.is_float(x.dtype) and x.dtype != ir.DataType.BOOL:
        res = _max_pool(ctx, ctx.cast(x, ir.DataType.DOUBLE), kernel_size, stride, padding, dilation, ceil_mode,
                        with_indices)
        if with_indices:
            return ctx.cast(res[0], x.dtype), res[1]
        return ctx.cast(res, x.dtype)
    return _max_pool(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, with_indices)


def _max_pool(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, with_indices: bool):
    n = _spatial(kernel_size)
    xb, added = _batched(ctx, x, n)
    attrs = dict(_window(kernel_size, stride, padding, dilation, n), ceil_mode=int(bool(ceil_mode)))
    sizes = _static_sizes(xb, n)
    outs = None
    padded, cuts = None, []
    if ceil_mode and sizes is not None:
        attrs, outs = ceil_mode_as_floor(sizes, attrs)
        xb, sizes, padded = _pad_beyond_kernel(ctx, xb, sizes, attrs, x.dtype)
    elif ceil_mode:
        attrs, cuts = ceil_mode_partly_static(xb, attrs)
    if not with_indices:
        y = ctx.op.MaxPool(xb, **attrs)
        return _unbatched(ctx, _slice_to(ctx, y, sizes, attrs, outs) if outs else _cut(ctx, y, cuts), added)
    y, idx = ctx.op.MaxPool(xb, _outputs=2, **attrs)
    y, idx = _cut(ctx, y, cuts), _cut(ctx, idx, cuts)
    if outs:
        y, idx = _slice_to(ctx, y, sizes, attrs, outs), _slice_to(ctx, idx, sizes, attrs, outs)
    if padded is not None:
        idx = _unpad_indices(ctx, idx, *padded)
    else:
        idx = ctx.op.Mod(idx, ctx.op.ReduceProd(ctx.op.Shape(xb, start=2), keepdims=0))
    return _unbatched(ctx, y, added), _unbatched(ctx, idx, added)


def _pad_beyond_kernel(ctx, xb, sizes, attrs, dtype):
    """onnxruntime wants pads below the kernel size; end pads beyond it (dilated windows) become an
    explicit Pad with the lowest value. Returns (input, sizes, (original sizes, padded sizes) or None)."""
    n = len(sizes)
    kernel, pads = attrs["kernel_shape"], attrs["pads"]
    extra = [max(0, pads[n + i] - (kernel[i] - 1)) for i in range(n)]
    if not any(extra):
        return xb, sizes, None
    np_dtype = dtype.numpy()
    low = -np.inf if np.issubdtype(np_dtype, np.floating) else np.iinfo(np_dtype).min
    xb = ctx.op.Pad(xb, ctx.const([0] * (n + 2) + [0, 0] + extra), ctx.const(np.array(low, dtype=np_dtype)))
    attrs["pads"] = pads[:n] + [pads[n + i] - extra[i] for i in range(n)]
    new_sizes = [v + e for v, e in zip(sizes, extra)]
    return xb, new_sizes, (sizes, new_sizes)


def _unpad_indices(ctx, idx, sizes, padded_sizes):
    """Indices flattened over the whole end-padded tensor -> flattened within each unpadded plane."""
    plane = int(np.prod(padded_sizes))
    rest = ctx.op.Mod(idx, ctx.const(np.array(plane, dtype=np.int64)))
    out = None
    for i in range(len(sizes)):
        inner = int(np.prod(padded_sizes[i + 1:]))
        coord = ctx.op.Div(rest, ctx.const(np.array(inner, dtype=np.int64)))
        rest = ctx.op.Mod(rest, ctx.const(np.array(inner, dtype=np.int64)))
        term = ctx.op.Mul(coord, ctx.const(np.array(int(np.prod(sizes[i + 1:])), dtype=np.int64)))
        out = term if out is None else ctx.op.Add(out, term)
    return out


@translates(aten.max_pool1d.default, aten.max_pool2d.default, aten.max_pool3d.default)
def max_pool_nd(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """aten::max_pool{1,2,3}d(input, kernel_size, stride=[] (= kernel), padding, dilation, ceil_mode)."""
    return max_pool(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, with_indices=False)


@translates(aten.max_pool1d_with_indices.default, aten.max_pool2d_with_indices.default,
            aten.max_pool3d_with_indices.default)
def max_pool_with_indices(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """aten::max_pool{1,2,3}d_with_indices -> (values, int64 indices within each plane)."""
    return max_pool(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, with_indices=True)


# ------------------------------------------------------------------------------------ avg pool
def avg_pool(ctx, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override=None):
    """ONNX AveragePool of ``x[N, C, *S]`` (or unbatched).

    ``divisor_override``: the window sum (zero padding included) divided by that number
    (TranslationError together with ``ceil_mode`` on dynamic sizes).
    """
    n = _spatial(kernel_size)
    xb, added = _batched(ctx, x, n)
    attrs = _window(kernel_size, stride, padding, 1, n)
    attrs.pop("dilations")
    ceil = int(bool(ceil_mode))
    sizes = _static_sizes(xb, n)
    if divisor_override is None and ceil and sizes is not None:
        if count_include_pad:
            # pad explicitly: the zeros count, the extension to the last window does not
            pads = attrs["pads"]
            if any(pads):
                xb = ctx.op.Pad(xb, ctx.const([0, 0] + pads[:n] + [0, 0] + pads[n:]), ctx.scalar(0, x.dtype))
            sizes_p = [v + pads[i] + pads[n + i] for i, v in enumerate(sizes)]
            floor_attrs, outs = ceil_mode_as_floor(sizes, attrs, explicit_pads=True)
            y = ctx.op.AveragePool(xb, count_include_pad=0, **floor_attrs)
            return _unbatched(ctx, _slice_to(ctx, y, sizes_p, floor_attrs, outs), added)
        floor_attrs, outs = ceil_mode_as_floor(sizes, attrs)
        y = ctx.op.AveragePool(xb, count_include_pad=int(bool(count_include_pad)), **floor_attrs)
        return _unbatched(ctx, _slice_to(ctx, y, sizes, floor_attrs, outs), added)
    if divisor_override is None:
        cuts = []
        if ceil and not count_include_pad:
            attrs, cuts = ceil_mode_partly_static(xb, attrs)
        y = ctx.op.AveragePool(xb, ceil_mode=ceil, count_include_pad=int(bool(count_include_pad)), **attrs)
        return _unbatched(ctx, _cut(ctx, y, cuts), added)
    if ceil and sizes is not None:
        # sum = mean over the window's input positions * their count (static, per output position)
        floor_attrs, outs = ceil_mode_as_floor(sizes, attrs)
        mean = _slice_to(ctx, ctx.op.AveragePool(xb, count_include_pad=0, **floor_attrs), sizes, floor_attrs, outs)
        count = _window_counts(sizes, attrs, outs)
        total = ctx.op.Mul(mean, ctx.const(count.astype(xb.dtype.numpy())))
        return _unbatched(ctx, ctx.op.Div(total, ctx.scalar(float(divisor_override), xb.dtype)), added)
    if ceil:
        raise TranslationError("avg_pool with divisor_override and ceil_mode=True on dynamic sizes is not supported",
                               hint="use ceil_mode=False, or fixed spatial sizes")
    # every window lies inside the padded input: the sum is the padded mean times the kernel size
    mean = ctx.op.AveragePool(xb, ceil_mode=0, count_include_pad=1, **attrs)
    total = ctx.op.Mul(mean, ctx.scalar(float(np.prod(attrs["kernel_shape"])), xb.dtype))
    y = ctx.op.Div(total, ctx.scalar(float(divisor_override), xb.dtype))
    return _unbatched(ctx, y, added)


def _window_counts(sizes: list[int], attrs: dict, outs: list[int]) -> np.ndarray:
    """Input positions inside each pooling window (PyTorch's clipping), shaped ``outs``."""
    n = len(sizes)
    kernel, strides, pads = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    count = np.ones([1] * n)
    for i, (length, out) in enumerate(zip(sizes, outs)):
        start = np.arange(out) * strides[i] - pads[i]
        end = np.minimum(start + kernel[i], length)
        c = end - np.maximum(start, 0)
        count = count * c.reshape([1] * i + [out] + [1] * (n - 1 - i))
    return count


@translates(aten.avg_pool1d.default)
def avg_pool1d(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    """aten::avg_pool1d(input, kernel_size, stride=[], padding, ceil_mode, count_include_pad)."""
    return avg_pool(ctx, x, kernel_size, stride, padding, ceil_mode, count_include_pad)


@translates(aten.avg_pool2d.default, aten.avg_pool3d.default)
def avg_pool_nd(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    """aten::avg_pool{2,3}d(..., ceil_mode, count_include_pad, divisor_override?)."""
    return avg_pool(ctx, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


# ------------------------------------------------------------------------------------ adaptive
def _adaptive_axis(ctx, x: ir.Value, axis: int, length, out: int) -> ir.Value:
    """Adaptive average over one axis of size ``length`` (int or 0-d int64 value): window i spans
    [floor(i * length / out), ceil((i + 1) * length / out))."""
    axis_v = ctx.const([axis])
    parts = []
    for i in range(out):
        if isinstance(length, int):
            start, end = ctx.const([i * length // out]), ctx.const([-((-(i + 1) * length) // out)])
        else:
            n = ctx.shape_list([length])
            start = ctx.op.Div(ctx.op.Mul(n, ctx.const([i])), ctx.const([out]))
            end = ctx.op.Div(ctx.op.Add(ctx.op.Mul(n, ctx.const([i + 1])), ctx.const([out - 1])), ctx.const([out]))
        window = ctx.op.Slice(x, start, end, axis_v)
        parts.append(ctx.op.ReduceMean(window, axis_v, keepdims=1))
    return parts[0] if out == 1 else ctx.op.Concat(*parts, axis=axis)


def _same_size(ctx, o, size, i: int, n: int) -> bool:
    """True when output size ``o`` (an int or a SymInt value) is the input's spatial size ``i``
    (``output_size=(k, None)`` reaches ATen as the input's own SymInt)."""
    if not isinstance(o, ir.Value):
        return isinstance(size, int) and o == size
    val = ctx.meta_val
    namer = ctx.dim_namer
    if namer is None or not isinstance(val, torch.Tensor):
        return False
    from onnxport.translate.symbolic import expr_of

    out = namer(expr_of(val.shape[val.dim() - n + i]))
    return str(out) == str(size)


def adaptive_avg_pool(ctx, x, output_size) -> ir.Value:
    """Adaptive average pooling of ``x[N, C, *S]`` (or unbatched) to ``output_size``.

    Output size 1 on every axis: the mean over the spatial axes (ReduceMean, in levels over long
    ones: ``_accurate``), which onnxruntime computes closer to float64 than GlobalAveragePool at the
    same speed (benchmarks/NUMERICS.md). A static input size divisible by the output
    size: AveragePool with kernel = stride = size / out. Otherwise PyTorch's window formula, one
    Slice + ReduceMean per output position (an average over a box is an average of averages
    along each axis).
    """
    n = len(output_size)
    xb, added = _batched(ctx, x, n)
    sizes = list(xb.shape)[2:]
    # None: the axis keeps its size
    outs = [None if o is None or _same_size(ctx, o, sizes[i], i, n) else o for i, o in enumerate(output_size)]
    if not all(o is None or isinstance(o, int) for o in outs):
        raise TranslationError(f"adaptive pooling output_size {list(output_size)} is not static",
                               hint="give adaptive pooling a fixed output size")
    if all(o == 1 or (o is None and s == 1) for o, s in zip(outs, sizes)):
        return _unbatched(ctx, _accurate.mean_over(ctx, xb, list(range(2, 2 + n)), True), added)
    if all(o is None or (isinstance(s, int) and s % o == 0) for s, o in zip(sizes, outs)):
        kernel = [1 if o is None else s // o for s, o in zip(sizes, outs)]
        y = ctx.op.AveragePool(xb, kernel_shape=kernel, strides=kernel, pads=[0] * (2 * n))
        return _unbatched(ctx, y, added)
    y = xb
    for i, o in enumerate(outs):
        if o is None or (isinstance(sizes[i], int) and sizes[i] == o):
            continue
        length = sizes[i] if isinstance(sizes[i], int) else ctx.dim(xb, 2 + i)
        y = _adaptive_axis(ctx, y, 2 + i, length, o)
    return _unbatched(ctx, y, added)


@translates(aten.adaptive_avg_pool1d.default, aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default,
            aten.adaptive_avg_pool3d.default, aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool_nd(ctx, x, output_size):
    """aten::adaptive_avg_pool{1,2,3}d / _adaptive_avg_pool{2,3}d(input, output_size)."""
    if isinstance(output_size, int):
        output_size = [output_size]
    return adaptive_avg_pool(ctx, x, list(output_size))


def _adaptive_max_cell(ctx, xb: ir.Value, sizes: list[int], starts: list[int], ends: list[int]):
    """(max, plane index) over the window ``[starts, ends)`` of every ``[N, C]`` plane of ``xb``,
    each ``[N, C, 1, ..., 1]``; the first maximum in row-major order wins, as in PyTorch."""
    n = len(sizes)
    axes = list(range(2, 2 + n))
    window = ctx.op.Slice(xb, ctx.const(starts), ctx.const(ends), ctx.const(axes))
    lengths = [e - b for b, e in zip(starts, ends)]
    flat = ctx.op.Reshape(window, ctx.const([0, 0, -1]))
    local = ctx.op.ArgMax(flat, axis=2, keepdims=1, select_last_index=0)  # [N, C, 1]
    value = ctx.op.ReduceMax(flat, ctx.const([2]), keepdims=1)
    index, rest = None, local
    for axis in reversed(range(n)):  # unravel in the window, ravel in the plane
        coord = ctx.op.Add(ctx.op.Mod(rest, ctx.scalar(lengths[axis], I64)), ctx.scalar(starts[axis], I64))
        rest = ctx.op.Div(rest, ctx.scalar(lengths[axis], I64))
        stride = int(np.prod(sizes[axis + 1:], dtype=np.int64))
        term = ctx.op.Mul(coord, ctx.scalar(stride, I64))
        index = term if index is None else ctx.op.Add(index, term)
    shape = ctx.const([0, 0] + [1] * n)
    return ctx.op.Reshape(value, shape), ctx.op.Reshape(index, shape)


def adaptive_max_pool(ctx, x, output_size) -> tuple[ir.Value, ir.Value]:
    """Adaptive max pooling of ``x[N, C, *S]`` (or unbatched) to ``output_size``: (values, int64
    indices within each plane). Window i along an axis spans [floor(i * S / out), ceil((i + 1) *
    S / out)). Sizes divisible by the output: MaxPool with kernel = stride = S / out; otherwise one
    Slice + ArgMax per output cell, on static sizes."""
    n = len(output_size)
    xb, added = _batched(ctx, x, n, float_only=False)
    sizes = _static_sizes(xb, n)
    outs = [s if o is None else o for o, s in zip(output_size, list(xb.shape)[2:])]
    if sizes is None or not all(isinstance(o, int) for o in outs):
        raise TranslationError(f"adaptive max pooling of spatial sizes {list(xb.shape)[2:]} to {list(output_size)}",
                               hint="adaptive max pooling needs static spatial and output sizes")
    if all(s % o == 0 for s, o in zip(sizes, outs)):
        kernel = [s // o for s, o in zip(sizes, outs)]
        values, indices = max_pool(ctx, xb, kernel, kernel, 0, 1, False, with_indices=True)
        return _unbatched(ctx, values, added), _unbatched(ctx, indices, added)
    cells = {}
    for cell in itertools.product(*[range(o) for o in outs]):
        starts = [i * s // o for i, s, o in zip(cell, sizes, outs)]
        ends = [-((-(i + 1) * s) // o) for i, s, o in zip(cell, sizes, outs)]
        cells[cell] = _adaptive_max_cell(ctx, xb, sizes, starts, ends)

    def assemble(k: int, axis: int, prefix: tuple) -> ir.Value:
        if axis == n:
            return cells[prefix][k]
        parts = [assemble(k, axis + 1, prefix + (i,)) for i in range(outs[axis])]
        return parts[0] if len(parts) == 1 else ctx.op.Concat(*parts, axis=2 + axis)

    return _unbatched(ctx, assemble(0, 0, ()), added), _unbatched(ctx, assemble(1, 0, ()), added)


@translates(aten.adaptive_max_pool1d.default, aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def adaptive_max_pool_nd(ctx, x, output_size):
    """aten::adaptive_max_pool{1,2,3}d(input, output_size) -> (values, indices)."""
    if isinstance(output_size, int):
        output_size = [output_size]
    return adaptive_max_pool(ctx, x, list(output_size))


# --------------------------------------------------------------------------- capture
def _max_pool1d_by_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return torch.ops.aten.max_pool1d_with_indices.default(x, kernel_size, stride, padding, dilation, ceil_mode)[0]


MAX_POOL1D_STAYS_SYMBOLIC = register(Patch(
    "max_pool1d stays symbolic", lambda: [SetKernel(torch.ops.aten.max_pool1d.default, _max_pool1d_by_indices)],
    "aten.max_pool1d traced as max_pool1d_with_indices(...)[0]: the kernel torch traces for max_pool1d reads the "
    "length as a Python int, which pins a dynamic time axis to the example's size; the with_indices form keeps it "
    "symbolic. Eager execution is unchanged (the kernel is consulted only by torch's Python dispatcher while "
    "tracing)", when=translating, order=TRANSLATIONS))
