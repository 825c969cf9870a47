"""Target ``genai-cpu``'s attention fusion: a decoder's attention with its concatenated cache, as the
standard export writes it, rewritten as onnxruntime's ``com.microsoft.GroupQueryAttention``, the
operator onnxruntime-genai's model builder writes for CPU.

Matched per ``Softmax`` on the standard graph (``match_attention``)::

    q4 [B, H, S, d] (rotary applied) -> Mul(scale) ----------------------------\\
    present.i.key = Concat(past_key_values.i.key, k4 [B, kv, S, d], axis 2)      MatMul -> Add(mask) -> Softmax
        -> repeat_kv (Unsqueeze, Expand, Reshape: kv -> H heads) -> Transpose(0, 1, 3, 2) /      [IsNaN/Where]
    present.i.value = Concat(past_key_values.i.value, v4, axis 2) -> repeat_kv --> MatMul(probs, .)
        -> Transpose(0, 2, 1, 3) -> Reshape [B, S, H*d]

and replaced by ``GroupQueryAttention(q, k, v [B, S, *·d], past_key, past_value, seqlens_k,
total_sequence_length, attention_bias=...)`` (``num_heads`` H, ``kv_num_heads`` kv, ``scale``),
whose outputs become the attention's output and ``present.i.key``/``present.i.value``. The rotary
embedding stays outside the operator (``do_rotary=0``: it reads ``position_ids``, which a
left-padded row needs; ``onnxport.targets.genai_rotary`` fuses it apart).
``total_sequence_length`` is ``attention_mask``'s length and ``seqlens_k`` the index of each row's
last key the mask keeps: that length minus 1 for a left-padded row (the key positions of every row
end at the same place) and, for a first prompt padded on the right (as onnxruntime-genai pads a
batch), the row's length minus 1, the builder's ``ReduceSum(attention_mask) - 1``; the padding is
masked by ``attention_bias`` (the lowest float where ``attention_mask`` is 0) and the causal mask
is the operator's own.

Semantics: onnxruntime's ``docs/ContribOperators.md`` (``com.microsoft.GroupQueryAttention``) and
onnxruntime-genai's ``src/python/py/models/builders/base.py`` (``make_group_query_attention``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from onnxport.capture.caches import INPUT_PREFIX
from onnxport.targets.builder import Constants
from onnxport.targets.names import FreshNames

MS_DOMAIN = "com.microsoft"


@dataclasses.dataclass
class AttentionMatch:
    """One attention matched on the standard graph: its query (rotary applied, ``[B, H, S, d]``),
    the cache ``Concat`` nodes, the value replaced by the operator's output (``[B, S, H*d]``),
    heads, key/value heads and scale."""

    query: ir.Value
    key_concat: ir.Node
    value_concat: ir.Node
    output: ir.Value
    heads: int
    kv_heads: int
    scale: float


def _producer(value: ir.Value | None, *op_types: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type in op_types and node.domain in ("", "ai.onnx") else None


def _ints(node: ir.Node, name: str) -> tuple[int, ...] | None:
    attr = node.attributes.get(name)
    return tuple(attr.value) if attr is not None else None


def _scalar(value: ir.Value) -> float | None:
    tensor = value.const_value
    if tensor is None:
        return None
    array = tensor.numpy()
    return float(array.reshape(-1)[0]) if array.size == 1 else None


def _cache_concat(value: ir.Value, kind: str) -> ir.Node | str:
    """The ``Concat(past_key_values.i.<kind>, new, axis 2)`` ``value`` reads through repeat_kv
    (Reshape(Expand(Unsqueeze(.))) or nothing), or why not."""
    node = _producer(value, "Reshape")
    if node is not None:
        expand = _producer(node.inputs[0], "Expand")
        unsqueeze = _producer(expand.inputs[0], "Unsqueeze") if expand is not None else None
        if unsqueeze is None:
            return f"the attention's {kind} is reshaped but not repeated per head group (Unsqueeze, Expand)"
        value = unsqueeze.inputs[0]
    concat = _producer(value, "Concat")
    if concat is None or len(concat.inputs) != 2 or concat.attributes.get("axis") is None \
            or concat.attributes["axis"].value not in (2, -2):
        return f"the attention's {kind} is not a cache concatenated on the sequence axis"
    past = concat.inputs[0]
    if past is None or not past.is_graph_input() or not (past.name or "").startswith(f"{INPUT_PREFIX}."):
        return f"the attention's {kind} concatenates {past.name if past else None}, not a past cache input"
    return concat


COMPARISONS = {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"}


def _comparisons(mask: ir.Value) -> list[str]:
    """The comparison nodes (``COMPARISONS``) among the ancestors of ``mask``, by op type, sorted."""
    seen, stack, found = set(), [mask], []
    while stack:
        node = stack.pop().producer()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.op_type in COMPARISONS:
            found.append(node.op_type)
        stack.extend(v for v in node.inputs if v is not None)
    return sorted(found)


def match_attention(softmax: ir.Node) -> AttentionMatch | str:
    """The attention around ``softmax`` (module docstring), or the reason it does not match."""
    add = _producer(softmax.inputs[0], "Add")
    if add is None:
        return "the Softmax's scores have no additive mask"
    scores = next((_producer(v, "MatMul") for v in add.inputs if _producer(v, "MatMul") is not None), None)
    if scores is None:
        return "the Softmax does not read a MatMul of query and key plus a mask"
    mask = add.inputs[1] if add.inputs[0] is scores.outputs[0] else add.inputs[0]
    compared = _comparisons(mask)
    if compared != ["LessOrEqual"]:
        return (f"the mask compares positions by {', '.join(compared) or 'nothing'}, not by one causal LessOrEqual "
                "(a sliding window or another pattern the operator does not compute)")
    scaled, key_t = scores.inputs
    scale_node = _producer(scaled, "Mul", "Div")
    transpose = _producer(key_t, "Transpose")
    if scale_node is None or transpose is None or _ints(transpose, "perm") != (0, 1, 3, 2):
        return "the scores are not the scaled query times the transposed key"
    query, factor = scale_node.inputs
    scale = _scalar(factor)
    if scale is None:
        return "the query's scale is not a constant scalar"
    scale = 1.0 / scale if scale_node.op_type == "Div" else scale
    key_concat = _cache_concat(transpose.inputs[0], "key")
    if isinstance(key_concat, str):
        return key_concat
    probs = softmax.outputs[0]
    uses = list(probs.uses())
    if len(uses) == 2 and {u.node.op_type for u in uses} == {"IsNaN", "Where"}:  # a fully masked row -> 0
        probs = next(u.node for u in uses if u.node.op_type == "Where").outputs[0]
    out = [u.node for u in probs.uses()]
    if len(out) != 1 or out[0].op_type != "MatMul" or out[0].inputs[0] is not probs:
        return "the attention probabilities are not multiplied by the values alone"
    value_concat = _cache_concat(out[0].inputs[1], "value")
    if isinstance(value_concat, str):
        return value_concat
    after = [u.node for u in out[0].outputs[0].uses()]
    if len(after) != 1 or after[0].op_type != "Transpose" or _ints(after[0], "perm") != (0, 2, 1, 3):
        return "the attention output is not transposed back to [batch, sequence, heads, head size]"
    merge = [u.node for u in after[0].outputs[0].uses()]
    if len(merge) != 1 or merge[0].op_type != "Reshape":
        return "the attention output's heads are not merged by a Reshape"
    q_shape, k_shape = query.shape, key_concat.inputs[0].shape
    if q_shape is None or k_shape is None or len(q_shape) != 4 or len(k_shape) != 4 \
            or not all(isinstance(d, int) for d in (q_shape[1], q_shape[3], k_shape[1], k_shape[3])):
        return "the query's and the cache's heads and head size are not known numbers"
    if q_shape[3] != k_shape[3] or q_shape[1] % k_shape[1]:
        return f"query heads {q_shape[1]}x{q_shape[3]} do not group cache heads {k_shape[1]}x{k_shape[3]}"
    return AttentionMatch(query, key_concat, value_concat, merge[0].outputs[0], int(q_shape[1]), int(k_shape[1]),
                          scale)


class _Shared:
    """The operator's inputs computed once from ``attention_mask`` (``[B, T]``): ``total_sequence_length``
    (``T`` as a 1-element int32 vector, which the operator reads as its scalar), ``seqlens_k`` (the index
    of each row's last key not masked, ``T - 1`` for a left-padded or unpadded row) and the padding's
    ``attention_bias`` ``[B, 1, S, T]`` (the lowest float where ``attention_mask`` is 0): 9 nodes. The
    bias is made ``[B, 1, S, T]`` by comparing the mask ``[B, 1, 1, T]`` with zeros ``[B, 1, S, 1]``
    (``input_ids * 0``; an ``Expand`` of the same shape would take a ``Shape`` and a ``Concat`` more):
    onnxruntime 1.32's operator refuses a bias whose third dim is not the new tokens' count
    ("attention_bias dimension 2 must be equal to the sequence length"), 1 included."""

    def __init__(self, graph: ir.Graph, fresh: FreshNames, const: Constants, dtype: ir.DataType):
        self.nodes: list[ir.Node] = []
        self.fresh, self.const = fresh, const
        mask = next(v for v in graph.inputs if v.name == "attention_mask")
        ids = next(v for v in graph.inputs if v.name == "input_ids")
        self.total = self._op("Cast", [self._op("Shape", [mask], start=1, end=2)], to=ir.DataType.INT32)  # [1]
        last = self._op("ArgMax", [mask], axis=1, keepdims=0, select_last_index=1)  # [B] int64
        self.seqlens = self._op("Cast", [last], to=ir.DataType.INT32)
        zeros = self._op("Mul", [ids, const(np.array(0, ids.dtype.numpy()))])  # [B, S]
        if ids.dtype != mask.dtype:
            zeros = self._op("Cast", [zeros], to=mask.dtype)
        padded = self._op("Equal", [self._op("Unsqueeze", [mask, const(np.array([1, 2], np.int64))]),
                                    self._op("Unsqueeze", [zeros, const(np.array([1, 3], np.int64))])])
        lowest = np.finfo(dtype.numpy()).min
        self.bias = self._op("Where", [padded, const(np.array(lowest, dtype.numpy())),
                                       const(np.array(0, dtype.numpy()))])  # [B, 1, S, T]

    def _op(self, op_type: str, inputs: list, **attributes) -> ir.Value:
        node = ir.Node("", op_type, inputs, attributes=[ir.convenience.convert_attribute(k, v)
                                                        for k, v in attributes.items()])
        node.outputs[0].name = self.fresh(f"gqa_{op_type.lower()}")
        self.nodes.append(node)
        return node.outputs[0]


def _to_bsd(x: ir.Value, name: str, fresh: FreshNames, const: Constants, nodes: list[ir.Node]) -> ir.Value:
    """``x`` [B, N, S, d] as [B, S, N*d]."""
    t = ir.Node("", "Transpose", [x], attributes=[ir.AttrInt64s("perm", [0, 2, 1, 3])])
    t.outputs[0].name = fresh(f"{name}_bsnd")
    r = ir.Node("", "Reshape", [t.outputs[0], const(np.array([0, 0, -1], np.int64))])
    r.outputs[0].name = fresh(f"{name}_bsd")
    nodes += [t, r]
    return r.outputs[0]


def _unsplit(value: ir.Value) -> ir.Value | None:
    """The projection ``[B, S, N*d]`` of ``value`` = ``Transpose(Reshape(projection), (0, 2, 1, 3))``, or None."""
    transpose = _producer(value, "Transpose")
    reshape = _producer(transpose.inputs[0], "Reshape") if transpose is not None else None
    if reshape is None or _ints(transpose, "perm") != (0, 2, 1, 3):
        return None
    shape = reshape.inputs[0].shape
    return reshape.inputs[0] if shape is not None and len(shape) == 3 else None


def _take_place(before: ir.Value, after: ir.Value) -> None:
    after.type, after.shape = before.type, before.shape
    name = before.name
    before.replace_all_uses_with(after, replace_graph_outputs=True)
    before.name, after.name = None, name


def fuse_group_query_attention(model: ir.Model) -> list[str]:
    """Every attention of ``model``'s main graph matching ``match_attention`` rewritten as
    ``com.microsoft.GroupQueryAttention`` (module docstring), in place; the old nodes left unread
    (removed by the target's tidying). Returns the reasons of the ``Softmax`` nodes not fused
    (empty: all fused; ``["no ..."]`` when the model has no attention to match)."""
    graph = model.graph
    names = {v.name for v in graph.inputs}
    if not {"input_ids", "attention_mask"} <= names:
        return ["the model has no input_ids and attention_mask inputs (not a decoder with its cache)"]
    softmaxes = [n for n in graph if n.op_type == "Softmax" and n.domain in ("", "ai.onnx")]
    if not softmaxes:
        return ["the model has no Softmax (no attention to fuse)"]
    matches, reasons = [], []
    for node in softmaxes:
        found = match_attention(node)
        (reasons if isinstance(found, str) else matches).append(found)
    if not matches:
        return reasons
    fresh = FreshNames(model)
    const = Constants(graph, fresh, "gqa")
    shared = _Shared(graph, fresh, const, matches[0].query.dtype)
    graph.extend(shared.nodes)
    for m in matches:
        nodes: list[ir.Node] = []
        q = _to_bsd(m.query, "gqa_query", fresh, const, nodes)
        k = _to_bsd(m.key_concat.inputs[1], "gqa_key", fresh, const, nodes)
        v = _unsplit(m.value_concat.inputs[1])
        v = v if v is not None else _to_bsd(m.value_concat.inputs[1], "gqa_value", fresh, const, nodes)
        gqa = ir.Node(MS_DOMAIN, "GroupQueryAttention",
                      [q, k, v, m.key_concat.inputs[0], m.value_concat.inputs[0], shared.seqlens, shared.total,
                       None, None, None, shared.bias],
                      attributes=[ir.AttrInt64("num_heads", m.heads), ir.AttrInt64("kv_num_heads", m.kv_heads),
                                  ir.AttrFloat32("scale", m.scale), ir.AttrInt64("do_rotary", 0)],
                      num_outputs=3)
        gqa.outputs[0].name = fresh("gqa_output")
        graph.extend(nodes + [gqa])
        _take_place(m.output, gqa.outputs[0])
        _take_place(m.key_concat.outputs[0], gqa.outputs[1])
        _take_place(m.value_concat.outputs[0], gqa.outputs[2])
    model.opset_imports.setdefault(MS_DOMAIN, 1)
    return reasons


def shares_cache_buffer(model: ir.Model) -> bool:
    """Whether every past cache input of ``model`` is read by ``GroupQueryAttention`` alone, so that
    onnxruntime-genai may hand it one buffer of ``max_length`` shared with the present
    (``past_present_share_buffer``): no other node reads the cache's shape or values."""
    past = [v for v in model.graph.inputs if (v.name or "").startswith(f"{INPUT_PREFIX}.")]
    return bool(past) and all(u.node.op_type == "GroupQueryAttention" and u.node.domain == MS_DOMAIN
                              for v in past for u in v.uses())
