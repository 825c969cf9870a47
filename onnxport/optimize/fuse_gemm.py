"""MatMul + Add into Gemm for 2-D operands.

``Add(MatMul(a[M, K], b[K, N]), c)`` (either order of the Add) with ``c`` of shape [N], [1, N],
[M, N], [1], [M, 1] or a scalar and of ``a``'s float dtype becomes ``Gemm(a, b, c)``; a
``Transpose`` producing ``b`` and used only there becomes ``transB=1``. The MatMul must be used
only by the Add.

Semantics: ONNX Gemm-13 (https://onnx.ai/onnx/operators/onnx__Gemm.html), C unidirectionally
broadcast to (M, N).
"""

from __future__ import annotations

from onnxscript.rewriter import pattern

from onnxport.optimize._patterns import FLOAT_TYPES, FusionPass, Rule, rank


def _c_fits(c, m, n) -> bool:
    """``c`` broadcasts unidirectionally to (m, n)."""
    if c.shape is None:
        return False
    dims = list(c.shape)
    if len(dims) == 0:
        return True
    if len(dims) == 1:
        return dims[0] in (1, n)
    return len(dims) == 2 and dims[0] in (1, m) and dims[1] in (1, n)


class MatMulAdd(Rule):
    """``MatMul(a, b) + c`` -> ``Gemm(a, b, c)``, or ``MatMul(a, Transpose(w)) + c`` ->
    ``Gemm(a, w, c, transB=1)``.

    Args:
        trans_b: match a transposed second operand.
        swap: ``c + MatMul(...)``.
    """

    def __init__(self, trans_b: bool, swap: bool):
        super().__init__(f"MatMulAdd{'_transB' if trans_b else ''}{'_swapped' if swap else ''}")
        self._trans_b, self._swap = trans_b, swap
        self.root_op = "Add"

    def pattern(self, op, a, b, c):
        if self._trans_b:
            b = op.Transpose(b, _outputs=["bt"])
        mm = op.MatMul(a, b, _outputs=["mm"])
        return op.Add(c, mm) if self._swap else op.Add(mm, c)

    def check(self, context, a, b, c, mm, bt=None, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if bt is not None and list(bt.producer().attributes.get_ints("perm", [1, 0])) != [1, 0]:
            return result.fail("the Transpose is not a 2-D transposition", bt)
        second = mm.producer().inputs[1]
        if rank(a) != 2 or rank(second) != 2:
            return result.fail("Gemm multiplies 2-D operands")
        if a.dtype not in FLOAT_TYPES or c.dtype != a.dtype:
            return result.fail("operands are not of one float dtype", c)
        if not _c_fits(c, a.shape[0], second.shape[1]):
            return result.fail("c does not broadcast to (M, N)", c)
        return result

    def rewrite(self, op, a, b, c, **_):
        if self._trans_b:
            return op.Gemm(a, b, c, transB=1)
        return op.Gemm(a, b, c)


RULES = [MatMulAdd(trans_b, swap) for trans_b in (True, False) for swap in (False, True)]


class GemmFusionPass(FusionPass):
    """Fuse 2-D ``MatMul`` + ``Add`` into ``Gemm`` in the main graph, subgraphs and local functions."""

    def __init__(self):
        super().__init__(RULES, frozenset({"MatMul"}))
