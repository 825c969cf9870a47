"""Target ``genai-cpu``'s ``SkipSimplifiedLayerNormalization``: an RMS norm of a residual sum, as the
standard export writes it,

    s = Add(a, b);  y = w * (s * Reciprocal(Sqrt(ReduceMean(Pow(s, 2), [-1], keepdims) + eps)))

as ``com.microsoft.SkipSimplifiedLayerNormalization(a, b, w, epsilon=eps)``, whose fourth output is
the sum ``s`` the next residual reads, as onnxruntime-genai's model builder writes it (onnxruntime
fuses neither form itself). A norm not reading an ``Add`` of two tensors of the norm's shape (the
first layer's, of the embedding) is left as it is.

Semantics: onnxruntime's ``docs/ContribOperators.md`` (``SkipSimplifiedLayerNormalization``:
``input + skip`` normalized by the root mean square over the last axis, scaled by ``gamma``).
"""

from __future__ import annotations

import onnx_ir as ir

from onnxport.targets.genai_attention import MS_DOMAIN
from onnxport.targets.names import FreshNames


def _const(value: ir.Value | None) -> float | None:
    if value is None or value.const_value is None or value.const_value.numpy().size != 1:
        return None
    return float(value.const_value.numpy().reshape(-1)[0])


def _single_use(value: ir.Value, op_type: str) -> ir.Node | None:
    uses = list(value.uses())
    return uses[0].node if len(uses) == 1 and uses[0].node.op_type == op_type else None


def _match(power: ir.Node) -> tuple[ir.Node, ir.Value, float, ir.Node] | None:
    """``(the residual Add, gamma, epsilon, the scaling Mul)`` of the norm whose ``Pow`` is ``power``, or None."""
    s = power.inputs[0]
    if _const(power.inputs[1]) != 2.0:
        return None
    mean = _single_use(power.outputs[0], "ReduceMean")
    if mean is None or mean.attributes.get("keepdims") is None or mean.attributes["keepdims"].value != 1:
        return None
    axes = mean.inputs[1] if len(mean.inputs) > 1 else None
    if axes is None or axes.const_value is None or axes.const_value.numpy().reshape(-1).tolist() not in ([-1], [2]):
        return None
    add_eps = _single_use(mean.outputs[0], "Add")
    eps = _const(next((v for v in add_eps.inputs if v is not mean.outputs[0]), None)) if add_eps else None
    sqrt = _single_use(add_eps.outputs[0], "Sqrt") if add_eps is not None else None
    recip = _single_use(sqrt.outputs[0], "Reciprocal") if sqrt is not None else None
    normed = _single_use(recip.outputs[0], "Mul") if recip is not None else None
    if eps is None or normed is None or s not in normed.inputs:
        return None
    scaled = _single_use(normed.outputs[0], "Mul")
    gamma = next((v for v in scaled.inputs if v is not normed.outputs[0]), None) if scaled is not None else None
    if gamma is None or gamma.const_value is None or len(gamma.shape or ()) != 1:
        return None
    residual = s.producer()
    if residual is None or residual.op_type != "Add" or residual.domain not in ("", "ai.onnx") or any(
            v is None or v.shape is None or s.shape is None or list(v.shape) != list(s.shape) for v in residual.inputs):
        return None
    return residual, gamma, eps, scaled


def fuse_skip_rms_norm(model: ir.Model) -> int:
    """Every RMS norm of a residual sum in ``model``'s main graph as
    ``SkipSimplifiedLayerNormalization`` (module docstring), in place; the old nodes left unread.
    Returns how many were fused."""
    graph = model.graph
    fresh = FreshNames(model)
    count = 0
    for power in [n for n in graph if n.op_type == "Pow" and n.domain in ("", "ai.onnx")]:
        found = _match(power)
        if found is None:
            continue
        residual, gamma, eps, scaled = found
        node = ir.Node(MS_DOMAIN, "SkipSimplifiedLayerNormalization", [residual.inputs[0], residual.inputs[1], gamma],
                       attributes=[ir.AttrFloat32("epsilon", eps)], num_outputs=4)
        node.outputs[0].name, node.outputs[3].name = fresh("skip_norm"), fresh("skip_norm_sum")
        graph.append(node)
        for before, after in ((scaled.outputs[0], node.outputs[0]), (residual.outputs[0], node.outputs[3])):
            after.type, after.shape = before.type, before.shape
            name = before.name
            before.replace_all_uses_with(after, replace_graph_outputs=True)
            before.name, after.name = None, name
        count += 1
    if count:
        model.opset_imports.setdefault(MS_DOMAIN, 1)
    return count
