"""Activation functions and softmax.

Semantics: the torch.nn.functional activations (relu, gelu, silu, softplus, leaky_relu, elu, selu,
celu, hardswish, hardsigmoid, relu6, hardtanh, mish, glu, prelu, threshold, softmax, log_softmax)
as documented by PyTorch, on the ONNX operators of the same name where their definition matches
(Relu, Gelu from opset 20, LeakyRelu, Elu, Selu, Celu, HardSwish, HardSigmoid, Clip, Mish, PRelu,
Softmax, LogSoftmax) and on their formulas elsewhere.
"""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate import dtypes
from onnxport.translate.ops._common import norm_axis
from onnxport.translate.registry import translates

aten = torch.ops.aten

# element types onnxruntime's CPU kernels of the activation operators take; others (double,
# bfloat16) use the formulas built from Exp/Log/Where/Max/Min, which they do take.
_NATIVE = (ir.DataType.FLOAT, ir.DataType.FLOAT16)


def _native(x: ir.Value) -> bool:
    return x.dtype in _NATIVE


def erf_value(ctx, x: ir.Value, dtype: ir.DataType) -> ir.Value:
    """Erf(x) for x of ``dtype``; computed in float32 for the types onnxruntime's Erf lacks."""
    if dtype in _NATIVE:
        return ctx.op.Erf(x)
    return ctx.cast(ctx.op.Erf(ctx.cast(x, ir.DataType.FLOAT)), dtype)


@translates(aten.relu.default)
def relu(ctx, x):
    """relu(Tensor self): ONNX Relu on floats, ``Max(x, 0)`` on integers."""
    if dtypes.is_float(x.dtype):
        return ctx.op.Relu(x)
    return ctx.op.Max(x, ctx.scalar(0, x.dtype))


@translates(aten.gelu.default, opset=(None, 19))
def gelu(ctx, x, approximate="none"):
    """gelu(Tensor self, str approximate="none") as its formula (before opset 20).

    ``none``: ``x * 0.5 * (1 + erf(x / sqrt(2)))``; ``tanh``:
    ``x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`` (torch.nn.functional.gelu).
    """
    if approximate not in ("none", "tanh"):
        raise TranslationError(f"gelu approximate={approximate!r} is not a PyTorch mode",
                               hint='use approximate="none" or "tanh"')
    dt = x.dtype
    half = ctx.op.Mul(x, ctx.scalar(0.5, dt))
    if approximate == "none":
        inner = erf_value(ctx, ctx.op.Mul(x, ctx.scalar(1 / math.sqrt(2.0), dt)), dt)
    else:
        cube = ctx.op.Mul(ctx.op.Mul(x, x), x)
        poly = ctx.op.Add(x, ctx.op.Mul(cube, ctx.scalar(0.044715, dt)))
        inner = ctx.op.Tanh(ctx.op.Mul(poly, ctx.scalar(math.sqrt(2 / math.pi), dt)))
    return ctx.op.Mul(half, ctx.op.Add(inner, ctx.scalar(1.0, dt)))


@translates(aten.gelu.default, opset=(20, None))
def gelu_20(ctx, x, approximate="none"):
    """gelu(Tensor self, str approximate="none"): ONNX Gelu (opset 20), its formula for the dtypes
    Gelu does not take."""
    if approximate in ("none", "tanh") and _native(x):
        return ctx.op.Gelu(x, approximate=approximate)
    return gelu(ctx, x, approximate)


@translates(aten.silu.default)
def silu(ctx, x):
    """silu(Tensor self) = x * sigmoid(x)."""
    return ctx.op.Mul(x, ctx.op.Sigmoid(x))


