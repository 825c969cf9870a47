"""Target ``genai-cpu``'s RMS norms: each RMS norm as the standard export writes it,

    y = w * (s * Reciprocal(Sqrt(ReduceMean(Pow(s, 2), [-1], keepdims) + eps)))

as one node, as onnxruntime-genai's model builder writes it (onnxruntime fuses neither form itself):

* ``fuse_skip_rms_norm``: a norm of a residual sum ``s = Add(a, b)`` (two tensors of the norm's
  shape) as ``com.microsoft.SkipSimplifiedLayerNormalization(a, b, w, epsilon=eps)``, whose fourth
  output is the sum ``s`` the next residual reads;
* ``fuse_rms_norm``: any other, the first layer's (of the embedding alone) or a final one, as
  ``SimplifiedLayerNormalization(s, w, axis=-1, epsilon=eps, stash_type=1)`` of the ONNX domain
  (since version 1), where onnxruntime registers its CPU kernel (``contrib_ops/cpu/cpu_contrib_kernels.cc``:
  ``kOnnxDomain, 1, float, SimplifiedLayerNormalization``) and its schema among its contrib operators;
  the builder's ``make_layernorm`` writes it so. onnx's checker knows no such operator of its
  domain, so its schema (the one onnxruntime registers) is registered with ``onnx.defs`` once, when a
  norm is fused (``register_simplified_norm``).

Semantics: onnxruntime's ``docs/ContribOperators.md`` (``SkipSimplifiedLayerNormalization``:
``input + skip`` normalized by the root mean square over the last axis, scaled by ``gamma``); its
``SimplifiedLayerNormalization`` is the same without the skip (``stash_type=1``: computed in float32),
checked against the standard nodes on the genai-cpu target's check sizes (``tests/targets``).
"""

from __future__ import annotations

import onnx_ir as ir

from onnxport.targets.genai_attention import MS_DOMAIN
from onnxport.targets.names import FreshNames

SIMPLIFIED_NORM = "SimplifiedLayerNormalization"  # of the ONNX domain (onnxruntime's registration)


def register_simplified_norm() -> None:
    """``SimplifiedLayerNormalization`` (ONNX domain, since version 1) in ``onnx.defs``' registry, as
    onnxruntime declares it (inputs ``X``, ``scale``; output ``Y`` and optional ``inv_std_var``;
    attributes ``axis``, ``epsilon``, ``stash_type``), so that ``onnx.checker`` accepts the node;
    once per process."""
    from onnx import defs

    if defs.has(SIMPLIFIED_NORM):
        return
    schema = defs.OpSchema
    floats = ["tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"]
    defs.register_schema(schema(
        SIMPLIFIED_NORM, "", 1, doc="onnxruntime's RMS norm over the axes from `axis` on, scaled by `scale`",
        inputs=[schema.FormalParameter("X", "T"), schema.FormalParameter("scale", "V")],
        outputs=[schema.FormalParameter("Y", "V"),
                 schema.FormalParameter("inv_std_var", "U", param_option=schema.FormalParameterOption.Optional)],
        type_constraints=[("T", floats, ""), ("U", ["tensor(float)", "tensor(double)"], ""), ("V", floats, "")],
        attributes=[schema.Attribute("axis", schema.AttrType.INT, "", required=False),
                    schema.Attribute("epsilon", schema.AttrType.FLOAT, "", required=False),
                    schema.Attribute("stash_type", schema.AttrType.INT, "", required=False)]))


def _const(value: ir.Value | None) -> float | None:
    if value is None or value.const_value is None or value.const_value.numpy().size != 1:
        return None
    return float(value.const_value.numpy().reshape(-1)[0])


def _single_use(value: ir.Value, op_type: str) -> ir.Node | None:
    uses = list(value.uses())
    return uses[0].node if len(uses) == 1 and uses[0].node.op_type == op_type else None


def _match(power: ir.Node) -> tuple[ir.Value, ir.Value, float, ir.Node] | None:
    """``(the normed input s, gamma, epsilon, the scaling Mul)`` of the RMS norm over the last axis
    whose ``Pow`` is ``power``, or None."""
    s = power.inputs[0]
    if _const(power.inputs[1]) != 2.0 or s is None or s.shape is None:
        return None
    mean = _single_use(power.outputs[0], "ReduceMean")
    if mean is None or mean.attributes.get("keepdims") is None or mean.attributes["keepdims"].value != 1:
        return None
    axes = mean.inputs[1] if len(mean.inputs) > 1 else None
    if axes is None or axes.const_value is None or \
            axes.const_value.numpy().reshape(-1).tolist() not in ([-1], [len(s.shape) - 1]):
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
    return s, gamma, eps, scaled


def _residual(s: ir.Value) -> ir.Node | None:
    """The ``Add`` of two tensors of ``s``'s shape making ``s``, or None."""
    residual = s.producer()
    if residual is None or residual.op_type != "Add" or residual.domain not in ("", "ai.onnx") or any(
            v is None or v.shape is None or list(v.shape) != list(s.shape) for v in residual.inputs):
        return None
    return residual


def _take_place(before: ir.Value, after: ir.Value) -> None:
    after.type, after.shape = before.type, before.shape
    name = before.name
    before.replace_all_uses_with(after, replace_graph_outputs=True)
    before.name, after.name = None, name


def _norms(model: ir.Model) -> list[tuple[ir.Value, ir.Value, float, ir.Node]]:
    return [found for power in [n for n in model.graph if n.op_type == "Pow" and n.domain in ("", "ai.onnx")]
            if (found := _match(power)) is not None]


def fuse_skip_rms_norm(model: ir.Model) -> int:
    """Every RMS norm of a residual sum in ``model``'s main graph as
    ``SkipSimplifiedLayerNormalization`` (module docstring), in place; the old nodes left unread.
    Returns how many were fused."""
    fresh = FreshNames(model)
    count = 0
    for s, gamma, eps, scaled in _norms(model):
        residual = _residual(s)
        if residual is None:
            continue
        node = ir.Node(MS_DOMAIN, "SkipSimplifiedLayerNormalization", [residual.inputs[0], residual.inputs[1], gamma],
                       attributes=[ir.AttrFloat32("epsilon", eps)], num_outputs=4)
        node.outputs[0].name, node.outputs[3].name = fresh("skip_norm"), fresh("skip_norm_sum")
        model.graph.append(node)
        _take_place(scaled.outputs[0], node.outputs[0])
        _take_place(residual.outputs[0], node.outputs[3])
        count += 1
    if count:
        model.opset_imports.setdefault(MS_DOMAIN, 1)
    return count


def fuse_rms_norm(model: ir.Model) -> int:
    """Every RMS norm of ``model``'s main graph (module docstring; run after ``fuse_skip_rms_norm``:
    the norms left, of no residual sum) as ``SimplifiedLayerNormalization``, in place; the old
    nodes left unread. Returns how many were fused."""
    fresh = FreshNames(model)
    count = 0
    for s, gamma, eps, scaled in _norms(model):
        node = ir.Node("", SIMPLIFIED_NORM, [s, gamma], attributes=[
            ir.AttrInt64("axis", -1), ir.AttrFloat32("epsilon", eps), ir.AttrInt64("stash_type", 1)])
        node.outputs[0].name = fresh("rms_norm")
        model.graph.append(node)
        _take_place(scaled.outputs[0], node.outputs[0])
        count += 1
    if count:
        register_simplified_norm()
    return count
