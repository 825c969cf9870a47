"""Padding: constant_pad_nd, reflection_pad / replication_pad 1d/2d/3d, circular padding and the
``aten.pad`` form of torch.nn.functional.pad.

Semantics: torch.nn.functional.pad (``pad`` lists (begin, end) pairs starting from the LAST axis;
negative amounts crop; replicate follows out[i] = x[clamp(i - begin, 0, n - 1)]) on ONNX Pad
(``pads`` over every axis, ``full_pads``; modes constant, reflect, edge). PyTorch's "reflect"
excludes the edge value, as ONNX's does; "replicate" is ONNX "edge"; "circular" is Slice + Concat
(onnxruntime's "wrap" fails on a tensor with an empty axis).
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.registry import translates

aten = torch.ops.aten

_ONNX_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _per_axis(ctx, x: ir.Value, pad: Sequence[Any]) -> list[tuple[int, Any, Any]]:
    """(axis, begin, end) for each axis ``pad`` touches, ascending axes."""
    if len(pad) % 2:
        raise TranslationError(f"pad has {len(pad)} entries; it needs (begin, end) pairs",
                               hint="pass an even number of pad amounts, last axis first")
    rank = ctx.rank(x)
    n = len(pad) // 2
    if n > rank:
        raise TranslationError(f"pad covers {n} axes but the input has rank {rank}")
    return [(rank - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in reversed(range(n))]


def pad_nd(ctx, x: ir.Value, pad: Sequence[Any], mode: str = "constant", value: float | None = None) -> ir.Value:
    """Pad ``x`` as ``torch.nn.functional.pad(x, pad, mode, value)`` does.

    Args:
        x: tensor of any dtype (constant mode) or float (other modes).
        pad: ints or 0-d int64 values (SymInts), (begin, end) pairs from the last axis backward.
        mode: "constant", "reflect", "replicate" or "circular".
        value: fill value of constant mode (default 0).

    Raises TranslationError for an unknown mode or negative amounts outside constant mode.
    """
    if mode not in _ONNX_MODE:
        raise TranslationError(f"padding mode {mode!r} is not supported",
                               hint="use one of 'constant', 'reflect', 'replicate', 'circular'")
    rank = ctx.rank(x)  # before any crop (a Slice whose output rank is not recorded)
    axes = _per_axis(ctx, x, pad)
    axes = [(a, b, e) for a, b, e in axes if not (isinstance(b, int) and isinstance(e, int) and b == 0 and e == 0)]
    if not axes:
        return ctx.op.Identity(x)
    if mode == "replicate" and any(isinstance(v, int) and v < 0 for _, b, e in axes for v in (b, e)):
        return _replicate_by_gather(ctx, x, axes)
    if mode != "constant" and any(isinstance(v, int) and v < 0 for _, b, e in axes for v in (b, e)):
        # negative amounts crop first, the positive ones then pad the cropped tensor
        crop = [(a, max(-b, 0), max(-e, 0)) for a, b, e in axes if isinstance(b, int) and isinstance(e, int)]
        x = ctx.op.Slice(x, ctx.const([c for _, c, _ in crop]), ctx.const([-c if c else 2**62 for _, _, c in crop]),
                         ctx.const([a for a, _, _ in crop]))
        axes = [(a, max(b, 0) if isinstance(b, int) else b, max(e, 0) if isinstance(e, int) else e) for a, b, e in axes]
    if mode == "circular":  # onnxruntime's "wrap" Pad fails on a tensor with an empty axis
        return _circular_by_slices(ctx, x, axes)
    pads = full_pads(ctx, rank, axes)
    if mode == "constant":
        fill = ctx.scalar(0 if value is None else value, x.dtype)
        return ctx.op.Pad(x, pads, fill, mode="constant")
    return ctx.op.Pad(x, pads, mode=_ONNX_MODE[mode])


def full_pads(ctx, rank: int, axes: Sequence[tuple[int, Any, Any]]) -> ir.Value:
    """ONNX Pad's ``pads`` over every axis of a rank-``rank`` tensor (begins, then ends; 0 where
    ``axes``, ``(axis, begin, end)`` with ints or 0-d int64 values, pads nothing). Pad's ``axes``
    input is not used: onnxruntime's transpose optimizer permutes ``pads`` as if it covered every
    axis (a Pad with ``axes`` behind a Transpose then reads past its ``pads``)."""
    begins, ends = [0] * rank, [0] * rank
    for axis, begin, end in axes:
        begins[axis % rank], ends[axis % rank] = begin, end
    return ctx.shape_list(begins + ends)


def _replicate_by_gather(ctx, x: ir.Value, axes) -> ir.Value:
    """Replicate padding with negative amounts, PyTorch's index rule: out[i] = x[clamp(i - begin,
    0, n - 1)] along each axis, n + begin + end positions (a crop that empties the axis still
    replicates its last element)."""
    i64 = ir.DataType.INT64
    dtype, rank = x.dtype, ctx.rank(x)
    for axis, begin, end in axes:
        n = ctx.dim(x, axis)
        b, e = (ctx.scalar(v, i64) if isinstance(v, int) else v for v in (begin, end))
        i = ctx.op.Range(ctx.scalar(0, i64), ctx.op.Add(ctx.op.Add(n, b), e), ctx.scalar(1, i64))
        src = ctx.op.Min(ctx.op.Max(ctx.op.Sub(i, b), ctx.scalar(0, i64)), ctx.op.Sub(n, ctx.scalar(1, i64)))
        x = ctx.op.Gather(x, src, axis=axis)
        x.type, x.shape = ir.TensorType(dtype), ir.Shape([None] * rank)
    return x


def _circular_by_slices(ctx, x: ir.Value, axes) -> ir.Value:
    """Circular padding as Slice + Concat per axis."""
    big = 1 << 62
    for axis, begin, end in axes:
        parts = []
        axis_v = ctx.const([axis])
        if not (isinstance(begin, int) and begin == 0):
            start = ctx.op.Neg(ctx.shape_list([begin]))
            parts.append(ctx.op.Slice(x, start, ctx.const([big]), axis_v))
        parts.append(x)
        if not (isinstance(end, int) and end == 0):
            parts.append(ctx.op.Slice(x, ctx.const([0]), ctx.shape_list([end]), axis_v))
        x = ctx.op.Concat(*parts, axis=axis)
    return x


@translates(aten.constant_pad_nd.default)
def constant_pad_nd(ctx, x, pad, value=0):
    """aten::constant_pad_nd(input, pad, value=0): negative amounts crop."""
    return pad_nd(ctx, x, pad, "constant", value)


@translates(aten.pad.default)
def pad_(ctx, x, pad, mode="constant", value=None):
    """aten::pad(input, pad, mode="constant", value=None), torch.nn.functional.pad."""
    return pad_nd(ctx, x, pad, mode, value)


@translates(aten.reflection_pad1d.default, aten.reflection_pad2d.default, aten.reflection_pad3d.default)
def reflection_pad(ctx, x, padding):
    """aten::reflection_pad{1,2,3}d(input, padding): mirror without repeating the edge."""
    return pad_nd(ctx, x, padding, "reflect")


@translates(aten.replication_pad1d.default, aten.replication_pad2d.default, aten.replication_pad3d.default)
def replication_pad(ctx, x, padding):
    """aten::replication_pad{1,2,3}d(input, padding): repeat the edge value."""
    return pad_nd(ctx, x, padding, "replicate")


@translates(aten._pad_circular.default)
def pad_circular(ctx, x, pad):
    """aten::_pad_circular(input, pad): wrap around (amounts at most the axis size)."""
    return pad_nd(ctx, x, pad, "circular")
