"""Pooling: max_pool 1d/2d/3d (with indices), avg_pool 1d/2d/3d, adaptive_avg_pool 1d/2d/3d.

Semantics: torch.nn.functional.max_pool{1,2,3}d / avg_pool{1,2,3}d / adaptive_avg_pool{1,2,3}d on
ONNX MaxPool, AveragePool and GlobalAveragePool (opset 19+ forms: ``dilations`` on both, the
ceil-mode rule that drops a last window starting in the right padding, as PyTorch does).
PyTorch's max-pool indices count positions within each ``[N, C]`` plane; ONNX counts them over the
whole tensor, so they are taken modulo the plane size.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._common import axes_const
from onnxport.translate.ops.conv import expand_param
from onnxport.translate.registry import translates

aten = torch.ops.aten


def _spatial(kernel_size) -> int:
    return 1 if isinstance(kernel_size, int) else len(kernel_size)


def _batched(ctx, x: ir.Value, n: int) -> tuple[ir.Value, bool]:
    """``x`` with a batch axis: unbatched ``[C, *spatial]`` inputs get a leading 1."""
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


# ------------------------------------------------------------------------------------ max pool
def max_pool(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, with_indices: bool):
    """ONNX MaxPool of ``x[N, C, *S]`` (or unbatched ``[C, *S]``): out, or (out, indices) with
    indices flattened per ``[N, C]`` plane as PyTorch returns them."""
    n = _spatial(kernel_size)
    xb, added = _batched(ctx, x, n)
    attrs = _window(kernel_size, stride, padding, dilation, n)
    if not with_indices:
        return _unbatched(ctx, ctx.op.MaxPool(xb, ceil_mode=int(bool(ceil_mode)), **attrs), added)
    y, idx = ctx.op.MaxPool(xb, ceil_mode=int(bool(ceil_mode)), _outputs=2, **attrs)
    plane = ctx.op.ReduceProd(ctx.op.Shape(xb, start=2), keepdims=0)
    idx = ctx.op.Mod(idx, plane)
    return _unbatched(ctx, y, added), _unbatched(ctx, idx, added)


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
    (TranslationError together with ``ceil_mode``).
    """
    n = _spatial(kernel_size)
    xb, added = _batched(ctx, x, n)
    attrs = _window(kernel_size, stride, padding, 1, n)
    attrs.pop("dilations")
    ceil = int(bool(ceil_mode))
    if divisor_override is None:
        y = ctx.op.AveragePool(xb, ceil_mode=ceil, count_include_pad=int(bool(count_include_pad)), **attrs)
        return _unbatched(ctx, y, added)
    if ceil:
        raise TranslationError("avg_pool with both divisor_override and ceil_mode=True is not supported",
                               hint="use ceil_mode=False, or pad the input explicitly and drop ceil_mode")
    # every window lies inside the padded input: the sum is the padded mean times the kernel size
    mean = ctx.op.AveragePool(xb, ceil_mode=0, count_include_pad=1, **attrs)
    total = ctx.op.Mul(mean, ctx.scalar(float(np.prod(attrs["kernel_shape"])), xb.dtype))
    y = ctx.op.Div(total, ctx.scalar(float(divisor_override), xb.dtype))
    return _unbatched(ctx, y, added)


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
    namer = getattr(ctx, "dim_namer", None)
    if namer is None or not isinstance(val, torch.Tensor):
        return False
    from onnxport.translate.symbolic import expr_of

    out = namer(expr_of(val.shape[val.dim() - n + i]))
    return str(out) == str(size)


def adaptive_avg_pool(ctx, x, output_size) -> ir.Value:
    """Adaptive average pooling of ``x[N, C, *S]`` (or unbatched) to ``output_size``.

    Output size 1 on every axis: GlobalAveragePool. A static input size divisible by the output
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
        return _unbatched(ctx, ctx.op.GlobalAveragePool(xb), added)
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
