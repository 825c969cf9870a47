"""Matrix products: linear, addmm, mm, bmm, matmul, baddbmm, outer, dot.

Semantics: torch.nn.functional.linear / torch.matmul (numpy matmul broadcasting) on ONNX MatMul
and Gemm.
"""

from __future__ import annotations

import onnx_ir as ir
import torch

from onnxport.translate.ops._common import promote
from onnxport.translate.registry import translates

aten = torch.ops.aten


def _transposed_weight(ctx, w: ir.Value) -> ir.Value:
    """W^T for a 2-D weight; folded into the initializer when W is a constant."""
    return ctx.op.Transpose(w, perm=[1, 0])


@translates(aten.linear.default)
def linear(ctx, x, weight, bias=None):
    """linear(x[..., in], weight[out, in], bias[out]) = x @ weight^T + bias."""
    if ctx.rank(x) == 2 and bias is not None and ctx.rank(weight) == 2:
        return ctx.op.Gemm(x, weight, bias, transB=1)
    out = ctx.op.MatMul(x, _transposed_weight(ctx, weight) if ctx.rank(weight) == 2 else weight)
    return ctx.op.Add(out, bias) if bias is not None else out


@translates(aten.addmm.default)
def addmm(ctx, bias, a, b, beta=1, alpha=1):
    """addmm(bias, a[n, k], b[k, m]) = beta * bias + alpha * a @ b (ONNX Gemm)."""
    return ctx.op.Gemm(a, b, bias, alpha=float(alpha), beta=float(beta))


@translates(aten.mm.default, aten.bmm.default, aten.matmul.default)
def matmul(ctx, a, b):
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.MatMul(a, b)


@translates(aten.baddbmm.default)
def baddbmm(ctx, x, a, b, beta=1, alpha=1):
    to = ctx.out_dtype
    prod = ctx.op.MatMul(a, b)
    if alpha != 1:
        prod = ctx.op.Mul(prod, ctx.scalar(alpha, to))
    if beta == 0:
        return prod
    if beta != 1:
        x = ctx.op.Mul(x, ctx.scalar(beta, to))
    return ctx.op.Add(x, prod)


@translates(aten.outer.default)
def outer(ctx, a, b):
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.Mul(ctx.op.Unsqueeze(a, ctx.const([1])), ctx.op.Unsqueeze(b, ctx.const([0])))


@translates(aten.dot.default, aten.vdot.default)
def dot(ctx, a, b):
    return ctx.op.ReduceSum(ctx.op.Mul(a, b), keepdims=0)
