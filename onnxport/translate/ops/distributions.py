"""Sampling from distributions: normal (tensor mean / std), uniform, exponential, geometric,
log_normal, cauchy, randint_like, randint.

Semantics: the torch.Tensor.normal_ / uniform_ / exponential_ / geometric_ / log_normal_ /
cauchy_ distributions (https://pytorch.org/docs/stable/tensors.html), drawn with ONNX
RandomNormalLike / RandomUniformLike by inverse transforms of U ~ uniform[0, 1). The ONNX model
has its own generator: the values follow the distribution, not PyTorch's random stream.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate.ops.creation import _random
from onnxport.translate.registry import translates

aten = torch.ops.aten


def _uniform(ctx, like: ir.Value) -> ir.Value:
    return _random(ctx, ctx.shape(like), normal=False)


def _shape_of(ctx, *tensors) -> ir.Value:
    """The broadcast shape of the tensors among ``tensors``."""
    values = [t for t in tensors if isinstance(t, ir.Value)]
    total = values[0]
    for v in values[1:]:
        total = ctx.op.Add(total, v)
    return ctx.op.Shape(total)


@translates(aten.normal.Tensor_Tensor, aten.normal.Tensor_float, aten.normal.float_Tensor)
def normal(ctx, mean, std=1.0, *, generator=None):
    """normal(Tensor|float mean, Tensor|float std) -> mean + std * N(0, 1), broadcast."""
    to = ctx.out_dtype
    z = _random(ctx, _shape_of(ctx, mean, std), normal=True)
    m = ctx.cast(mean, to) if isinstance(mean, ir.Value) else ctx.scalar(mean, to)
    s = ctx.cast(std, to) if isinstance(std, ir.Value) else ctx.scalar(std, to)
    return ctx.op.Add(m, ctx.op.Mul(s, z))


@translates(aten.normal.float_float)
def normal_of_size(ctx, mean, std, size, *, generator=None, **_):
    """normal.float_float(float mean, float std, SymInt[] size, *, dtype...) -> mean + std * N(0, 1)."""
    to = ctx.out_dtype
    z = _random(ctx, ctx.shape_list(list(size)), normal=True)
    return ctx.op.Add(ctx.scalar(mean, to), ctx.op.Mul(ctx.scalar(std, to), z))


@translates(aten.normal_functional.default)
def normal_functional(ctx, x, mean=0.0, std=1.0, *, generator=None):
    """normal_functional(Tensor self, float mean=0, float std=1): N(mean, std^2) in self's shape."""
    to = ctx.out_dtype
    return ctx.op.Add(ctx.scalar(mean, to), ctx.op.Mul(ctx.scalar(std, to), _random(ctx, ctx.shape(x), normal=True)))


@translates(aten.uniform.default)
def uniform(ctx, x, low=0.0, high=1.0, *, generator=None):
    """uniform(Tensor self, float from=0, float to=1): from + (to - from) * U."""
    to = ctx.out_dtype
    return ctx.op.Add(ctx.scalar(low, to), ctx.op.Mul(ctx.scalar(high - low, to), _uniform(ctx, x)))


@translates(aten.exponential.default)
def exponential(ctx, x, lambd=1.0, *, generator=None):
    """exponential(Tensor self, float lambd=1): -log(1 - U) / lambd."""
    to = ctx.out_dtype
    return ctx.op.Div(ctx.op.Neg(ctx.op.Log(ctx.op.Sub(ctx.scalar(1, to), _uniform(ctx, x)))), ctx.scalar(lambd, to))


@translates(aten.geometric.default)
def geometric(ctx, x, p, *, generator=None):
    """geometric(Tensor self, float p): the number of Bernoulli(p) trials up to the first success,
    ceil(log(1 - U) / log(1 - p)) (at least 1)."""
    to = ctx.out_dtype
    work = ir.DataType.FLOAT
    u = ctx.cast(_uniform(ctx, x), work)
    k = ctx.op.Ceil(ctx.op.Div(ctx.op.Log(ctx.op.Sub(ctx.scalar(1, work), u)), ctx.scalar(math.log1p(-p), work)))
    return ctx.cast(ctx.op.Max(k, ctx.scalar(1, work)), to)


@translates(aten.log_normal.default)
def log_normal(ctx, x, mean=1.0, std=2.0, *, generator=None):
    """log_normal(Tensor self, float mean=1, float std=2): exp(N(mean, std^2))."""
    return ctx.op.Exp(normal_functional(ctx, x, mean, std))


@translates(aten.cauchy.default)
def cauchy(ctx, x, median=0.0, sigma=1.0, *, generator=None):
    """cauchy(Tensor self, float median=0, float sigma=1): median + sigma * tan(pi * (U - 1/2))."""
    to = ctx.out_dtype
    angle = ctx.op.Mul(ctx.scalar(math.pi, to), ctx.op.Sub(_uniform(ctx, x), ctx.scalar(0.5, to)))
    return ctx.op.Add(ctx.scalar(median, to), ctx.op.Mul(ctx.scalar(sigma, to), ctx.op.Tan(angle)))


def _integers(ctx, like: ir.Value, low, high) -> ir.Value:
    """Integers in [low, high) in the shape of ``like``: low + floor(U * (high - low)), drawn in
    float64 (exact for ranges up to 2^53)."""
    to = ctx.out_dtype
    work = ir.DataType.DOUBLE
    u = ctx.op.RandomUniformLike(ctx.cast(like, work), dtype=work)
    lo = ctx.cast(low, work) if isinstance(low, ir.Value) else ctx.scalar(low, work)
    hi = ctx.cast(high, work) if isinstance(high, ir.Value) else ctx.scalar(high, work)
    return ctx.cast(ctx.op.Add(lo, ctx.op.Floor(ctx.op.Mul(u, ctx.op.Sub(hi, lo)))), to)


@translates(aten.randint_like.default, aten.randint_like.low_dtype)
def randint_like(ctx, x, low, high=None, **_):
    """randint_like(Tensor self, SymInt high) / .low_dtype(Tensor self, SymInt low, SymInt high):
    integers in [low, high) in self's shape."""
    if high is None:
        low, high = 0, low
    return _integers(ctx, x, low, high)


@translates(aten.randint.default, aten.randint.low)
def randint(ctx, *args, **_):
    """randint(SymInt high, SymInt[] size, *, dtype...) / randint.low(SymInt low, SymInt high,
    SymInt[] size, *, dtype...): integers in [low, high) of the given size."""
    low, high, size = (0, *args[:2]) if len(args) == 2 else args[:3]
    zeros = ctx.op.ConstantOfShape(ctx.shape_list(list(size)), value=ir.tensor(np.zeros([1], dtype=np.float64)))
    return _integers(ctx, zeros, low, high)
