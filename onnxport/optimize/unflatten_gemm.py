"""Gemm over a flattened batch back to MatMul + Add.

``Reshape(Gemm(Reshape(x[..., K], [-1, K]), W, C), [..., N])`` (the translation of ``linear`` on an
N-d input, as some decompositions write it) needs two Reshapes and the shape lists they read;
``Add(MatMul(x, W'), C)`` computes the same with numpy broadcasting in two nodes (``W'`` is
``Transpose(W)`` when ``transB=1``; the Transpose of a constant weight is folded into it afterwards).

Applies when the Gemm has ``transA=0``, ``alpha=beta=1`` and a ``C`` of shape [N], [1, N], [1] or
a scalar, the inner Reshape keeps ``x``'s last dim, the outer Reshape restores ``x``'s leading dims
(the same dims: static sizes or the same dim_param) and each intermediate value has no other use.

Why ours: onnxscript's ``gemm_to_matmul_add_rule`` needs a constant target shape and static input
dims, while the leading dims here are named (dim_params), computed at run time and compared by name.

Semantics: ONNX Gemm, MatMul (numpy matmul broadcasting), Reshape
(https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

from onnxscript.rewriter import pattern

from onnxport.optimize._patterns import FusionPass, Rule
from onnxport.optimize._scopes import dims


def _bias(gemm) -> object:
    return gemm.inputs[2] if len(gemm.inputs) > 2 else None


def _row_bias(c) -> bool:
    """``c`` broadcasts along rows only: shape [N], [1, N], [1] or a scalar."""
    d = dims(c)
    return d is not None and (len(d) <= 1 or (len(d) == 2 and d[0] == 1))


class UnflattenGemm(Rule):
    """``Reshape(Gemm(Reshape(x, s1), W[, C]), s2)`` -> ``MatMul(x, W') [+ C]``."""

    root_op = "Reshape"

    def pattern(self, op, x, flat_shape, w, out_shape):
        flat = op.Reshape(x, flat_shape, _outputs=["flat"])
        gemm = op.Gemm(flat, w, _allow_other_inputs=True, _outputs=["gemm"])
        return op.Reshape(gemm, out_shape)

    def check(self, context, x, flat, gemm, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        node = gemm.producer()
        attrs = node.attributes
        if attrs.get_int("transA", 0) or attrs.get_float("alpha", 1.0) != 1.0 or attrs.get_float("beta", 1.0) != 1.0:
            return result.fail("Gemm transposes A or scales", node)
        c = _bias(node)
        if c is not None and not _row_bias(c):
            return result.fail("C is not a row bias", c)
        xd, yd, fd = dims(x), dims(context.output_values[0]), dims(flat)
        if xd is None or yd is None or fd is None or len(xd) < 3 or len(yd) != len(xd) or len(fd) != 2:
            return result.fail("shapes unknown or not a flattened batch")
        if xd[-1] != fd[1] or xd[:-1] != yd[:-1]:
            return result.fail("the Reshapes do not flatten and restore the leading dims of x")
        return result

    def rewrite(self, op, x, w, gemm, **_):
        node = gemm.producer()
        if node.attributes.get_int("transB", 0):
            w = op.Transpose(w, perm=[1, 0])
        out = op.MatMul(x, w)
        c = _bias(node)
        return op.Add(out, c) if c is not None else out


RULES = [UnflattenGemm()]


class UnflattenGemmPass(FusionPass):
    """Rewrite Reshape-Gemm-Reshape chains into MatMul + Add in the main graph, subgraphs and local
    functions."""

    def __init__(self):
        super().__init__(RULES, frozenset({"Gemm"}))
