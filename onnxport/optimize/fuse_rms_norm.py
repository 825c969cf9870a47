"""RMSNormalization fusion (opset >= 23) from the root-mean-square formula.

Matches ``x / sqrt(mean(x^2) + eps)`` over the last k axes of a float ``x`` whose normalized dims
are static (the square as ``Pow(x, 2)`` or ``x * x``, the division as ``/ Sqrt(...)`` or
``* Reciprocal(Sqrt(...))``, ``eps`` a one-element constant), and replaces it by
``RMSNormalization(x, ones, axis=-k, epsilon=eps)``; a following ``* scale`` of the normalized shape
is then folded in (see ``_norm_affine``).

Semantics: ONNX RMSNormalization-23 (https://onnx.ai/onnx/operators/onnx__RMSNormalization.html).
"""

from __future__ import annotations

from onnxscript.rewriter import pattern

from onnxport.optimize._norm_affine import NormScale
from onnxport.optimize._patterns import (FLOAT_TYPES, NORMALIZED_FORMS, FusionPass, Rule, either, keeps_dims, normalized,
                                         number, ones, rank, static_tail, trailing_axes)
from onnxport.optimize._scopes import scalar


class RMSNormFormula(Rule):
    """The RMS-norm formula ending with one form of the division.

    Args:
        form: ``"div"``, ``"mul"`` or ``"rmul"`` (see ``_patterns.normalized``).
    """

    def __init__(self, form: str):
        super().__init__(f"RMSNormFormula_{form}")
        self._form = form
        self.root_op = "Div" if form == "div" else "Mul"

    def pattern(self, op, x, axes, eps):
        square = pattern.OrValue([op.Pow(x, number(2.0)), op.Mul(x, x)])
        mean_square = op.ReduceMean(square, axes, _outputs=["mean_square"])
        return normalized(op, x, op.Sqrt(either(op, "Add", mean_square, eps)), self._form)

    def check(self, context, x, axes, eps, mean_square, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype not in FLOAT_TYPES:
            return result.fail("RMSNormalization takes float tensors", x)
        if not keeps_dims(mean_square.producer()):
            return result.fail("the mean drops the reduced axes")
        k = trailing_axes(axes, x)
        if k is None or static_tail(x, k) is None:
            return result.fail("the mean is not over last axes of static dims", axes)
        if scalar(eps) is None or (rank(eps) or 0) > rank(x):
            return result.fail("epsilon is not a one-element constant", eps)
        return result

    def rewrite(self, op, x, axes, eps, **_):
        k = trailing_axes(axes, x)
        unit = ones(op, static_tail(x, k), x.dtype)
        return op.RMSNormalization(x, unit, axis=-k, epsilon=scalar(eps))


RULES = [*(RMSNormFormula(form) for form in NORMALIZED_FORMS),
         *(NormScale("RMSNormalization", swap) for swap in (False, True))]


class RMSNormFusionPass(FusionPass):
    """Fuse the RMS-norm formula into ``RMSNormalization`` in the main graph, subgraphs and local
    functions (opset 23 models)."""

    def __init__(self):
        super().__init__(RULES, frozenset({"ReduceMean", "RMSNormalization"}))
