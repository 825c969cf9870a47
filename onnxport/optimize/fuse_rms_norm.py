"""RMSNormalization fusion (opset >= 23) from the root-mean-square formula.

Matches ``x / sqrt(mean(x^2) + eps)`` over the last k axes of a float ``x`` whose normalized dims
are static (the square as ``Pow(x, 2)`` or ``x * x``, the division as ``/ Sqrt(...)`` or
``* Reciprocal(Sqrt(...))``, ``eps`` a one-element constant), and replaces it by
``RMSNormalization(x, ones, axis=-k, epsilon=eps)``; a following ``* scale`` of the normalized shape
is then folded in (see ``_norm``).

Semantics: ONNX RMSNormalization-23 (https://onnx.ai/onnx/operators/onnx__RMSNormalization.html).
"""

from __future__ import annotations

from onnxscript.rewriter import pattern

from onnxport.optimize._norm import NormFormula, NormScale
from onnxport.optimize._patterns import NORMALIZED_FORMS, FusionPass, either, keeps_dims, normalized, number


class RMSNormFormula(NormFormula):
    """The RMS-norm formula ending with one form of the division (see ``NormFormula``)."""

    op_type = "RMSNormalization"

    def pattern(self, op, x, axes, eps):
        square = pattern.OrValue([op.Pow(x, number(2.0)), op.Mul(x, x)])
        mean_square = op.ReduceMean(square, axes, _outputs=["mean_square"])
        return normalized(op, x, op.Sqrt(either(op, "Add", mean_square, eps)), self.form)

    def check_formula(self, result, x, axes, mean_square, **_) -> pattern.MatchResult:
        if not keeps_dims(mean_square.producer()):
            return result.fail("the mean drops the reduced axes")
        return result


RULES = [*(RMSNormFormula(form) for form in NORMALIZED_FORMS),
         *(NormScale("RMSNormalization", swap) for swap in (False, True))]


class RMSNormFusionPass(FusionPass):
    """Fuse the RMS-norm formula into ``RMSNormalization`` in the main graph, subgraphs and local
    functions (opset 23 models)."""

    def __init__(self):
        super().__init__(RULES, frozenset({"ReduceMean", "RMSNormalization"}))
