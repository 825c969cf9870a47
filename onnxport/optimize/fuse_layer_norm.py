"""LayerNormalization fusion (opset >= 17) from the mean / variance formula.

Matches ``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`` over the last k axes of a float
``x`` whose normalized dims are static (the square as ``Pow(d, 2)`` or ``d * d``, the division
as ``/ Sqrt(...)`` or ``* Reciprocal(Sqrt(...))``, ``eps`` a one-element constant), and replaces
it by ``LayerNormalization(x, ones, axis=-k, epsilon=eps)``; a following ``* scale`` and
``+ bias`` of the normalized shape are then folded in (see ``_norm_affine``).

Semantics: ONNX LayerNormalization-17 (https://onnx.ai/onnx/operators/onnx__LayerNormalization.html).
"""

from __future__ import annotations

from onnxscript.rewriter import pattern

from onnxport.optimize._norm_affine import LayerNormBias, NormScale
from onnxport.optimize._patterns import (FLOAT_TYPES, NORMALIZED_FORMS, FusionPass, Rule, either, keeps_dims, normalized,
                                         number, ones, rank, static_tail, trailing_axes)
from onnxport.optimize._scopes import scalar


class LayerNormFormula(Rule):
    """The layer-norm formula ending with one form of the division.

    Args:
        form: ``"div"``, ``"mul"`` or ``"rmul"`` (see ``_patterns.normalized``).
    """

    def __init__(self, form: str):
        super().__init__(f"LayerNormFormula_{form}")
        self._form = form
        self.root_op = "Div" if form == "div" else "Mul"

    def pattern(self, op, x, axes, var_axes, eps):
        d = op.Sub(x, op.ReduceMean(x, axes, _outputs=["mean"]))
        square = pattern.OrValue([op.Pow(d, number(2.0)), op.Mul(d, d)])
        var = op.ReduceMean(square, var_axes, _outputs=["var"])
        return normalized(op, d, op.Sqrt(either(op, "Add", var, eps)), self._form)

    def check(self, context, x, axes, var_axes, eps, mean, var, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype not in FLOAT_TYPES:
            return result.fail("LayerNormalization takes float tensors", x)
        if not (keeps_dims(mean.producer()) and keeps_dims(var.producer())):
            return result.fail("a mean drops the reduced axes")
        k = trailing_axes(axes, x)
        if k is None or trailing_axes(var_axes, x) != k:
            return result.fail("the means are not over the same last axes", axes)
        if static_tail(x, k) is None:
            return result.fail("the normalized dims are not static", x)
        if scalar(eps) is None or (rank(eps) or 0) > rank(x):
            return result.fail("epsilon is not a one-element constant", eps)
        return result

    def rewrite(self, op, x, axes, eps, **_):
        k = trailing_axes(axes, x)
        unit = ones(op, static_tail(x, k), x.dtype)
        return op.LayerNormalization(x, unit, axis=-k, epsilon=scalar(eps))


RULES = [*(LayerNormFormula(form) for form in NORMALIZED_FORMS),
         *(NormScale("LayerNormalization", swap) for swap in (False, True)),
         *(LayerNormBias(swap) for swap in (False, True))]


class LayerNormFusionPass(FusionPass):
    """Fuse the layer-norm formula into ``LayerNormalization`` in the main graph, subgraphs and
    local functions."""

    def __init__(self):
        super().__init__(RULES, frozenset({"ReduceMean", "LayerNormalization"}))
