"""Normalization: batch_norm (running or batch statistics), layer_norm, group_norm, instance_norm,
rms_norm, weight_norm, and their native / core ATen forms.

Semantics: torch.nn.functional.batch_norm / layer_norm / group_norm / instance_norm / rms_norm.
ONNX operators used: BatchNormalization (inference mode) for running statistics,
LayerNormalization (opset 17), InstanceNormalization, RMSNormalization (opset 23),
GroupNormalization from opset 21 (before 21 its scale and bias were per group, not PyTorch's per
channel, so group norm is a ReduceMean formula there, as batch statistics are).
Variances are biased (divide by the count), as PyTorch's normalizations use.
"""

from __future__ import annotations

import operator
from typing import Sequence

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate import dtypes
from onnxport.translate.ops._common import axes_const
from onnxport.translate.registry import translates

aten = torch.ops.aten


# ------------------------------------------------------------------------------------ utilities
def _channels(ctx, x: ir.Value, *candidates) -> int:
    """Static channel count (axis 1 of ``x``, or the length of a per-channel tensor)."""
    for c in candidates:
        if c is not None and c.shape is not None and isinstance(c.shape[0], int):
            return c.shape[0]
    if ctx.rank(x) > 1 and isinstance(x.shape[1], int):
        return x.shape[1]
    raise TranslationError("the channel axis (1) of a normalization input is not static",
                           hint="give the normalization a fixed number of channels")


def _filled(ctx, shape: Sequence[int], fill: float, dtype: ir.DataType) -> ir.Value:
    return ctx.const(np.full(list(shape), fill, dtype=dtype.numpy()))


def _per_channel(ctx, v: ir.Value, rank: int) -> ir.Value:
    """A ``[C]`` tensor shaped ``[C, 1, ..., 1]`` to broadcast over axis 1 of a rank-``rank`` input."""
    if rank <= 2:
        return v
    return ctx.op.Unsqueeze(v, axes_const(ctx, list(range(1, rank - 1))))


def _used_outputs(ctx) -> set[int]:
    """Indices of the current multi-output FX node's results that some node reads."""
    node = ctx.current_node
    used = set()
    for user in node.users:
        if user.target is operator.getitem:
            used.add(user.args[1])
        else:
            used.update(range(8))
    return used


def _empty_like_meta(ctx, index: int) -> ir.Value:
    """An empty constant shaped as output ``index`` of the current node (saved statistics that
    PyTorch returns as ``[0]`` tensors in inference)."""
    val = ctx.meta_val[index]
    shape = [int(d) for d in val.shape]
    return ctx.const(np.zeros(shape, dtype=dtypes.onnx_dtype(val.dtype).numpy()))


def _moments(ctx, x: ir.Value, axes: list[int], eps: float, dtype: ir.DataType):
    """(x - mean, mean, 1 / sqrt(var + eps)) over ``axes`` (kept as size-1 axes), biased variance;
    ``dtype`` is x's element type."""
    ax = axes_const(ctx, axes)
    mean = ctx.op.ReduceMean(x, ax, keepdims=1)
    centered = ctx.op.Sub(x, mean)
    var = ctx.op.ReduceMean(ctx.op.Mul(centered, centered), ax, keepdims=1)
    rstd = ctx.op.Reciprocal(ctx.op.Sqrt(ctx.op.Add(var, ctx.scalar(eps, dtype))))
    return centered, mean, rstd


def _affine(ctx, y: ir.Value, weight, bias, rank: int, dtype: ir.DataType) -> ir.Value:
    if weight is not None:
        y = ctx.op.Mul(y, _per_channel(ctx, ctx.cast(weight, dtype), rank))
    if bias is not None:
        y = ctx.op.Add(y, _per_channel(ctx, ctx.cast(bias, dtype), rank))
    return y


