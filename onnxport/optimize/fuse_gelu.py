"""Gelu fusion (opset >= 20): the erf and tanh formulas become ``Gelu``.

- erf: ``0.5 * x * (1 + erf(x / sqrt(2)))`` (``x * 0.7071...`` too) -> ``Gelu(x)``;
- tanh: ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` (``x^3`` as ``Pow(x, 3)`` or
  ``x * x * x``) -> ``Gelu(x, approximate="tanh")``.

The two outer products may be grouped as ``(0.5 * x) * p``, ``(x * p) * 0.5`` or ``x * (0.5 * p)``;
every product and sum may take its operands in either order and a product by ``c`` may be written
as a division by ``1 / c``. ``x`` is a float tensor.

Semantics: ONNX Gelu-20 (https://onnx.ai/onnx/operators/onnx__Gelu.html); torch.nn.GELU.
"""

from __future__ import annotations

import math

from onnxscript.rewriter import pattern

from onnxport.optimize._patterns import (FLOAT_TYPES, FusionPass, Rule, either, keeps_rank, number,
                                         reads_overridable_constant, scaled)

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _erf_term(op, x):
    """``1 + erf(x / sqrt(2))``."""
    return either(op, "Add", op.Erf(scaled(op, x, _SQRT_HALF)), number(1.0))


def _tanh_term(op, x):
    """``1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))``."""
    cube = pattern.OrValue([op.Pow(x, number(3.0)), either(op, "Mul", op.Mul(x, x), x)])
    inner = either(op, "Add", x, scaled(op, cube, 0.044715))
    return either(op, "Add", op.Tanh(scaled(op, inner, _SQRT_2_OVER_PI)), number(1.0))


class GeluFormula(Rule):
    """``0.5 * x * term`` with one grouping of the products and one operand order of the last.

    Args:
        approximate: ``"none"`` (erf formula) or ``"tanh"``.
        grouping: ``"half_x"`` for ``(0.5 * x) * term``, ``"x_term"`` for ``(x * term) * 0.5``,
            ``"half_term"`` for ``x * (0.5 * term)``.
        swap: the last product takes its operands in the other order.
    """

    def __init__(self, approximate: str, grouping: str, swap: bool):
        super().__init__(f"Gelu_{approximate}_{grouping}{'_swapped' if swap else ''}")
        self._approximate, self._grouping, self._swap = approximate, grouping, swap
        self.root_op = "Mul"

    def pattern(self, op, x):
        term = (_tanh_term if self._approximate == "tanh" else _erf_term)(op, x)
        if self._grouping == "half_x":
            a, b = scaled(op, x, 0.5), term
        elif self._grouping == "x_term":
            a, b = either(op, "Mul", x, term), number(0.5)
        else:
            a, b = x, either(op, "Mul", number(0.5), term)
        return op.Mul(b, a) if self._swap else op.Mul(a, b)

    def check(self, context, x, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype not in FLOAT_TYPES:
            return result.fail("Gelu takes float tensors", x)
        if not keeps_rank(context, x):
            return result.fail("a constant of higher rank broadcasts x", x)
        if reads_overridable_constant(context):
            return result.fail("a constant of the formula is a graph input")
        return result

    def rewrite(self, op, x, **_):
        if self._approximate == "tanh":
            return op.Gelu(x, approximate="tanh")
        return op.Gelu(x)


RULES = [GeluFormula(approximate, grouping, swap)
         for approximate in ("none", "tanh")
         for grouping in ("half_x", "x_term", "half_term")
         for swap in (False, True)]


class GeluFusionPass(FusionPass):
    """Fuse the Gelu formulas into ``Gelu`` in the main graph, subgraphs and local functions."""

    def __init__(self):
        super().__init__(RULES, frozenset({"Erf", "Tanh"}))
