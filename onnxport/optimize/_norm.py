"""What the normalization fusions share: the formula rule, and the affine step folded in after it.

``NormFormula`` is the base of the LayerNormalization and RMSNormalization formula rules: the
formula over the last k axes of a float ``x`` with static normalized dims, ending with a division
by a standard deviation in one of three forms, becomes ``Norm(x, ones, axis=-k, epsilon=eps)``.

The affine step: ``Norm(x, ones) * scale`` becomes ``Norm(x, scale)`` and
``LayerNormalization(x, scale) + bias`` becomes ``LayerNormalization(x, scale, bias)``, when
``scale`` and ``bias`` have exactly the normalized shape (the static dims of ``x`` from ``axis`` on)
and ``x``'s dtype; so the formula rules need not spell the affine parameters written after them.

Semantics: ONNX LayerNormalization-17 and RMSNormalization-23
(``Y = normalized(X) * Scale (+ B)``, https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import pattern

from onnxport.optimize._patterns import (FLOAT_TYPES, Rule, all_ones, ones, rank, shaped, static_tail,
                                         trailing_axes)
from onnxport.optimize._scopes import scalar


class NormFormula(Rule):
    """Base of a normalization formula rule: the subclass writes ``pattern`` (binding ``x``, the
    reduction ``axes`` and ``eps``) and may add checks in ``check_formula``.

    Args:
        form: ``"div"``, ``"mul"`` or ``"rmul"`` (see ``_patterns.normalized``).
    """

    op_type = ""  # the fused operator

    def __init__(self, form: str):
        super().__init__(f"{type(self).__name__}_{form}")
        self.form = form
        self.root_op = "Div" if form == "div" else "Mul"

    def check_formula(self, result: pattern.MatchResult, x, axes, **bindings) -> pattern.MatchResult:
        """Checks of the subclass's formula beyond the shared ones; ``result`` unless one fails."""
        return result

    def check(self, context, x, axes, eps, **bindings) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype not in FLOAT_TYPES:
            return result.fail(f"{self.op_type} takes float tensors", x)
        k = trailing_axes(axes, x)
        if k is None or static_tail(x, k) is None:
            return result.fail("the mean is not over last axes of static dims", axes)
        if scalar(eps) is None or (rank(eps) or 0) > rank(x):
            return result.fail("epsilon is not a one-element constant", eps)
        return self.check_formula(result, x, axes, **bindings)

    def rewrite(self, op, x, axes, eps, **_):
        k = trailing_axes(axes, x)
        unit = ones(op, static_tail(x, k), x.dtype)
        return getattr(op, self.op_type)(x, unit, axis=-k, epsilon=scalar(eps))


def normalized_shape(norm: ir.Node) -> list[int] | None:
    """The static dims a LayerNormalization/RMSNormalization node normalizes over, else None."""
    x = norm.inputs[0]
    r = rank(x)
    if r is None:
        return None
    axis = norm.attributes.get_int("axis", -1)
    axis = axis + r if axis < 0 else axis
    return static_tail(x, r - axis) if 0 <= axis < r else None


def _fits(norm: ir.Node, param: ir.Value) -> bool:
    dims = normalized_shape(norm)
    return dims is not None and shaped(param, dims) and param.dtype == norm.inputs[0].dtype


class NormScale(Rule):
    """``op_type(x, ones) * scale`` (either order) -> ``op_type(x, scale)``.

    Args:
        op_type: ``"LayerNormalization"`` or ``"RMSNormalization"``.
        swap: ``scale * op_type(x, ones)``.
    """

    def __init__(self, op_type: str, swap: bool):
        super().__init__(f"{op_type}Scale{'_swapped' if swap else ''}")
        self._op_type, self._swap = op_type, swap
        self.root_op = "Mul"

    def pattern(self, op, x, unit, scale):
        norm = getattr(op, self._op_type)(x, unit, _outputs=["norm"])
        return op.Mul(scale, norm) if self._swap else op.Mul(norm, scale)

    def check(self, context, x, unit, scale, norm, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if not all_ones(unit):
            return result.fail("the normalization already has a scale", unit)
        if not _fits(norm.producer(), scale):
            return result.fail("the factor does not have the normalized shape and dtype", scale)
        return result

    def rewrite(self, op, x, scale, norm, **_):
        return getattr(op, self._op_type)(x, scale, **norm.producer().attributes)


class LayerNormBias(Rule):
    """``LayerNormalization(x, scale) + bias`` (either order) -> ``LayerNormalization(x, scale, bias)``.

    Args:
        swap: ``bias + LayerNormalization(x, scale)``.
    """

    def __init__(self, swap: bool):
        super().__init__(f"LayerNormalizationBias{'_swapped' if swap else ''}")
        self._swap = swap
        self.root_op = "Add"

    def pattern(self, op, x, scale, bias):
        norm = op.LayerNormalization(x, scale, _outputs=["norm"])
        return op.Add(bias, norm) if self._swap else op.Add(norm, bias)

    def check(self, context, x, scale, bias, norm, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if not _fits(norm.producer(), bias):
            return result.fail("the term does not have the normalized shape and dtype", bias)
        return result

    def rewrite(self, op, x, scale, bias, norm, **_):
        return op.LayerNormalization(x, scale, bias, **norm.producer().attributes)
