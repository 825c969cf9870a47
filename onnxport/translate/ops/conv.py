"""Convolutions: conv1d/2d/3d (explicit and "same"/"valid" padding), conv_transpose1d/2d/3d and
the core ``aten.convolution``.

Semantics: torch.nn.functional.conv{1,2,3}d / conv_transpose{1,2,3}d on ONNX Conv and
ConvTranspose. ``padding="same"`` pads ``dilation * (kernel - 1)`` in total per spatial axis, the
odd element at the end (PyTorch's rule), written as explicit ``pads`` (never ``auto_pad``).
Weights keep PyTorch's layout, which is ONNX's: ``[out, in / groups, *kernel]`` for Conv,
``[in, out / groups, *kernel]`` for ConvTranspose.
"""

from __future__ import annotations

from typing import Sequence

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError, UnsupportedOpError
from onnxport.translate import dtypes
from onnxport.translate.ops._common import axes_const
from onnxport.translate.registry import translates

aten = torch.ops.aten


def expand_param(value, n: int, name: str) -> list[int]:
    """An int or a list of 1 or ``n`` ints as a list of ``n`` Python ints (stride, padding...)."""
    if isinstance(value, int):
        return [value] * n
    values = list(value)
    if len(values) == 1:
        values = values * n
    if len(values) != n or not all(isinstance(v, int) for v in values):
        raise TranslationError(
            f"{name}={value!r} does not give one constant int per spatial axis ({n} axes)",
            hint=f"pass {name} as an int or a list of {n} ints known at export time")
    return values


def _kernel(weight: ir.Value) -> list[int]:
    dims = list(weight.shape)[2:]
    if not all(isinstance(d, int) for d in dims):
        raise TranslationError(f"convolution kernel shape {dims} is not static",
                               hint="convolution weights must have a fixed kernel size")
    return dims


