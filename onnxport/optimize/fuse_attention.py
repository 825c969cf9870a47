"""Attention fusion (opset >= 23, on request): scaled dot-product attention into ``Attention``.

The pattern is ``MatMul(Softmax(scores, axis=-1), v)`` with the Softmax used only there; the check
reads ``scores`` back: ``scale * (q @ k^T) [+ mask]`` on 4-D ``[batch, heads, seq, head_dim]`` float
operands, ``k^T`` a ``Transpose(perm=[0, 1, 3, 2])``, the scale any number of products by (or
divisions by) one-element constants on the scores, on ``q`` and on ``k``, before or after the
Transpose; ``mask`` (either operand of the Add) of ``q``'s dtype. It becomes
``Attention(q, k, v[, mask], scale=s)`` with ``s`` the product of the scalings. The score
computation left unused is removed by dead-node removal.

Semantics: ONNX Attention-23 (https://onnx.ai/onnx/operators/onnx__Attention.html);
torch.nn.functional.scaled_dot_product_attention.
"""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import pattern

from onnxport.optimize._patterns import FLOAT_TYPES, FusionPass, Rule, rank
from onnxport.optimize._scopes import scalar


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type == op_type and node.domain == "" else None


def _unscale(value: ir.Value) -> tuple[ir.Value, float]:
    """(v, factor) with ``value = v * factor``, peeling products by (and divisions by) one-element
    constants off ``value``."""
    factor = 1.0
    while True:
        node = _producer(value, "Mul")
        if node is not None:
            a, b = node.inputs
            if scalar(b) is not None or scalar(a) is not None:
                c, value = (b, a) if scalar(b) is not None else (a, b)
                factor *= scalar(c)
                continue
        node = _producer(value, "Div")
        if node is not None and scalar(node.inputs[1]):
            factor /= scalar(node.inputs[1])
            value = node.inputs[0]
            continue
        return value, factor


def _qk(scores: ir.Value) -> tuple[ir.Value, ir.Value, float] | None:
    """(q, k, scale) when ``scores`` is ``scale * (q @ Transpose(k, [0, 1, 3, 2]))``."""
    scores, scale = _unscale(scores)
    qk = _producer(scores, "MatMul")
    if qk is None:
        return None
    q, s_q = _unscale(qk.inputs[0])
    kt, s_kt = _unscale(qk.inputs[1])
    t = _producer(kt, "Transpose")
    if t is None or list(t.attributes.get_ints("perm", [])) != [0, 1, 3, 2]:
        return None
    k, s_k = _unscale(t.inputs[0])
    return q, k, scale * s_q * s_kt * s_k


def _analyse(scores: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value | None, float] | None:
    """(q, k, mask, scale) read from the Softmax input, or None."""
    found = _qk(scores)
    if found is not None:
        return (*found[:2], None, found[2])
    add = _producer(scores, "Add")
    if add is None:
        return None
    for s, mask in (add.inputs, reversed(add.inputs)):
        found = _qk(s)
        if found is not None:
            return found[0], found[1], mask, found[2]
    return None


class ScaledDotProductAttention(Rule):
    """``MatMul(Softmax(scale * q @ k^T [+ mask]), v)`` -> ``Attention(q, k, v[, mask], scale)``."""

    root_op = "MatMul"

    def pattern(self, op, scores, v):
        return op.MatMul(op.Softmax(scores, _outputs=["probs"]), v)

    def check(self, context, scores, v, probs, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if probs.producer().attributes.get_int("axis", -1) not in (-1, 3):
            return result.fail("Softmax is not over the last axis", probs)
        found = _analyse(scores)
        if found is None:
            return result.fail("the scores are not scaled q @ k^T", scores)
        q, k, mask, _ = found
        if any(rank(t) != 4 or t.dtype not in FLOAT_TYPES for t in (q, k, v)):
            return result.fail("q, k, v are not 4-D float tensors")
        if mask is not None and (mask.shape is None or mask.dtype != q.dtype):
            return result.fail("the mask is not of q's dtype", mask)
        return result

    def rewrite(self, op, scores, v, **_):
        q, k, mask, scale = _analyse(scores)
        inputs = [q, k, v] + ([mask] if mask is not None else [])
        return op.Attention(*inputs, scale=float(scale))


RULES = [ScaledDotProductAttention()]


class AttentionFusionPass(FusionPass):
    """Fuse scaled dot-product attention into ``Attention`` in the main graph, subgraphs and local
    functions (opset 23 models, on request)."""

    def __init__(self):
        super().__init__(RULES, frozenset({"Softmax"}))
