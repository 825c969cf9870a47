"""Attention fusion (opset >= 23, on request): scaled dot-product attention into ``Attention``.

Matches ``MatMul(Softmax(scale * (q @ k^T) [+ mask], axis=-1), v)`` on 4-D ``[batch, heads, seq,
head_dim]`` operands, with the scale applied to the scores (``Mul``/``Div``) and/or to ``q`` and
``k`` separately, ``k^T`` a ``Transpose`` swapping the last two axes; it becomes
``Attention(q, k, v[, mask], scale=s)``.

Semantics: ONNX Attention-23 (https://onnx.ai/onnx/operators/onnx__Attention.html);
torch.nn.functional.scaled_dot_product_attention.
"""

from __future__ import annotations

from onnxport.optimize._patterns import FLOAT_TYPES, operands, scalar
from onnxport.optimize._scopes import (ScopedPass, attr_int, attr_ints, make_node, producer_op, prune,
                                       replace_value)


def _unscale(value):
    """(v, factor) peeling ``Mul`` by a scalar constant / ``Div`` by one off ``value``."""
    factor = 1.0
    while True:
        node = producer_op(value, "Mul")
        pair = operands(node, first_test=lambda v: scalar(v) is not None) if node is not None else None
        if pair is not None:
            factor *= scalar(pair[0])
            value = pair[1]
            continue
        node = producer_op(value, "Div")
        if node is not None and scalar(node.inputs[1]):
            factor /= scalar(node.inputs[1])
            value = node.inputs[0]
            continue
        return value, factor


class AttentionFusionPass(ScopedPass):
    """Fuse scaled dot-product attention subgraphs into ``Attention`` in every scope."""

    def rewrite(self, scope) -> bool:
        modified = False
        for node in list(scope):
            if node.graph is None or node.domain != "" or node.op_type != "Softmax":
                continue
            modified |= self._fuse(scope, node)
        return modified

    def _fuse(self, scope, softmax) -> bool:
        probs = softmax.outputs[0]
        if len(probs.uses()) != 1 or probs.is_graph_output():
            return False
        out_mm = next(iter(probs.uses())).node
        if out_mm.op_type != "MatMul" or out_mm.inputs[0] is not probs:
            return False
        v = out_mm.inputs[1]
        scores = softmax.inputs[0]
        if attr_int(softmax, "axis", -1) not in (-1, 3):
            return False
        mask = None
        add = producer_op(scores, "Add")
        if add is not None:
            scores, mask = add.inputs
            if producer_op(scores, "MatMul") is None and producer_op(_unscale(scores)[0], "MatMul") is None:
                scores, mask = mask, scores
        scores, scale = _unscale(scores)
        qk = producer_op(scores, "MatMul")
        if qk is None:
            return False
        q, s_q = _unscale(qk.inputs[0])
        kt, s_k1 = _unscale(qk.inputs[1])
        t = producer_op(kt, "Transpose")
        if t is None or attr_ints(t, "perm") != [0, 1, 3, 2]:
            return False
        k, s_k2 = _unscale(t.inputs[0])
        for val in (q, k, v):
            if val.shape is None or len(val.shape) != 4 or val.dtype not in FLOAT_TYPES:
                return False
        if mask is not None and (mask.shape is None or mask.dtype != q.dtype):
            return False
        total = scale * s_q * s_k1 * s_k2
        inputs = [q, k, v] + ([mask] if mask is not None else [])
        att = make_node(scope, out_mm, "Attention", inputs, {"scale": float(total)})
        if not replace_value(out_mm.outputs[0], att.outputs[0]):
            scope.remove(att, safe=True)
            return False
        prune(out_mm)
        return True
