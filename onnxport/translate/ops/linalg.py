"""Matrix products: linear, addmm, mm, bmm, matmul, mv, dot, baddbmm, addbmm, addmv, outer, einsum,
_trilinear (bilinear forms).

Semantics: torch.nn.functional.linear / torch.matmul (numpy matmul broadcasting, 1-D operands
promoted and squeezed back) and torch.einsum, on ONNX MatMul, Gemm and Einsum. Operands are cast
to PyTorch's promoted dtype first.
"""

from __future__ import annotations

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate import dtypes
from onnxport.translate.ops._common import promote
from onnxport.translate.registry import translates

aten = torch.ops.aten


def _transposed_weight(ctx, w: ir.Value) -> ir.Value:
    """W^T for a 2-D weight (the optimizer folds it into the initializer when W is constant)."""
    return ctx.op.Transpose(w, perm=[1, 0])


def matmul_values(ctx, a: ir.Value, b: ir.Value, rank_b: int | None = None) -> ir.Value:
    """ONNX MatMul of ``a`` and ``b`` (numpy semantics) with 1-D operands made 2-D explicitly and
    the added axis squeezed back: onnxruntime 1.32 fuses Transpose + MatMul into a FusedMatMul that
    gives wrong results when the other operand is 1-D."""
    ra, rb = ctx.rank(a), ctx.rank(b) if rank_b is None else rank_b
    if (ra == 1) == (rb == 1):  # both 1-D (a dot product) or neither
        return ctx.op.MatMul(a, b)
    if rb == 1:
        return ctx.op.Squeeze(ctx.op.MatMul(a, ctx.op.Unsqueeze(b, ctx.const([1]))), ctx.const([-1]))
    return ctx.op.Squeeze(ctx.op.MatMul(ctx.op.Unsqueeze(a, ctx.const([0])), b), ctx.const([-2]))


def _scaled(ctx, x: ir.Value, factor, to: ir.DataType) -> ir.Value:
    return x if factor == 1 else ctx.op.Mul(x, ctx.scalar(factor, to))


@translates(aten.linear.default)
def linear(ctx, x, weight, bias=None):
    """linear(Tensor input[..., in], Tensor weight[out, in] or [in], Tensor? bias[out]) =
    x @ weight^T + bias: ONNX Gemm for 2-D float input with a bias, MatMul (+ Add) otherwise."""
    to = ctx.out_dtype
    x, weight = promote(ctx, x, weight, to=to)
    gemm_types = (ir.DataType.FLOAT, ir.DataType.DOUBLE)
    if ctx.rank(x) == 2 and bias is not None and ctx.rank(weight) == 2 and to in gemm_types:
        return ctx.op.Gemm(x, weight, ctx.cast(bias, to), transB=1)
    if ctx.rank(weight) == 2:
        out = matmul_values(ctx, x, _transposed_weight(ctx, weight), 2) if ctx.rank(x) > 1 else \
            matmul_values(ctx, weight, x)
    else:
        out = matmul_values(ctx, x, weight)
    return ctx.op.Add(out, ctx.cast(bias, to)) if bias is not None else out


def _add_scaled(ctx, bias, prod, beta, alpha, to):
    """beta * bias + alpha * prod; bias ignored (NaN included) when beta == 0, as in PyTorch."""
    prod = _scaled(ctx, prod, alpha, to)
    if beta == 0:
        return prod
    return ctx.op.Add(_scaled(ctx, ctx.cast(bias, to), beta, to), prod)


@translates(aten.addmm.default)
def addmm(ctx, bias, a, b, beta=1, alpha=1):
    """addmm(Tensor self, Tensor mat1[n, k], Tensor mat2[k, m], *, Scalar beta=1, Scalar alpha=1) =
    beta * self + alpha * mat1 @ mat2: ONNX Gemm for float, MatMul + Add otherwise or when beta is 0."""
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    if beta != 0 and to in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
        return ctx.op.Gemm(a, b, ctx.cast(bias, to), alpha=float(alpha), beta=float(beta))
    return _add_scaled(ctx, bias, ctx.op.MatMul(a, b), beta, alpha, to)


@translates(aten.mm.default, aten.bmm.default, aten.matmul.default, aten.mv.default)
def matmul(ctx, a, b):
    """mm / bmm / mv / matmul(Tensor self, Tensor other): ONNX MatMul (numpy semantics: 1-D
    operands, batch broadcasting), in the promoted dtype."""
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return matmul_values(ctx, a, b)


@translates(aten.dot.default, aten.vdot.default)
def dot(ctx, a, b):
    """dot / vdot(Tensor self[n], Tensor other[n]) -> 0-d: ONNX MatMul of two 1-D tensors."""
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.MatMul(a, b)


