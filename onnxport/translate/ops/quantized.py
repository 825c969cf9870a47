"""PT2E quantization: the ``quantized_decomposed`` ops of a model quantized with ``prepare_pt2e`` /
``convert_pt2e`` (torchao's ``torchao.quantization.pt2e``, or ``torch.ao.quantization``) as ONNX
``QuantizeLinear`` / ``DequantizeLinear``: the model exports in QDQ form, which onnxruntime runs
with its integer kernels (it fuses ``DequantizeLinear -> Conv/MatMul -> QuantizeLinear``).

Semantics (``torch/ao/quantization/fx/_decomposed.py``):

- ``quantize_per_tensor(x, scale, zero_point, quant_min, quant_max, dtype)``:
  ``clamp(round(x / scale) + zero_point, quant_min, quant_max)`` in ``dtype`` (round half to even);
- ``dequantize_per_tensor(x, scale, zero_point, ...)``: ``(x - zero_point) * scale`` in float32
  (``out_dtype`` when given);
- ``quantize_per_channel`` / ``dequantize_per_channel``: the same with one ``scale`` and
  ``zero_point`` per index of ``axis`` (``zero_points`` None: 0).

ONNX ``QuantizeLinear`` (opset 13+: per-axis scales) saturates to the output dtype's range: a
narrower ``[quant_min, quant_max]`` (symmetric weights: -127..127) is applied with ``Clip``.
Supported dtypes: int8 and uint8 (ONNX QuantizeLinear's types at every opset onnxport targets).
The ``.tensor`` overloads take scale and zero point as 0-d tensors.

Semantics of the ONNX side: https://onnx.ai/onnx/operators/onnx__QuantizeLinear.html,
https://onnx.ai/onnx/operators/onnx__DequantizeLinear.html.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate import dtypes
from onnxport.translate.registry import translates

_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255)}
NAMESPACE = "quantized_decomposed"  # defined by torch.ao.quantization (and torchao) when imported: named, not imported


def _qdtype(dtype: torch.dtype) -> ir.DataType:
    if dtype not in _RANGES:
        raise TranslationError(f"quantized dtype {dtype} has no ONNX QuantizeLinear form at the opsets "
                               "onnxport targets",
                               hint="quantize to torch.int8 or torch.uint8 (the XNNPACK and x86 quantizers do)")
    return dtypes.onnx_dtype(dtype)


def _zero_point(ctx, zero_point, qtype: ir.DataType) -> ir.Value:
    """The zero point(s) as a value of the quantized dtype (a Python int, a tensor, or None: 0)."""
    if zero_point is None:
        return ctx.const(np.array(0, dtype=qtype.numpy()))
    if isinstance(zero_point, ir.Value):
        return ctx.cast(zero_point, qtype)
    return ctx.const(np.array(int(zero_point), dtype=qtype.numpy()))


def _scale(ctx, scale, x: ir.Value) -> ir.Value:
    """The scale(s) as a value of ``x``'s float dtype (float32 for a quantized ``x``)."""
    to = x.dtype if dtypes.is_float(x.dtype) else ir.DataType.FLOAT
    if isinstance(scale, ir.Value):
        return ctx.cast(scale, to)
    return ctx.const(np.array(float(scale), dtype=to.numpy()))


def _clip(ctx, q: ir.Value, qmin: int, qmax: int, dtype: torch.dtype, qtype: ir.DataType) -> ir.Value:
    lo, hi = _RANGES[dtype]
    if (int(qmin), int(qmax)) == (lo, hi):
        return q
    return ctx.op.Clip(q, ctx.const(np.array(int(qmin), dtype=qtype.numpy())),
                       ctx.const(np.array(int(qmax), dtype=qtype.numpy())))


def _quantize(ctx, x, scale, zero_point, quant_min, quant_max, dtype, axis=None):
    qtype = _qdtype(dtype)
    attrs = {} if axis is None else {"axis": int(axis)}
    q = ctx.op.QuantizeLinear(x, _scale(ctx, scale, x), _zero_point(ctx, zero_point, qtype), **attrs)
    return _clip(ctx, q, quant_min, quant_max, dtype, qtype)


def _dequantize(ctx, x, scale, zero_point, dtype, out_dtype, axis=None):
    qtype = _qdtype(dtype)
    attrs = {} if axis is None else {"axis": int(axis)}
    zp = [] if zero_point is None else [_zero_point(ctx, zero_point, qtype)]  # none: 0, of any scale shape
    y = ctx.op.DequantizeLinear(x, _scale(ctx, scale, x), *zp, **attrs)
    out = dtypes.onnx_dtype(out_dtype) if out_dtype is not None else ir.DataType.FLOAT
    return ctx.cast(y, out) if out != ir.DataType.FLOAT else y


@translates(f"{NAMESPACE}::quantize_per_tensor.default", f"{NAMESPACE}::quantize_per_tensor.tensor")
def quantize_per_tensor(ctx, x, scale, zero_point, quant_min, quant_max, dtype):
    """quantized_decomposed::quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min,
    int quant_max, ScalarType dtype) -> Tensor (and .tensor: scale, zero_point as Tensors)."""
    return _quantize(ctx, x, scale, zero_point, quant_min, quant_max, dtype)


@translates(f"{NAMESPACE}::dequantize_per_tensor.default", f"{NAMESPACE}::dequantize_per_tensor.tensor")
def dequantize_per_tensor(ctx, x, scale, zero_point, quant_min, quant_max, dtype, out_dtype=None):
    """quantized_decomposed::dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min,
    int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor (and .tensor)."""
    return _dequantize(ctx, x, scale, zero_point, dtype, out_dtype)


@translates(f"{NAMESPACE}::quantize_per_channel.default")
def quantize_per_channel(ctx, x, scales, zero_points, axis, quant_min, quant_max, dtype):
    """quantized_decomposed::quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis,
    int quant_min, int quant_max, ScalarType dtype) -> Tensor."""
    return _quantize(ctx, x, scales, zero_points, quant_min, quant_max, dtype, axis=axis)


@translates(f"{NAMESPACE}::dequantize_per_channel.default")
def dequantize_per_channel(ctx, x, scales, zero_points, axis, quant_min, quant_max, dtype, out_dtype=None):
    """quantized_decomposed::dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis,
    int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor."""
    return _dequantize(ctx, x, scales, zero_points, dtype, out_dtype, axis=axis)

