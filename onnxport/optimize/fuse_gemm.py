"""MatMul + Add into Gemm for 2-D operands.

``Add(MatMul(a[M, K], b[K, N]), c)`` with ``c`` of shape [N], [1, N], [M, N] or a scalar, the
MatMul used only by the Add, becomes ``Gemm(a, b, c)``; a ``Transpose`` of ``b`` used only there
becomes ``transB=1``.

Semantics: ONNX Gemm (https://onnx.ai/onnx/operators/onnx__Gemm.html), C unidirectionally
broadcast to (M, N).
"""

from __future__ import annotations

from onnxport.optimize._patterns import FLOAT_TYPES, operands
from onnxport.optimize._scopes import (ScopedPass, attr_ints, make_node, producer_op, prune, replace_value,
                                       single_use)


def _c_fits(c, m, n) -> bool:
    if c.shape is None:
        return False
    dims = list(c.shape)
    if len(dims) == 0:
        return True
    if len(dims) == 1:
        return dims[0] in (1, n)
    return len(dims) == 2 and dims[0] in (1, m) and dims[1] in (1, n)


class GemmFusionPass(ScopedPass):
    """Fuse 2-D ``MatMul`` + ``Add`` into ``Gemm`` in every scope."""

    def rewrite(self, scope) -> bool:
        modified = False
        for node in list(scope):
            if node.graph is None or node.op_type != "Add" or node.domain != "":
                continue
            pair = operands(node, "MatMul")
            if pair is None or not single_use(pair[0]):
                continue
            mm_out, c = pair
            a, b = mm_out.producer().inputs
            if a.shape is None or b.shape is None or len(a.shape) != 2 or len(b.shape) != 2:
                continue
            if a.dtype not in FLOAT_TYPES or c.dtype != a.dtype or not _c_fits(c, a.shape[0], b.shape[1]):
                continue
            trans_b = 0
            t = producer_op(b, "Transpose")
            if t is not None and attr_ints(t, "perm") in (None, [1, 0]) and single_use(b):
                b, trans_b = t.inputs[0], 1
            gemm = make_node(scope, node, "Gemm", [a, b, c], {"transB": trans_b} if trans_b else {})
            if replace_value(node.outputs[0], gemm.outputs[0]):
                prune(node)
                modified = True
            else:
                scope.remove(gemm, safe=True)
        return modified
