"""Gelu fusion (opset >= 20) from the erf and tanh formulas.

- erf: ``0.5 * x * (1 + erf(x / sqrt(2)))`` (``x * 0.7071...`` too, products in any grouping);
- tanh: ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` -> ``Gelu(approximate="tanh")``.

Semantics: ONNX Gelu (https://onnx.ai/onnx/operators/onnx__Gelu.html); torch.nn.GELU.
"""

from __future__ import annotations

import math

from onnxport.optimize._patterns import FLOAT_TYPES, only_consumer, operands, scalar
from onnxport.optimize._scopes import ScopedPass, is_scalar_const, make_node, producer_op, prune, replace_value

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _other(node, value):
    """The input of a two-input ``node`` that is not ``value`` (None when ``value`` is not one)."""
    a, b = node.inputs
    return b if a is value else a if b is value else None


def _scaled_by(value, target: float):
    """``x`` when ``value`` is ``x * target`` (or ``x / (1 / target)``)."""
    node = producer_op(value, "Mul")
    if node is not None:
        pair = operands(node, first_test=lambda v: is_scalar_const(v, target))
        return pair[1] if pair is not None else None
    node = producer_op(value, "Div")
    if node is not None and is_scalar_const(node.inputs[1], 1.0 / target):
        return node.inputs[0]
    return None


def _cube(value, x) -> bool:
    node = producer_op(value, "Pow")
    if node is not None:
        return node.inputs[0] is x and scalar(node.inputs[1]) == 3.0
    node = producer_op(value, "Mul")
    if node is None:
        return False
    a, b = node.inputs
    sq = producer_op(a, "Mul") if b is x else producer_op(b, "Mul") if a is x else None
    return sq is not None and sq.inputs[0] is x and sq.inputs[1] is x


def _erf_argument(node):
    return _scaled_by(node.inputs[0], 1.0 / math.sqrt(2.0))


def _tanh_argument(node):
    inner = _scaled_by(node.inputs[0], _SQRT_2_OVER_PI)
    add = producer_op(inner, "Add") if inner is not None else None
    if add is None:
        return None
    for x, cubic in (add.inputs, reversed(add.inputs)):
        c = _scaled_by(cubic, 0.044715)
        if c is not None and _cube(c, x):
            return x
    return None


class GeluFusionPass(ScopedPass):
    """Fuse the Gelu formulas into ``Gelu`` in every scope (opset 20 models)."""

    def rewrite(self, scope) -> bool:
        modified = False
        for node in list(scope):
            if node.graph is None or node.domain != "" or node.op_type not in ("Erf", "Tanh"):
                continue
            x = _erf_argument(node) if node.op_type == "Erf" else _tanh_argument(node)
            if x is None or x.dtype not in FLOAT_TYPES:
                continue
            top = self._outer_product(node.outputs[0], x)
            if top is None:
                continue
            attrs = {"approximate": "tanh"} if node.op_type == "Tanh" else {}
            gelu = make_node(scope, top.producer(), "Gelu", [x], attrs)
            if replace_value(top, gelu.outputs[0]):
                prune(top.producer())
                modified = True
            else:
                scope.remove(gelu, safe=True)
        return modified

    @staticmethod
    def _outer_product(fn_out, x):
        """The value ``0.5 * x * (1 + fn_out)`` in any grouping of the two products, or None."""
        add = only_consumer(fn_out, "Add")
        if add is None or not is_scalar_const(_other(add, fn_out), 1.0):
            return None
        m1 = only_consumer(add.outputs[0], "Mul")
        if m1 is None:
            return None
        other = _other(m1, add.outputs[0])
        if other is x or is_scalar_const(other, 0.5):  # (x * (1 + f)) * 0.5 or (0.5 * (1 + f)) * x
            m2 = only_consumer(m1.outputs[0], "Mul")
            if m2 is None:
                return None
            rest = _other(m2, m1.outputs[0])
            want_half = other is x
            if (want_half and is_scalar_const(rest, 0.5)) or (not want_half and rest is x):
                return m2.outputs[0]
            return None
        if _scaled_by(other, 0.5) is x:  # (x * 0.5) * (1 + f)
            return m1.outputs[0]
        return None
