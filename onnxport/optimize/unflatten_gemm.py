"""Gemm over a flattened batch back to MatMul + Add.

``Reshape(Gemm(Reshape(x[..., K], [-1, K]), W, C), [..., N])`` (the translation of ``linear`` on an
N-d input, as some decompositions write it) needs two Reshapes and the shape lists they read;
``Add(MatMul(x, W'), C)`` computes the same with numpy broadcasting in two nodes (``W'`` is ``W^T``
when ``transB=1``; the Transpose of a constant weight is folded into it afterwards).

Applies when the Gemm has ``transA=0``, ``alpha=beta=1``, the inner Reshape keeps ``x``'s last dim,
the outer Reshape restores ``x``'s leading dims (same dims: ints or dim_params) and each
intermediate value has no other use.

Semantics: ONNX Gemm, MatMul (numpy matmul broadcasting), Reshape
(https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

from onnxport.optimize._patterns import only_consumer
from onnxport.optimize._scopes import (ScopedPass, attr_float, attr_int, dims, make_node, producer_op, prune,
                                       replace_value, single_use)


class UnflattenGemmPass(ScopedPass):
    """Rewrite Reshape-Gemm-Reshape chains into MatMul + Add in every scope."""

    def rewrite(self, scope) -> bool:
        modified = False
        for gemm in list(scope):
            if gemm.graph is None or gemm.op_type != "Gemm" or gemm.domain != "":
                continue
            if attr_int(gemm, "transA", 0) or attr_float(gemm, "alpha", 1.0) != 1.0 \
                    or attr_float(gemm, "beta", 1.0) != 1.0:
                continue
            flat = gemm.inputs[0]
            inner = producer_op(flat, "Reshape")
            outer = only_consumer(gemm.outputs[0], "Reshape")
            if inner is None or outer is None or not single_use(flat):
                continue
            x, y = inner.inputs[0], outer.outputs[0]
            xd, yd, fd = dims(x), dims(y), dims(flat)
            if xd is None or yd is None or fd is None or len(xd) < 3 or len(yd) != len(xd) or len(fd) != 2:
                continue
            if xd[-1] != fd[1] or xd[:-1] != yd[:-1]:
                continue
            w, c = gemm.inputs[1], gemm.inputs[2] if len(gemm.inputs) > 2 else None
            if attr_int(gemm, "transB", 0):
                w = make_node(scope, gemm, "Transpose", [w], {"perm": [1, 0]}).outputs[0]
            out = make_node(scope, gemm, "MatMul", [x, w]).outputs[0]
            if c is not None:
                out = make_node(scope, gemm, "Add", [out, c]).outputs[0]
            out.type, out.shape = y.type, y.shape
            if replace_value(y, out):
                prune(outer)
                modified = True
        return modified
