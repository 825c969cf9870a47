"""LayerNormalization fusion (opset >= 17) from the mean / variance formula.

Matches ``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`` over the last k axes of a float
``x`` whose normalized dims are static (the square as ``Pow(d, 2)`` or ``d * d``, the division
as ``/ Sqrt(...)`` or ``* Reciprocal(Sqrt(...))``, ``eps`` a one-element constant), and replaces
it by ``LayerNormalization(x, ones, axis=-k, epsilon=eps)``; a following ``* scale`` and
``+ bias`` of the normalized shape are then folded in (see ``_norm``).

Semantics: ONNX LayerNormalization-17 (https://onnx.ai/onnx/operators/onnx__LayerNormalization.html).
"""

from __future__ import annotations

from onnxscript.rewriter import pattern

from onnxport.optimize._norm import LayerNormBias, NormFormula, NormScale
from onnxport.optimize._patterns import (NORMALIZED_FORMS, FusionPass, either, keeps_dims, normalized, number,
                                         trailing_axes)


class LayerNormFormula(NormFormula):
    """The layer-norm formula ending with one form of the division (see ``NormFormula``)."""

    op_type = "LayerNormalization"

    def pattern(self, op, x, axes, var_axes, eps):
        d = op.Sub(x, op.ReduceMean(x, axes, _outputs=["mean"]))
        square = pattern.OrValue([op.Pow(d, number(2.0)), op.Mul(d, d)])
        var = op.ReduceMean(square, var_axes, _outputs=["var"])
        return normalized(op, d, op.Sqrt(either(op, "Add", var, eps)), self.form)

    def check_formula(self, result, x, axes, var_axes, mean, var, **_) -> pattern.MatchResult:
        if not (keeps_dims(mean.producer()) and keeps_dims(var.producer())):
            return result.fail("a mean drops the reduced axes")
        if trailing_axes(var_axes, x) != trailing_axes(axes, x):
            return result.fail("the means are not over the same axes", var_axes)
        return result


RULES = [*(LayerNormFormula(form) for form in NORMALIZED_FORMS),
         *(NormScale("LayerNormalization", swap) for swap in (False, True)),
         *(LayerNormBias(swap) for swap in (False, True))]


class LayerNormFusionPass(FusionPass):
    """Fuse the layer-norm formula into ``LayerNormalization`` in the main graph, subgraphs and
    local functions."""

    def __init__(self):
        super().__init__(RULES, frozenset({"ReduceMean", "LayerNormalization"}))