# ------------------------------------------------------------------------------------ batch norm
def batch_norm_inference(ctx, x, weight, bias, running_mean, running_var, eps: float) -> ir.Value:
    """ONNX BatchNormalization of ``x[N, C, *]`` with running statistics ``[C]``;
    ``weight``/``bias`` None mean 1 / 0."""
    c = _channels(ctx, x, running_mean, weight)
    if weight is None:
        weight = _filled(ctx, [c], 1.0, x.dtype)
    if bias is None:
        bias = _filled(ctx, [c], 0.0, x.dtype)
    return ctx.op.BatchNormalization(x, weight, bias, running_mean, running_var, epsilon=float(eps))


def batch_norm_batch_stats(ctx, x, weight, bias, eps: float):
    """Batch norm with the statistics of the batch (over N and the spatial axes):
    (y, mean [C], 1/std [C])."""
    rank = ctx.rank(x)
    centered, mean, rstd = _moments(ctx, x, [0] + list(range(2, rank)), eps, x.dtype)
    y = _affine(ctx, ctx.op.Mul(centered, rstd), weight, bias, rank, x.dtype)
    flat = [0] + list(range(2, rank))
    return y, ctx.op.Squeeze(mean, axes_const(ctx, flat)), ctx.op.Squeeze(rstd, axes_const(ctx, flat))


@translates(aten.batch_norm.default)
def batch_norm(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True):
    """aten::batch_norm: running statistics when ``training`` is False, batch statistics otherwise
    (running statistics are not updated: exported models run inference)."""
    if not training and running_mean is not None:
        return batch_norm_inference(ctx, x, weight, bias, running_mean, running_var, eps)
    return batch_norm_batch_stats(ctx, x, weight, bias, eps)[0]


