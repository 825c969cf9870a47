"""Integer number theory: gcd, lcm and integer powers.

Semantics: torch.gcd / torch.lcm (https://pytorch.org/docs/stable/generated/torch.gcd.html):
elementwise on integer tensors (broadcast), gcd(a, b) >= 0 with gcd(0, 0) = 0, and
lcm(a, b) = |a / gcd(a, b) * b| (0 when gcd is 0). Computed by Euclid's algorithm (Knuth, TAOCP
vol. 2, 4.5.2, Algorithm E) in an ONNX Loop: each step maps (a, b) to (b, a mod b) where b is not 0,
and the loop stops once every b is 0. By Lame's theorem 92 steps suffice for 64-bit integers
(the 93rd Fibonacci number exceeds 2^63), which bounds the trip count.

An integer power (``torch.pow`` of integer tensors) is exact and wraps around as eager PyTorch's does
(a product of 64-bit integers modulo 2^64: BLT's rolling hash ``prime ** arange(n)``): computed by
squaring and multiplying (Knuth, TAOCP vol. 2, 4.6.3), unrolled over the bits of an exponent known when
translating, else in an ONNX Loop over the exponent's bits (at most 63 steps, stopping once every
exponent is 0). A negative exponent gives what PyTorch gives for tensors: 1 for a base of 1, +-1 for
-1, 0 otherwise.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate import bodies
from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64
BOOL = ir.DataType.BOOL
_MAX_STEPS = 93


def _gcd(ctx, a, b):
    """gcd of a and b (same integer dtype), broadcast: the Loop runs on the flattened operands."""
    op = ctx.op
    dtype = ctx.out_dtype
    a, b = ctx.cast(a, dtype), ctx.cast(b, dtype)
    shape = op.Shape(op.Max(a, b))
    flat = ctx.const([-1])
    a = op.Reshape(op.Abs(op.Expand(a, shape)), flat)
    b = op.Reshape(op.Abs(op.Expand(b, shape)), flat)

    def step(sub, ins):
        x, y = ins[2], ins[3]
        zero = sub.scalar(0, dtype)
        done = sub.op.Equal(y, zero)
        r = sub.op.Mod(x, sub.op.Where(done, sub.scalar(1, dtype), y))
        new_x = sub.op.Where(done, x, y)
        new_y = sub.op.Where(done, zero, r)
        busy = sub.op.ReduceMax(sub.op.Cast(sub.op.Not(sub.op.Equal(new_y, zero)), to=I64), keepdims=0)
        again = sub.op.Greater(busy, sub.scalar(0, I64))
        again.type, again.shape = ir.TensorType(BOOL), ir.Shape([])
        return [again, new_x, new_y]

    graph = bodies.subgraph(ctx, "gcd_steps", [(I64, []), (BOOL, []), (dtype, [None]), (dtype, [None])], step)
    g, _ = ctx.op.Loop(ctx.const(np.array(_MAX_STEPS, dtype=np.int64)), ctx.const(np.array(True)), a, b,
                       body=graph, _outputs=2)
    return g, shape


@translates(aten.gcd.default)
def gcd(ctx, a, b):
    """gcd(Tensor self, Tensor other): the greatest common divisor, non-negative, by Euclid's
    algorithm in an ONNX Loop (at most 93 steps)."""
    g, shape = _gcd(ctx, a, b)
    return ctx.op.Reshape(g, shape)


@translates(aten.lcm.default)
def lcm(ctx, a, b):
    """lcm(Tensor self, Tensor other) = |a / gcd(a, b) * b|, 0 where gcd(a, b) = 0 (PyTorch's
    formula, which wraps around as eager does when the result exceeds the integer type)."""
    op = ctx.op
    dtype = ctx.out_dtype
    g, shape = _gcd(ctx, a, b)
    flat = ctx.const([-1])
    a = op.Reshape(op.Expand(ctx.cast(a, dtype), shape), flat)
    b = op.Reshape(op.Expand(ctx.cast(b, dtype), shape), flat)
    zero = ctx.scalar(0, dtype)
    is_zero = op.Equal(g, zero)
    out = op.Abs(op.Mul(op.Div(a, op.Where(is_zero, ctx.scalar(1, dtype), g)), b))
    return op.Reshape(op.Where(is_zero, zero, out), shape)


def integer_pow(ctx, a, b):
    """``a ** b`` in the integer result dtype ``ctx.out_dtype``, exact with PyTorch's wrap-around (module
    docstring). ``a``, ``b``: values or Python ints (broadcast); a Python exponent is non-negative (eager
    PyTorch refuses a negative one of integers)."""
    op = ctx.op
    dtype = ctx.out_dtype
    a = ctx.cast(a, dtype) if isinstance(a, ir.Value) else ctx.scalar(int(a), dtype)
    one = ctx.scalar(1, dtype)

    def ones_like(x):
        return op.Add(op.Mul(x, ctx.scalar(0, dtype)), one)

    if not isinstance(b, ir.Value):
        result, base, e = None, a, int(b)
        while e:
            if e & 1:
                result = base if result is None else op.Mul(result, base)
            e >>= 1
            if e:
                base = op.Mul(base, base)
        return ones_like(a) if result is None else result
    b = ctx.cast(b, dtype)
    shape = op.Shape(op.Add(op.Mul(a, ctx.scalar(0, dtype)), op.Mul(b, ctx.scalar(0, dtype))))  # broadcast
    flat = ctx.const([-1])
    base = op.Reshape(op.Expand(a, shape), flat)
    e = op.Reshape(op.Expand(b, shape), flat)
    zero, two = ctx.scalar(0, dtype), ctx.scalar(2, dtype)
    negative = op.Less(e, zero)
    e_used = op.Where(negative, zero, e)

    def step(sub, ins):
        result, x, n = ins[2], ins[3], ins[4]
        s_one, s_two, s_zero = sub.scalar(1, dtype), sub.scalar(2, dtype), sub.scalar(0, dtype)
        odd = sub.op.Equal(sub.op.Mod(n, s_two), s_one)
        result = sub.op.Where(odd, sub.op.Mul(result, x), result)
        n = sub.op.Div(n, s_two)
        busy = sub.op.ReduceMax(n, keepdims=0)
        again = sub.op.Greater(busy, s_zero)
        again.type, again.shape = ir.TensorType(BOOL), ir.Shape([])
        return [again, result, sub.op.Mul(x, x), n]

    graph = bodies.subgraph(ctx, "pow_bits", [(I64, []), (BOOL, []), (dtype, [None]), (dtype, [None]),
                                              (dtype, [None])], step)
    busy = op.Greater(op.ReduceMax(op.Concat(e_used, op.Reshape(zero, ctx.const([1])), axis=0), keepdims=0), zero)
    ones = ones_like(base)
    powered, _, _ = op.Loop(ctx.const(np.array(64, dtype=np.int64)), busy, ones, base, e_used, body=graph,
                            _outputs=3)
    # a negative exponent: 1 for a base of 1, (-1) ** e for -1, else 0 (PyTorch's integer pow of tensors)
    minus_one = ctx.scalar(-1, dtype)
    odd = op.Equal(op.Mod(e, two), one)
    inverse = op.Where(op.Equal(base, one), one,
                       op.Where(op.Equal(base, minus_one), op.Where(odd, minus_one, one), zero))
    return op.Reshape(op.Where(negative, inverse, powered), shape)
