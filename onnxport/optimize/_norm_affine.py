"""The affine step after a normalization, folded into the normalization node.

``Norm(x, ones) * scale`` becomes ``Norm(x, scale)`` and ``LayerNormalization(x, scale) + bias``
becomes ``LayerNormalization(x, scale, bias)``, when ``scale`` and ``bias`` have exactly the
normalized shape (the static dims of ``x`` from ``axis`` on) and ``x``'s dtype. The formula rules of
``fuse_layer_norm`` and ``fuse_rms_norm`` produce ``Norm(x, ones)``; these rules then take the
affine parameters written after the formula.

Semantics: ONNX LayerNormalization-17 and RMSNormalization-23
(``Y = normalized(X) * Scale (+ B)``, https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import pattern

from onnxport.optimize._patterns import Rule, all_ones, rank, shaped, static_tail


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
