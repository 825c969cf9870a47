"""BatchNormalization (inference) folded into the Conv before it.

``BatchNormalization(Conv(x, W, B), scale, bias, mean, var, epsilon)`` with every parameter
constant, a float ``x`` and the Conv used only there becomes ``Conv(x, W * f, (B - mean) * f + bias)``
where ``f = scale / sqrt(var + epsilon)`` per output channel (computed in float64). A weight or bias
initializer read only by this Conv takes the folded values and keeps its name; otherwise the
folded values are new constants.

Semantics: ONNX Conv and BatchNormalization-15 in inference mode (``training_mode=0``)
(https://onnx.ai/onnx/operators/onnx__BatchNormalization.html).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter import pattern

from onnxport.optimize._patterns import FLOAT_TYPES, FusionPass, Rule
from onnxport.optimize._scopes import const_array, is_constant


def _conv_bias(conv: ir.Node) -> ir.Value | None:
    return conv.inputs[2] if len(conv.inputs) > 2 else None


def _updated(op, value: ir.Value | None, array: np.ndarray) -> ir.Value:
    """``value`` holding ``array`` now when it is an initializer read only by the matched Conv (it
    keeps its name), else a new constant."""
    if value is not None and value.is_initializer() and not value.is_graph_input() and len(value.uses()) == 1:
        value.const_value = ir.tensor(array, name=value.name)
        return value
    return op.Constant(value=ir.tensor(array))


class ConvBatchNorm(Rule):
    """``BatchNormalization(Conv(x, W[, B]), ...)`` -> ``Conv(x, W', B')``."""

    root_op = "BatchNormalization"

    def pattern(self, op, x, w, scale, bias, mean, var):
        conv = op.Conv(x, w, _allow_other_inputs=True, _outputs=["conv"])
        return op.BatchNormalization(conv, scale, bias, mean, var, _outputs=["bn"])

    def check(self, context, x, w, scale, bias, mean, var, conv, bn, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        node = bn.producer()
        if len(node.outputs) != 1 or node.attributes.get_int("training_mode", 0) != 0:
            return result.fail("BatchNormalization in training mode", node)
        if x.dtype not in FLOAT_TYPES:
            return result.fail("Conv input is not a float tensor", x)
        b = _conv_bias(conv.producer())
        params = [w, scale, bias, mean, var] + ([b] if b is not None else [])
        if not all(is_constant(p) for p in params):
            return result.fail("a weight or a statistic is not constant")
        return result

    def rewrite(self, op, x, w, scale, bias, mean, var, conv, bn, **_):
        node = conv.producer()
        weights, b = const_array(w), _conv_bias(node)
        s, beta, mu, v = (const_array(p).astype(np.float64) for p in (scale, bias, mean, var))
        f = s / np.sqrt(v + bn.producer().attributes.get_float("epsilon", 1e-5))
        new_w = (weights.astype(np.float64) * f.reshape((-1,) + (1,) * (weights.ndim - 1))).astype(weights.dtype)
        b64 = const_array(b).astype(np.float64) if b is not None else np.zeros_like(f)
        new_b = ((b64 - mu) * f + beta).astype(weights.dtype)
        return op.Conv(x, _updated(op, w, new_w), _updated(op, b, new_b), **node.attributes)


RULES = [ConvBatchNorm()]


class ConvBatchNormFusionPass(FusionPass):
    """Fold inference BatchNormalization into the preceding Conv in the main graph, subgraphs and
    local functions."""

    def __init__(self):
        super().__init__(RULES, frozenset({"BatchNormalization"}))