@translates(aten.baddbmm.default)
def baddbmm(ctx, x, a, b, beta=1, alpha=1):
    """baddbmm(Tensor self, Tensor batch1[B, n, k], Tensor batch2[B, k, m], *, Scalar beta=1,
    Scalar alpha=1) = beta * self + alpha * batch1 @ batch2 (self ignored when beta is 0)."""
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    return _add_scaled(ctx, x, ctx.op.MatMul(a, b), beta, alpha, to)


@translates(aten.addbmm.default)
def addbmm(ctx, x, a, b, beta=1, alpha=1):
    """addbmm(Tensor self, Tensor batch1[B, n, k], Tensor batch2[B, k, m], *, beta, alpha) =
    beta * self + alpha * sum_B(batch1 @ batch2)."""
    to = ctx.out_dtype
    a, b = promote(ctx, a, b, to=to)
    prod = ctx.op.ReduceSum(ctx.op.MatMul(a, b), ctx.const([0]), keepdims=0)
    return _add_scaled(ctx, x, prod, beta, alpha, to)


@translates(aten.addmv.default)
def addmv(ctx, x, mat, vec, beta=1, alpha=1):
    """addmv(Tensor self, Tensor mat[n, m], Tensor vec[m], *, beta, alpha) = beta * self + alpha * mat @ vec."""
    to = ctx.out_dtype
    mat, vec = promote(ctx, mat, vec, to=to)
    return _add_scaled(ctx, x, matmul_values(ctx, mat, vec), beta, alpha, to)


@translates(aten.outer.default, aten.ger.default)
def outer(ctx, a, b):
    """outer(Tensor self[n], Tensor vec2[m]) -> [n, m]: a[:, None] * b[None, :]."""
    a, b = promote(ctx, a, b, to=ctx.out_dtype)
    return ctx.op.Mul(ctx.op.Unsqueeze(a, ctx.const([1])), ctx.op.Unsqueeze(b, ctx.const([0])))


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def einsum_equation(equation: str, n_operands: int) -> str:
    """The ``equation`` of torch.einsum in the form ONNX Einsum takes: spaces removed, the
    implicit output made explicit (letters used once, in alphabetical order, after the broadcast
    dims), and letters renamed to lowercase ones (ONNX allows only lowercase)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    if len(lhs.split(",")) != n_operands:
        raise TranslationError(f"einsum equation {equation!r} has {len(lhs.split(','))} operands, "
                               f"{n_operands} tensors given", hint="give one subscript group per tensor")
    if not arrow:
        counts = {c: lhs.count(c) for c in lhs if c.isalpha()}
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c, k in counts.items() if k == 1))
    used = sorted({c for c in lhs + rhs if c.isalpha()})
    if len(used) > len(_LETTERS):
        raise TranslationError(f"einsum equation {equation!r} uses {len(used)} subscripts; ONNX Einsum has 26",
                               hint="split the contraction into several einsum calls")
    rename = {c: c for c in used} if all(c.islower() for c in used) else dict(zip(used, _LETTERS))
    tr = "".join(rename.get(c, c) for c in lhs), "".join(rename.get(c, c) for c in rhs)
    return f"{tr[0]}->{tr[1]}"


@translates(aten.einsum.default)
def einsum(ctx, equation, tensors, path=None):
    """einsum(str equation, Tensor[] tensors, *, int[]? path=None): ONNX Einsum with every operand
    cast to the node's result dtype (eager PyTorch requires equal dtypes; traced graphs may not)."""
    to = ctx.out_dtype
    if to == ir.DataType.BOOL or not (dtypes.is_float(to) or to in (ir.DataType.INT32, ir.DataType.INT64)):
        raise TranslationError(f"einsum in {to.name} has no ONNX Einsum kernel",
                               hint="cast the operands to float32 or int64 before torch.einsum")
    ops = [ctx.cast(t, to) for t in tensors]
    return ctx.op.Einsum(*ops, equation=einsum_equation(equation, len(ops)))


@translates(aten._trilinear.default)
def trilinear(ctx, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2, int[] expand3,
    int[] sumdim, int unroll_dim=1) = sum over ``sumdim`` of i1 * i2 * i3, each first unsqueezed
    at its ``expand`` axes (torch.nn.functional.bilinear: x1^T A x2). ``unroll_dim`` only chooses
    PyTorch's loop order."""
    to = ctx.out_dtype
    parts = []
    for x, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        x = ctx.cast(x, to)
        parts.append(ctx.op.Unsqueeze(x, ctx.const(sorted(expand))) if expand else x)
    product = ctx.op.Mul(ctx.op.Mul(parts[0], parts[1]), parts[2])
    if not sumdim:
        return product
    return ctx.op.ReduceSum(product, ctx.const(sorted(sumdim)), keepdims=0)
