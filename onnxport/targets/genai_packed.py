"""Target ``genai-cpu``'s packed QKV: the query, key and value projections of one
``GroupQueryAttention`` (three ``MatMul`` of the same input by constant weights, each with or
without a constant bias ``Add``) as one ``MatMul`` by the weights concatenated on the output axis
(and one bias ``Add``), ``Split`` into the three, as onnxruntime-genai's model builder packs them
(``qkv_proj``): one pass over the input instead of three.

A projection the model packed itself (Phi-3's ``qkv_proj``: one ``MatMul`` of constant weights, with
or without a constant bias ``Add``, possibly through a ``Reshape`` keeping its shape ``[B, S, W]``, sliced
on the last axis into the query, key and value by a ``Split`` or three ``Slice``, each possibly through
such a ``Reshape``) is recognised as packed where the three parts are, in order, ``[0, N*d)``, ``[N*d, (N+K)*d)`` and
``[(N+K)*d, (N+2K)*d)`` of it (``N``, ``K`` the attention's ``num_heads`` and ``kv_num_heads``, ``d``
the head size) and its width is ``(N+2K)*d``: the parts are then one ``Split`` of it, as a packing here
writes them, so the rotary can move inside the attention (``genai_rotary.rotate_inside``) alike.

Semantics: the concatenation commutes with the product (``x @ [Wq | Wk | Wv] = [x @ Wq | x @ Wk | x @ Wv]``),
so the rewrite is exact.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.targets.builder import Constants
from onnxport.targets.genai_attention import MS_DOMAIN, _producer
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
            found = packed_by_model(attention)
            if isinstance(found, str):
                reasons.append(f"{len(projections)} projections with constant weights reach the attention, not the "
                               f"query, key and value of one input, nor one packed projection ({found})")
                continue
            packed, parts, sizes = found
            split_packed(graph, fresh, const, packed, parts, sizes)
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
        graph.extend(nodes)
        split_packed(graph, fresh, const, packed, [before for before, _ in outs], sizes)
    return reasons


def split_packed(graph: ir.Graph, fresh: FreshNames, const: Constants, packed: ir.Value, parts: list[ir.Value],
                 sizes: list[int]) -> None:
    """``parts`` (the query, key and value, each ``[B, S, size]``) replaced by the outputs of one
    ``Split`` of ``packed`` ``[B, S, sum(sizes)]`` on its last axis into ``sizes`` (the form
    ``genai_rotary.rotate_inside`` matches), each output taking its part's name and type; the nodes
    that made the parts left unread."""
    split = ir.Node("", "Split", [packed, const(np.array(sizes, np.int64))], attributes=[ir.AttrInt64("axis", -1)],
                    num_outputs=3)
    for value in split.outputs:
        value.name = fresh("qkv_split")
    graph.append(split)
    for before, after in zip(parts, split.outputs):
        after.type, after.shape = before.type, before.shape
        name = before.name
        before.replace_all_uses_with(after, replace_graph_outputs=True)
        before.name, after.name = None, name


def _kept_last_axis(reshape: ir.Node) -> bool:
    """Whether ``reshape`` maps a rank-3 value of a known last dim to a value of its shape (``[B, S, W]``
    kept, as ``Reshape(x, [0, 0, -1])`` does)."""
    before, after = reshape.inputs[0].shape, reshape.outputs[0].shape
    return (before is not None and after is not None and len(before) == len(after) == 3
            and isinstance(before[2], int) and before[2] == after[2] and before[:2] == after[:2])


def _constant(value: ir.Value | None) -> int | None:
    """The one integer of a constant 0-d or 1-element ``value``, or None."""
    if value is None or value.const_value is None:
        return None
    array = value.const_value.numpy().reshape(-1)
    return int(array[0]) if array.size == 1 else None


def _part(value: ir.Value) -> tuple[ir.Value, int, int] | str:
    """``(sliced, start, end)``: the value ``value`` is the last-axis range ``[start, end)`` of (a
    ``Slice`` or an output of a ``Split``, possibly reshaped after keeping the last axis); ``end`` may
    pass the width (a ``Slice`` to the end), ``start`` and ``end`` may be negative (from the end)."""
    reshape = _producer(value, "Reshape")
    if reshape is not None and _kept_last_axis(reshape):
        value = reshape.inputs[0]
    node = _producer(value, "Slice", "Split")
    rank = len(node.inputs[0].shape) if node is not None and node.inputs[0].shape is not None else None
    if node is None or rank is None:
        return "a query, key or value is not a Slice or Split of a value of known rank"
    if node.op_type == "Slice":
        start, end, axis = (_constant(node.inputs[i]) if len(node.inputs) > i else None for i in (1, 2, 3))
        step = _constant(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else 1
        if len(node.inputs) < 4 or node.inputs[3] is None:
            axis = 0
        if None in (start, end, axis) or axis not in (-1, rank - 1) or step != 1:
            return "a query, key or value is not a constant Slice of the last axis"
        return node.inputs[0], start, end
    width = node.inputs[0].shape[-1]
    axis = node.attributes["axis"].value if "axis" in node.attributes else 0
    given = node.inputs[1] if len(node.inputs) > 1 else None
    sizes = [int(s) for s in given.const_value.numpy()] if given is not None and given.const_value is not None \
        else [width // len(node.outputs)] * len(node.outputs) if given is None and isinstance(width, int) and \
        width % len(node.outputs) == 0 else None
    if axis not in (-1, rank - 1) or sizes is None:
        return "a query, key or value is not a Split of the last axis into known sizes"
    index = list(node.outputs).index(value)
    return node.inputs[0], sum(sizes[:index]), sum(sizes[:index + 1])


def packed_by_model(attention: ir.Node) -> tuple[ir.Value, list[ir.Value], list[int]] | str:
    """``(packed [B, S, (N+2K)*d], [query, key, value], sizes)``: the projection the model packed itself
    that ``attention`` (a ``GroupQueryAttention``) reads split into its query, key and value, those as
    the attention or the ``RotaryEmbedding`` of its query and key reads them, and their sizes
    ``[N*d, K*d, K*d]`` (module docstring); or why not."""
    parts = []
    for index in (0, 1, 2):
        value = attention.inputs[index]
        rotary = value.producer() if value is not None else None
        if rotary is not None and rotary.op_type == "RotaryEmbedding" and rotary.domain == MS_DOMAIN and index < 2:
            value = rotary.inputs[0]
        if value is None:
            return "the attention has no separate query, key and value"
        parts.append(value)
    ranges = [_part(v) for v in parts]
    why = next((r for r in ranges if isinstance(r, str)), None)
    if why is not None:
        return why
    packed = ranges[0][0]
    if any(r[0] is not packed for r in ranges):
        return "the query, key and value are not parts of one value"
    width = packed.shape[-1] if packed.shape is not None and len(packed.shape) == 3 else None
    heads, kv_heads = (attention.attributes[name].value if name in attention.attributes else 0
                       for name in ("num_heads", "kv_num_heads"))
    if not isinstance(width, int) or not heads or not kv_heads or width % (heads + 2 * kv_heads):
        return "the split value's width is not a known multiple of num_heads + 2 * kv_num_heads"
    head = width // (heads + 2 * kv_heads)
    sizes = [heads * head, kv_heads * head, kv_heads * head]
    bounds = [(s + width if s < 0 else s, min(e + width if e < 0 else e, width)) for _, s, e in ranges]
    if bounds != [(0, sizes[0]), (sizes[0], sizes[0] + sizes[1]), (sizes[0] + sizes[1], width)]:
        return (f"the query, key and value are not the ranges {sizes} of the split value, in order "
                f"(they are {bounds})")
    reshape = _producer(packed, "Reshape")
    if reshape is not None and _kept_last_axis(reshape):  # (a shape kept: the projection itself read)
        packed = reshape.inputs[0]
    source = packed
    add = _producer(source, "Add")
    if add is not None:
        bias = [v for v in add.inputs if v is not None and v.const_value is not None and len(v.shape or ()) == 1]
        source = next((v for v in add.inputs if v not in bias), None) if len(bias) == 1 else None
    matmul = _producer(source, "MatMul")
    if matmul is None or _weight(matmul) is None:
        return "the split value is not one MatMul by constant weights (with or without a constant bias)"
    return packed, parts, sizes


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