@translates(aten.softplus.default)
def softplus(ctx, x, beta=1, threshold=20):
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) = log(1 + exp(beta x)) / beta,
    and x itself where ``beta * x > threshold`` (torch.nn.functional.softplus)."""
    dt = x.dtype
    bx = ctx.op.Mul(x, ctx.scalar(beta, dt)) if beta != 1 else x
    soft = _softplus(ctx, bx, dt)
    if beta != 1:
        soft = ctx.op.Div(soft, ctx.scalar(beta, dt))
    return ctx.op.Where(ctx.op.Greater(bx, ctx.scalar(threshold, dt)), x, soft)


def _softplus(ctx, x, dt):
    """log(1 + exp(x)): ONNX Softplus, or its formula for non-native types."""
    if dt in _NATIVE:
        return ctx.op.Softplus(x)
    return ctx.op.Log(ctx.op.Add(ctx.op.Exp(x), ctx.scalar(1, dt)))


@translates(aten.leaky_relu.default)
def leaky_relu(ctx, x, negative_slope=0.01):
    """leaky_relu(Tensor self, Scalar negative_slope=0.01): ONNX LeakyRelu (x if x > 0 else slope * x)."""
    if _native(x):
        return ctx.op.LeakyRelu(x, alpha=float(negative_slope))
    dt = x.dtype
    return ctx.op.Where(ctx.op.Greater(x, ctx.scalar(0, dt)), x, ctx.op.Mul(x, ctx.scalar(negative_slope, dt)))


def _rrelu_eval(ctx, x, lower, upper, training):
    if training:
        raise TranslationError("rrelu with training=True draws random slopes, which ONNX cannot reproduce",
                               hint="put the model in eval mode (model.eval()) before exporting")
    return leaky_relu(ctx, x, (lower + upper) / 2)


@translates(aten.rrelu.default)
def rrelu(ctx, x, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    """rrelu(Tensor self, Scalar lower, Scalar upper, bool training=False): in eval, leaky_relu with
    slope (lower + upper) / 2. Raises TranslationError when training is True."""
    return _rrelu_eval(ctx, x, lower, upper, training)


@translates(aten.rrelu_with_noise_functional.default)
def rrelu_with_noise_functional(ctx, x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    """rrelu_with_noise_functional(Tensor self, Tensor noise, ...) -> (out, noise_out): the eval form
    of rrelu; noise is returned unchanged (only training writes it)."""
    return _rrelu_eval(ctx, x, lower, upper, training), ctx.op.Identity(noise)


@translates(aten.elu.default)
def elu(ctx, x, alpha=1, scale=1, input_scale=1):
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1):
    ``scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1))``; ONNX Elu when both scales are 1."""
    if scale == 1 and input_scale == 1 and _native(x):
        return ctx.op.Elu(x, alpha=float(alpha))
    dt = x.dtype
    neg = ctx.op.Mul(ctx.op.Sub(ctx.op.Exp(ctx.op.Mul(x, ctx.scalar(input_scale, dt))), ctx.scalar(1, dt)),
                     ctx.scalar(alpha, dt))
    out = ctx.op.Where(ctx.op.Greater(x, ctx.scalar(0, dt)), x, neg)
    return ctx.op.Mul(out, ctx.scalar(scale, dt)) if scale != 1 else out


@translates(aten.selu.default)
def selu(ctx, x):
    """selu(Tensor self): ONNX Selu with PyTorch's alpha and scale constants."""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    if _native(x):
        return ctx.op.Selu(x, alpha=alpha, gamma=scale)
    return elu(ctx, x, alpha=alpha, scale=scale)


@translates(aten.celu.default)
def celu(ctx, x, alpha=1.0):
    """celu(Tensor self, Scalar alpha=1.0): ONNX Celu (float32), else its formula."""
    if x.dtype == ir.DataType.FLOAT:
        return ctx.op.Celu(x, alpha=float(alpha))
    return elu(ctx, x, alpha=alpha, input_scale=1.0 / alpha)


@translates(aten.hardswish.default)
def hardswish(ctx, x):
    """hardswish(Tensor self) = x * relu6(x + 3) / 6: ONNX HardSwish."""
    if _native(x):
        return ctx.op.HardSwish(x)
    return ctx.op.Mul(x, hardsigmoid(ctx, x))


@translates(aten.hardsigmoid.default)
def hardsigmoid(ctx, x):
    """hardsigmoid(Tensor self) = relu6(x + 3) / 6: ONNX HardSigmoid(alpha=1/6, beta=0.5)."""
    if _native(x):
        return ctx.op.HardSigmoid(x, alpha=1.0 / 6.0, beta=0.5)
    dt = x.dtype
    lin = ctx.op.Div(ctx.op.Add(x, ctx.scalar(3, dt)), ctx.scalar(6, dt))
    return ctx.op.Min(ctx.op.Max(lin, ctx.scalar(0, dt)), ctx.scalar(1, dt))