@translates(aten._native_batch_norm_legit_no_training.default)
def native_batch_norm_no_training(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    """aten::_native_batch_norm_legit_no_training -> (out, save_mean [0], save_rstd [0])."""
    y = batch_norm_inference(ctx, x, weight, bias, running_mean, running_var, eps)
    return y, _empty_like_meta(ctx, 1), _empty_like_meta(ctx, 2)


@translates(aten.native_batch_norm.default, aten._native_batch_norm_legit.default)
def native_batch_norm(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
    """aten::native_batch_norm / _native_batch_norm_legit -> (out, save_mean, save_rstd)."""
    if not training:
        return native_batch_norm_no_training(ctx, x, weight, bias, running_mean, running_var, momentum, eps)
    return batch_norm_batch_stats(ctx, x, weight, bias, eps)


@translates(aten._native_batch_norm_legit.no_stats)
def native_batch_norm_no_stats(ctx, x, weight, bias, training, momentum, eps):
    """aten::_native_batch_norm_legit.no_stats: batch statistics, no running buffers."""
    return batch_norm_batch_stats(ctx, x, weight, bias, eps)


@translates(aten._batch_norm_with_update_functional.default)
def batch_norm_with_update_functional(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    """_batch_norm_with_update_functional(input, weight?, bias?, running_mean, running_var, momentum,
    eps) -> (out, save_mean, save_rstd, reserve, running_mean_out, running_var_out): training-mode
    batch norm with the running statistics updated as nn.BatchNorm does:
    ``r = (1 - momentum) * r + momentum * s``, the variance unbiased (n / (n - 1), n elements per
    channel)."""
    y, mean, rstd, new_mean, new_var = _batch_norm_update(ctx, x, weight, bias, running_mean, running_var,
                                                          momentum, eps)
    return y, mean, rstd, _empty_like_meta(ctx, 3), new_mean, new_var


@translates(aten._native_batch_norm_legit_functional.default)
def native_batch_norm_functional(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
    """_native_batch_norm_legit_functional(input, weight?, bias?, running_mean, running_var, training,
    momentum, eps) -> (out, save_mean, save_rstd, running_mean_out, running_var_out): the core ATen
    form; in training the running statistics are updated as above, otherwise returned unchanged."""
    if not training:
        y, m, r = native_batch_norm_no_training(ctx, x, weight, bias, running_mean, running_var, momentum, eps)
        return y, m, r, running_mean, running_var
    return _batch_norm_update(ctx, x, weight, bias, running_mean, running_var, momentum, eps)


def _batch_norm_update(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    """(out, mean, 1/std, updated running mean, updated running variance) of training batch norm."""
    rank = ctx.rank(x)
    axes = [0] + list(range(2, rank))
    y, mean, rstd = batch_norm_batch_stats(ctx, x, weight, bias, eps)
    centered = ctx.op.Sub(x, _per_channel(ctx, mean, rank))
    var = ctx.op.ReduceMean(ctx.op.Mul(centered, centered), axes_const(ctx, axes), keepdims=0)
    n = ctx.cast(ctx.op.Div(ctx.op.Size(x), ctx.op.Shape(x, start=1, end=2)), x.dtype)
    unbiased = ctx.op.Div(ctx.op.Mul(var, n), ctx.op.Sub(n, ctx.scalar(1, x.dtype)))  # NaN for n = 1, as PyTorch
    stat = running_mean.dtype
    m = ctx.scalar(float(momentum), stat)
    keep = ctx.scalar(1.0 - float(momentum), stat)
    new_mean = ctx.op.Add(ctx.op.Mul(running_mean, keep), ctx.op.Mul(ctx.cast(mean, stat), m))
    new_var = ctx.op.Add(ctx.op.Mul(running_var, keep), ctx.op.Mul(ctx.cast(unbiased, stat), m))
    return y, mean, rstd, new_mean, new_var


# ------------------------------------------------------------------------------------ layer norm
def _normalized_axes(ctx, x: ir.Value, normalized_shape) -> list[int]:
    rank = ctx.rank(x)
    k = len(normalized_shape)
    if k == 0 or k > rank:
        raise TranslationError(f"normalized_shape {list(normalized_shape)} does not fit an input of rank {rank}")
    return list(range(rank - k, rank))


def _static(shape, what: str) -> list[int]:
    if not all(isinstance(d, int) for d in shape):
        raise TranslationError(f"{what} {list(shape)} is not static",
                               hint="normalize over axes of fixed size, or pass a weight tensor")
    return [int(d) for d in shape]


def layer_norm_values(ctx, x, normalized_shape, weight, bias, eps: float, outputs: int = 1):
    """ONNX LayerNormalization over the last ``len(normalized_shape)`` axes; ``outputs=3`` also
    returns mean and 1/std, shaped like x with the normalized axes of size 1 (PyTorch's shape)."""
    axes = _normalized_axes(ctx, x, normalized_shape)
    if weight is None:
        weight = _filled(ctx, _static(normalized_shape, "normalized_shape"), 1.0, x.dtype)
    weight = ctx.cast(weight, x.dtype)
    bias = ctx.cast(bias, x.dtype) if bias is not None else None
    res = ctx.op.LayerNormalization(x, weight, bias, axis=axes[0], epsilon=float(eps), _outputs=outputs)
    if outputs == 1:
        return res
    y, mean, rstd = res
    if x.dtype != ir.DataType.FLOAT:
        stat = dtypes.onnx_dtype(ctx.meta_val[1].dtype)
        mean, rstd = ctx.op.Cast(mean, to=stat), ctx.op.Cast(rstd, to=stat)
    return y, mean, rstd


@translates(aten.layer_norm.default)
def layer_norm(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """aten::layer_norm(input, normalized_shape, weight?, bias?, eps)."""
    return layer_norm_values(ctx, x, normalized_shape, weight, bias, eps)


@translates(aten.native_layer_norm.default)
def native_layer_norm(ctx, x, normalized_shape, weight, bias, eps):
    """aten::native_layer_norm -> (out, mean, rstd); mean/rstd computed only when read."""
    used = _used_outputs(ctx)
    if used <= {0}:
        return layer_norm_values(ctx, x, normalized_shape, weight, bias, eps), None, None
    return layer_norm_values(ctx, x, normalized_shape, weight, bias, eps, outputs=3)


# ------------------------------------------------------------------------------------ group norm
def group_norm_values(ctx, x, groups: int, weight, bias, eps: float):
    """Group norm of ``x[N, C, *]`` with ``groups`` dividing C: (y, mean [N, G], rstd [N, G])."""
    grouped = ctx.op.Reshape(x, ctx.const([0, int(groups), -1]))
    centered, mean, rstd = _moments(ctx, grouped, [2], eps, x.dtype)
    y = ctx.op.Reshape(ctx.op.Mul(centered, rstd), ctx.shape(x))
    y = _affine(ctx, y, weight, bias, ctx.rank(x), x.dtype)
    two = axes_const(ctx, [2])
    return y, ctx.op.Squeeze(mean, two), ctx.op.Squeeze(rstd, two)


def group_normalization(ctx, x, groups: int, weight, bias, eps: float) -> ir.Value:
    """ONNX GroupNormalization (opset 21: per-channel scale and bias, PyTorch's meaning)."""
    c = _channels(ctx, x, weight)
    scale = ctx.cast(weight, x.dtype) if weight is not None else _filled(ctx, [c], 1.0, x.dtype)
    shift = ctx.cast(bias, x.dtype) if bias is not None else _filled(ctx, [c], 0.0, x.dtype)
    return ctx.op.GroupNormalization(x, scale, shift, num_groups=int(groups), epsilon=float(eps))


def group_norm_by_instance_norm(ctx, x, groups: int, weight, bias, eps: float) -> ir.Value:
    """Group norm before opset 21: InstanceNormalization over ``x`` viewed as ``[N, G, C/G * ...]``
    (one statistic per sample and group), then the per-channel affine."""
    grouped = ctx.op.Reshape(x, ctx.const([0, int(groups), -1]))
    ones = _filled(ctx, [int(groups)], 1.0, x.dtype)
    zeros = _filled(ctx, [int(groups)], 0.0, x.dtype)
    y = ctx.op.Reshape(ctx.op.InstanceNormalization(grouped, ones, zeros, epsilon=float(eps)), ctx.shape(x))
    return _affine(ctx, y, weight, bias, ctx.rank(x), x.dtype)


@translates(aten.group_norm.default)
def group_norm(ctx, x, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """aten::group_norm(input, num_groups, weight?, bias?, eps): GroupNormalization from opset 21,
    InstanceNormalization on the grouped view before."""
    if ctx.opset >= 21:
        return group_normalization(ctx, x, num_groups, weight, bias, eps)
    return group_norm_by_instance_norm(ctx, x, num_groups, weight, bias, eps)


@translates(aten.native_group_norm.default)
def native_group_norm(ctx, x, weight, bias, n, c, hxw, group, eps):
    """aten::native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd);
    GroupNormalization from opset 21 when mean and rstd are not read."""
    if _used_outputs(ctx) <= {0}:
        if ctx.opset >= 21:
            return group_normalization(ctx, x, group, weight, bias, eps), None, None
        return group_norm_by_instance_norm(ctx, x, group, weight, bias, eps), None, None
    return group_norm_values(ctx, x, group, weight, bias, eps)


# ------------------------------------------------------------------------------------ instance norm
@translates(aten.instance_norm.default)
def instance_norm(ctx, x, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled=True):
    """aten::instance_norm: per-sample, per-channel statistics (ONNX InstanceNormalization), or the
    running statistics when ``use_input_stats`` is False."""
    if not use_input_stats:
        return batch_norm_inference(ctx, x, weight, bias, running_mean, running_var, eps)
    c = _channels(ctx, x, weight)
    scale = ctx.cast(weight, x.dtype) if weight is not None else _filled(ctx, [c], 1.0, x.dtype)
    shift = ctx.cast(bias, x.dtype) if bias is not None else _filled(ctx, [c], 0.0, x.dtype)
    return ctx.op.InstanceNormalization(x, scale, shift, epsilon=float(eps))


# ------------------------------------------------------------------------------------ rms norm
def rms_norm_value(ctx, x, normalized_shape, weight, eps):
    """``x / sqrt(mean(x^2 over the last k axes) + eps) * weight``; eps None is the dtype's
    machine epsilon (torch.finfo). RMSNormalization when the opset is 23 or newer."""
    if ctx.opset >= 23:
        return rms_norm_23(ctx, x, normalized_shape, weight, eps)
    return rms_norm(ctx, x, normalized_shape, weight, eps)


@translates(aten.rms_norm.default, opset=(None, 22))
def rms_norm(ctx, x, normalized_shape, weight=None, eps=None):
    """aten::rms_norm(input, normalized_shape, weight?, eps?) as its formula (before opset 23)."""
    axes = _normalized_axes(ctx, x, normalized_shape)
    if eps is None:
        eps = float(torch.finfo(dtypes.torch_dtype(x.dtype)).eps)
    ms = ctx.op.ReduceMean(ctx.op.Mul(x, x), axes_const(ctx, axes), keepdims=1)
    y = ctx.op.Mul(x, ctx.op.Reciprocal(ctx.op.Sqrt(ctx.op.Add(ms, ctx.scalar(eps, x.dtype)))))
    return ctx.op.Mul(y, ctx.cast(weight, x.dtype)) if weight is not None else y


@translates(aten.rms_norm.default, opset=(23, None))
def rms_norm_23(ctx, x, normalized_shape, weight=None, eps=None):
    """aten::rms_norm(input, normalized_shape, weight?, eps?): ONNX RMSNormalization (opset 23)."""
    axes = _normalized_axes(ctx, x, normalized_shape)
    if eps is None:
        eps = float(torch.finfo(dtypes.torch_dtype(x.dtype)).eps)
    scale = ctx.cast(weight, x.dtype) if weight is not None else _filled(
        ctx, _static(normalized_shape, "normalized_shape"), 1.0, x.dtype)
    return ctx.op.RMSNormalization(x, scale, axis=axes[0], epsilon=float(eps))


@translates(aten._fused_rms_norm.default)
def fused_rms_norm(ctx, x, normalized_shape, weight=None, eps=None):
    """aten::_fused_rms_norm -> (out, rstd); rstd computed only when read."""
    if _used_outputs(ctx) <= {0}:
        return rms_norm_value(ctx, x, normalized_shape, weight, eps), None
    axes = _normalized_axes(ctx, x, normalized_shape)
    if eps is None:
        eps = float(torch.finfo(dtypes.torch_dtype(x.dtype)).eps)
    ms = ctx.op.ReduceMean(ctx.op.Mul(x, x), axes_const(ctx, axes), keepdims=1)
    rstd = ctx.op.Reciprocal(ctx.op.Sqrt(ctx.op.Add(ms, ctx.scalar(eps, x.dtype))))
    y = ctx.op.Mul(x, rstd)
    return (ctx.op.Mul(y, ctx.cast(weight, x.dtype)) if weight is not None else y), rstd


# ------------------------------------------------------------------------------------ weight norm
@translates(aten._weight_norm.default)
def weight_norm(ctx, v, g, dim=0):
    """aten::_weight_norm(Tensor v, Tensor g, int dim=0): ``v * (g / norm)``, the 2-norm of ``v``
    over every axis but ``dim`` (kept with size 1), or over all axes when ``dim`` is -1
    (torch._weight_norm / norm_except_dim, behind torch.nn.utils.parametrizations.weight_norm)."""
    rank = ctx.rank(v)
    dtype = ctx.out_dtype
    v, g = ctx.cast(v, dtype), ctx.cast(g, dtype)
    if rank == 0:
        norm = ctx.op.Abs(v)
    elif dim == -1:
        norm = ctx.op.ReduceL2(v, keepdims=1)
    else:
        dim = dim + rank if dim < 0 else dim
        others = [a for a in range(rank) if a != dim]
        norm = ctx.op.ReduceL2(v, axes_const(ctx, others), keepdims=1) if others else ctx.op.Abs(v)
    return ctx.op.Mul(v, ctx.op.Div(g, norm))
