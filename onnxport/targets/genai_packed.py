"""Target ``genai-cpu``'s packed QKV: the query, key and value projections of one
``GroupQueryAttention`` (three ``MatMul`` of the same input by constant weights, each with or
without a constant bias ``Add``) as one ``MatMul`` by the weights concatenated on the output axis
(and one bias ``Add``), ``Split`` into the three, as onnxruntime-genai's model builder packs them
(``qkv_proj``): one pass over the input instead of three.

Semantics: the concatenation commutes with the product (``x @ [Wq | Wk | Wv] = [x @ Wq | x @ Wk | x @ Wv]``),
so the rewrite is exact.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.targets.builder import Constants
from onnxport.targets.names import FreshNames

REACH = 24  # nodes walked forward from a projection to its attention (rotary, reshapes, transposes), no MatMul


def _weight(node: ir.Node) -> np.ndarray | None:
    w = node.inputs[1]
    return w.const_value.numpy() if w is not None and w.const_value is not None and len(w.shape or ()) == 2 else None


def _attention_of(value: ir.Value) -> ir.Node | None:
    """The ``GroupQueryAttention`` ``value`` reaches within ``REACH`` nodes (the first found), or None."""
    seen, frontier = set(), [value]
    for _ in range(REACH):
        following = []
        for v in frontier:
            for use in v.uses():
                node = use.node
                if node.op_type == "GroupQueryAttention":
                    return node
                if id(node) not in seen and node.op_type != "MatMul":  # another projection's input
                    seen.add(id(node))
                    following.extend(node.outputs)
        frontier = following
    return None


def _biased(node: ir.Node) -> tuple[ir.Value, np.ndarray | None] | None:
    """``(the projection's result, its bias)``: the ``MatMul`` output, or the ``Add`` of a constant
    1-D bias reading it alone; None when the bias is not constant."""
    out = node.outputs[0]
    uses = list(out.uses())
    if len(uses) == 1 and uses[0].node.op_type == "Add":
        add = uses[0].node
        other = add.inputs[1] if add.inputs[0] is out else add.inputs[0]
        if other.const_value is not None and len(other.shape or ()) == 1:
            return add.outputs[0], other.const_value.numpy()
    return out, None


def pack_qkv(model: ir.Model) -> list[str]:
    """The q/k/v projections of each ``GroupQueryAttention`` of ``model`` packed (module docstring),
    in place; the old nodes left unread. Returns why an attention's projections were not packed
    (empty: every one packed, or none to pack)."""
    graph = model.graph
    groups: dict[int, tuple[ir.Node, list[ir.Node]]] = {}
    for node in graph:
        if node.op_type == "MatMul" and node.domain in ("", "ai.onnx") and _weight(node) is not None:
            attention = _attention_of(node.outputs[0])
            if attention is not None:
                groups.setdefault(id(attention), (attention, []))[1].append(node)
    fresh = FreshNames(model)
    const = Constants(graph, fresh, "qkv")
    reasons = []
    for attention, projections in groups.values():
        if len(projections) != 3 or len({id(p.inputs[0]) for p in projections}) != 1:
            reasons.append(f"{len(projections)} projections with constant weights reach the attention, not the "
                           "query, key and value of one input")
            continue
        order = {id(v): i for i, v in enumerate(attention.inputs[:3])}
        projections.sort(key=lambda p: order.get(id(_attention_path(p, attention.inputs[:3])), 3))
        outs = [_biased(p) for p in projections]
        if len({b is None for _, b in outs}) != 1:
            reasons.append("the query, key and value projections are not all biased or all unbiased")
            continue
        weights = [_weight(p) for p in projections]
        sizes = [w.shape[1] for w in weights]
        x = projections[0].inputs[0]
        mm = ir.Node("", "MatMul", [x, const(np.concatenate(weights, axis=1))])
        mm.outputs[0].name = fresh("qkv_matmul")
        nodes, packed = [mm], mm.outputs[0]
        if outs[0][1] is not None:
            add = ir.Node("", "Add", [packed, const(np.concatenate([b for _, b in outs]))])
            add.outputs[0].name = fresh("qkv_add")
            nodes.append(add)
            packed = add.outputs[0]
        split = ir.Node("", "Split", [packed, const(np.array(sizes, np.int64))], attributes=[ir.AttrInt64("axis", -1)],
                        num_outputs=3)
        for value in split.outputs:
            value.name = fresh("qkv_split")
        graph.extend(nodes + [split])
        for (before, _), after in zip(outs, split.outputs):
            after.type, after.shape = before.type, before.shape
            name = before.name
            before.replace_all_uses_with(after, replace_graph_outputs=True)
            before.name, after.name = None, name
    return reasons


def _attention_path(projection: ir.Node, inputs) -> ir.Value | None:
    """Which of the attention's ``inputs`` (query, key, value) ``projection``'s result reaches."""
    targets = {id(v): v for v in inputs}
    seen, frontier = set(), [projection.outputs[0]]
    for _ in range(REACH):
        following = []
        for v in frontier:
            if id(v) in targets:
                return v
            for use in v.uses():
                if id(use.node) not in seen and use.node.op_type != "MatMul":
                    seen.add(id(use.node))
                    following.extend(use.node.outputs)
        frontier = following
    return None