def _same_pads(kernel: Sequence[int], dilation: Sequence[int]) -> list[int]:
    """ONNX ``pads`` (begins then ends) of PyTorch's ``padding="same"`` for stride 1."""
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    begins = [t // 2 for t in total]
    ends = [t - b for t, b in zip(total, begins)]
    return begins + ends


def _batched(ctx, x: ir.Value, spatial: int) -> tuple[ir.Value, bool]:
    """``x`` with a batch axis: unbatched ``[C, *spatial]`` inputs get a leading 1."""
    if ctx.rank(x) == spatial + 1:
        return ctx.op.Unsqueeze(x, axes_const(ctx, 0)), True
    return x, False


def _unbatched(ctx, y: ir.Value, added: bool) -> ir.Value:
    return ctx.op.Squeeze(y, axes_const(ctx, 0)) if added else y


def _float_only(x: ir.Value, onnx_op: str) -> None:
    if x.dtype is not None and not dtypes.is_float(x.dtype):
        raise UnsupportedOpError(f"convolution of {x.dtype.name.lower()} tensors: ONNX {onnx_op} takes "
                                 "floating-point tensors only",
                                 hint="convert the input and weight to a float dtype (x.float()) and back after")


def convolution_nd(ctx, x, weight, bias, stride, padding, dilation, groups: int) -> ir.Value:
    """ONNX Conv of ``x[N, C, *S]`` (or unbatched ``[C, *S]``) with ``weight[M, C/groups, *K]``.

    ``padding`` is a list of ints per axis (symmetric) or the strings "same" / "valid".
    Raises TranslationError for non-constant parameters or "same" with a stride other than 1, and
    UnsupportedOpError for integer tensors.
    """
    _float_only(x, "Conv")
    kernel = _kernel(weight)
    n = len(kernel)
    stride = expand_param(stride, n, "stride")
    dilation = expand_param(dilation, n, "dilation")
    if padding == "valid":
        pads = [0] * (2 * n)
    elif padding == "same":
        if any(s != 1 for s in stride):
            raise TranslationError(f"padding='same' with stride {stride}",
                                   hint="PyTorch only allows padding='same' with stride 1")
        pads = _same_pads(kernel, dilation)
    else:
        p = expand_param(padding, n, "padding")
        pads = p + p
    if bias is not None:
        bias = ctx.cast(bias, x.dtype)
    x, added = _batched(ctx, x, n)
    y = ctx.op.Conv(x, weight, bias, kernel_shape=kernel, strides=stride, pads=pads, dilations=dilation,
                    group=int(groups))
    traced = ctx.meta_val
    if isinstance(traced, torch.Tensor) and traced.dim() >= n:  # eager raises where one would be 0
        ctx.note_nonempty(list(traced.shape)[-n:])
    return _unbatched(ctx, y, added)


def conv_transpose_nd(ctx, x, weight, bias, stride, padding, output_padding, groups: int, dilation) -> ir.Value:
    """ONNX ConvTranspose of ``x[N, C, *S]`` (or unbatched) with ``weight[C, M/groups, *K]``.

    Output size per axis: ``(S - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1``
    (PyTorch's formula, which is ONNX's with explicit ``pads`` and ``output_padding``).
    """
    _float_only(x, "ConvTranspose")
    kernel = _kernel(weight)
    n = len(kernel)
    stride = expand_param(stride, n, "stride")
    dilation = expand_param(dilation, n, "dilation")
    p = expand_param(padding, n, "padding")
    output_padding = expand_param(output_padding, n, "output_padding")
    if bias is not None:
        bias = ctx.cast(bias, x.dtype)
    x, added = _batched(ctx, x, n)
    ends, output_padding, zeros = _output_padding_below_stride(p, output_padding, stride)
    y = ctx.op.ConvTranspose(x, weight, None if any(zeros) else bias, kernel_shape=kernel, strides=stride,
                             pads=p + ends, dilations=dilation, output_padding=output_padding, group=int(groups))
    if any(zeros):
        y = ctx.op.Pad(y, ctx.const([0] * (n + 2) + [0, 0] + zeros))
        if bias is not None:
            y = ctx.op.Add(y, ctx.op.Reshape(bias, ctx.const([-1] + [1] * n)))
    return _unbatched(ctx, y, added)


def _output_padding_below_stride(pads: list[int], output_padding: list[int], stride: list[int]):
    """(end pads, output_padding, zeros to append) per axis, with every output_padding below the
    stride, as onnxruntime requires (PyTorch allows up to max(stride, dilation) - 1). The extra
    positions are the transposed convolution's own last ones, uncovered by lowering the end pad,
    then zeros past its full length (the bias added after)."""
    ends, out_pad, zeros = list(pads), list(output_padding), [0] * len(pads)
    for i, (op, s) in enumerate(zip(output_padding, stride)):
        if op >= s:
            take = min(op, ends[i])
            ends[i] -= take
            rest = op - take
            out_pad[i], zeros[i] = (rest, 0) if rest < s else (0, rest)
    return ends, out_pad, zeros


@translates(aten.conv1d.default, aten.conv2d.default, aten.conv3d.default,
            aten.conv1d.padding, aten.conv2d.padding, aten.conv3d.padding)
def conv(ctx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """aten::conv{1,2,3}d(input, weight, bias?, stride, padding (ints or "same"/"valid"), dilation, groups)."""
    return convolution_nd(ctx, x, weight, bias, stride, padding, dilation, groups)


@translates(aten.conv_transpose1d.default, aten.conv_transpose2d.input, aten.conv_transpose3d.input)
def conv_transpose(ctx, x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """aten::conv_transpose{1,2,3}d(input, weight, bias?, stride, padding, output_padding, groups, dilation)."""
    return conv_transpose_nd(ctx, x, weight, bias, stride, padding, output_padding, groups, dilation)


@translates(aten.convolution.default)
def convolution(ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """aten::convolution, the core ATen form every convolution decomposes to."""
    if transposed:
        return conv_transpose_nd(ctx, x, weight, bias, stride, padding, output_padding, groups, dilation)
    return convolution_nd(ctx, x, weight, bias, stride, padding, dilation, groups)


@translates(aten._convolution.default)
def convolution_private(ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                        *_flags):
    """aten::_convolution: aten::convolution plus backend flags (benchmark, deterministic...), ignored."""
    return convolution(ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