@translates(aten.hardtanh.default)
def hardtanh(ctx, x, min_val=-1, max_val=1):
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1): ONNX Clip with scalar bounds."""
    return ctx.op.Clip(x, ctx.scalar(min_val, x.dtype), ctx.scalar(max_val, x.dtype))


@translates(aten.relu6.default)
def relu6(ctx, x):
    """relu6(Tensor self) = hardtanh(x, 0, 6)."""
    return hardtanh(ctx, x, 0, 6)


@translates(aten.mish.default)
def mish(ctx, x):
    """mish(Tensor self) = x * tanh(softplus(x)): ONNX Mish."""
    if _native(x):
        return ctx.op.Mish(x)
    return ctx.op.Mul(x, ctx.op.Tanh(_softplus(ctx, x, x.dtype)))


@translates(aten.glu.default)
def glu(ctx, x, dim=-1):
    """glu(Tensor self, int dim=-1) = a * sigmoid(b) with a, b the halves of x along ``dim``
    (the size along ``dim`` must be even, as PyTorch requires)."""
    a, b = ctx.op.Split(x, axis=norm_axis(dim, ctx.rank(x)), num_outputs=2, _outputs=2)
    return ctx.op.Mul(a, ctx.op.Sigmoid(b))


@translates(aten.prelu.default)
def prelu(ctx, x, weight):
    """prelu(Tensor self, Tensor weight): weight has 1 element or one per channel (axis 1);
    it is reshaped to ``[C, 1, ...]`` to broadcast against x, then ONNX PRelu."""
    rank = ctx.rank(x)
    if rank >= 2 and ctx.rank(weight) == 1:
        weight = ctx.op.Reshape(weight, ctx.const([-1] + [1] * (rank - 2)))
    return _prelu(ctx, x, weight)


def _prelu(ctx, x, weight):
    if _native(x):
        return ctx.op.PRelu(x, weight)
    return ctx.op.Where(ctx.op.GreaterOrEqual(x, ctx.scalar(0, x.dtype)), x, ctx.op.Mul(x, weight))


@translates(aten._prelu_kernel.default)
def prelu_kernel(ctx, x, weight):
    """_prelu_kernel(Tensor self, Tensor weight): weight already broadcastable to x."""
    return _prelu(ctx, x, weight)


@translates(aten.threshold.default)
def threshold(ctx, x, threshold, value):
    """threshold(Tensor self, Scalar threshold, Scalar value): x where x > threshold, else value."""
    return ctx.op.Where(ctx.op.Greater(x, ctx.scalar(threshold, x.dtype)), x, ctx.scalar(value, x.dtype))


def _softmax_like(ctx, op_type: str, x, dim: int):
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    if ctx.rank(x) == 0:  # softmax of a scalar is 1 (log_softmax: 0), NaN kept
        zero = ctx.op.Sub(x, x)
        return ctx.op.Add(zero, ctx.scalar(1, to)) if op_type == "Softmax" else zero
    return getattr(ctx.op, op_type)(x, axis=norm_axis(dim, ctx.rank(x)))


@translates(aten.softmax.int, aten._softmax.default)
def softmax(ctx, x, dim, dtype_or_half_to_float=None):
    """softmax.int(Tensor self, int dim, ScalarType? dtype=None) and
    _softmax(Tensor self, int dim, bool half_to_float): ONNX Softmax along ``dim`` (computed in the
    result dtype, as PyTorch casts before the reduction). onnxruntime's Softmax and LogSoftmax are as
    close to float64 as eager PyTorch over 768 and 65,536 elements (computed in float64 they are
    closer still, for 11-13x the time: benchmarks/NUMERICS.md)."""
    return _softmax_like(ctx, "Softmax", x, dim)


@translates(aten.log_softmax.int, aten._log_softmax.default)
def log_softmax(ctx, x, dim, dtype_or_half_to_float=None):
    """log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) and
    _log_softmax(Tensor self, int dim, bool half_to_float): ONNX LogSoftmax along ``dim``."""
    return _softmax_like(ctx, "LogSoftmax", x, dim)


@translates(aten._safe_softmax.default)
def safe_softmax(ctx, x, dim, dtype=None):
    """_safe_softmax(Tensor self, int dim, ScalarType? dtype=None): softmax, but 0 on slices that are
    entirely -inf (where softmax gives NaN), as torch's attention uses it."""
    out = _softmax_like(ctx, "Softmax", x, dim)
    if ctx.rank(x) == 0:
        return out
    to = ctx.out_dtype
    x = ctx.cast(x, to)
    masked = ctx.op.Equal(x, ctx.scalar(float("-inf"), to))
    axes = ctx.const([norm_axis(dim, ctx.rank(x))])
    all_masked = ctx.op.ReduceMin(ctx.op.Cast(masked, to=ir.DataType.INT32), axes, keepdims=1)
    return ctx.op.Where(ctx.op.Cast(all_masked, to=ir.DataType.BOOL), ctx.scalar(0, to), out)
