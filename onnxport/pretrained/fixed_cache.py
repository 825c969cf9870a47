"""Opset 24's fixed-buffer key/value cache: a decoder exported with its cache (``onnxport.pretrained.decoder``)
rewritten so that each cache is one buffer of ``max_length`` positions, updated in place by the standard
``TensorScatter`` and read by the standard ``Attention`` with ``nonpad_kv_seqlen``.

The standard export at opset 23 writes each attention as ``Attention(q, repeat_kv(Concat(past_key_values.i.key,
k, axis 2)), repeat_kv(Concat(past_key_values.i.value, v, axis 2)), mask [B, 1, S, T])`` with ``present.i.key``
the ``Concat``. ``fixed_buffer_cache`` rewrites it as::

    present.i.key = TensorScatter(past_key_values.i.key [B, kv, max_length, d], k [B, kv, S, d], write_indices, axis=2)
    (the same for the value)
    Attention(q, present.i.key, present.i.value, Concat(mask, False [B, 1, S, max_length - T]), nonpad_kv_seqlen)

where ``T`` is ``attention_mask``'s length (``past + S``), ``write_indices`` is ``T - S`` for every row (the
rows are left-padded: every row's new tokens go at the same place) and ``nonpad_kv_seqlen`` is ``T`` for every
row (the buffer past ``T`` is unwritten). The attention reads the key/value heads as they are (``Attention``
groups query heads itself), and the mask, which already holds the causal and the padding mask of eager
PyTorch, is padded to ``max_length`` with ``False`` (onnxruntime wants the mask as long as the keys). Where the
graph read the past length from the cache's shape (``Shape(past_key_values.i.key)[2]``), it reads ``T - S``.

Inputs and outputs keep their names; ``past_key_values.<i>.key``/``.value`` and ``present.<i>.*`` are
``[batch_size, kv_heads, max_length, head_dim]``: the caller allocates the buffers once (zeros of
``max_length`` = prompt + new tokens) and feeds each step's ``present`` back, with ``attention_mask`` of every
token so far, as with the growing cache.

Semantics: the ONNX operators ``TensorScatter`` (opset 24) and ``Attention`` (opset 24, ``nonpad_kv_seqlen``:
"the kv_sequence dimension of attn_mask can be shorter than K and V, but still needs to be at least as long as
the maximum value of nonpad_kv_seqlen"; a fully masked query row gives zeros).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.capture.caches import INPUT_PREFIX
from onnxport.errors import ExportError
from onnxport.targets.builder import Constants, Nodes
from onnxport.targets.names import FreshNames
from onnxport.verify.decoding import MAX_LENGTH  # the dim name of the cache buffers' sequence axis

FIXED_CACHE_OPSET = 24


def _std(node: ir.Node | None, *op_types: str) -> bool:
    return node is not None and node.op_type in op_types and node.domain in ("", "ai.onnx")


def _cache_concat(value: ir.Value) -> ir.Node | str:
    """The ``Concat(past_key_values.i.*, new, axis 2)`` ``value`` reads through repeat_kv, or why not."""
    node = value.producer()
    if _std(node, "Reshape"):
        expand = node.inputs[0].producer()
        unsqueeze = expand.inputs[0].producer() if _std(expand, "Expand") else None
        if not _std(unsqueeze, "Unsqueeze"):
            return "the attention's key or value is reshaped but not repeated per head group"
        node = unsqueeze.inputs[0].producer()
    if not _std(node, "Concat") or len(node.inputs) != 2 or node.attributes["axis"].value not in (2, -2):
        return "the attention's key or value is not a cache concatenated on the sequence axis"
    past = node.inputs[0]
    if not past.is_graph_input() or not (past.name or "").startswith(f"{INPUT_PREFIX}."):
        return f"the attention's key or value concatenates {past.name}, not a past cache input"
    return node


def _matches(graph: ir.Graph) -> list[tuple[ir.Node, ir.Node, ir.Node]]:
    """``(attention, key concat, value concat)`` of every ``Attention`` node. Raises ``ExportError``
    when one does not read the cache as the standard export writes it."""
    found = []
    for node in graph:
        if not _std(node, "Attention"):
            continue
        if len(node.inputs) > 4 and any(v is not None for v in node.inputs[4:]) or len(node.inputs) < 4:
            raise ExportError("an Attention node takes its own past key/value or no mask: not the form the "
                              "fixed-buffer cache rewrite reads", hint="export at opset 23 or lower")
        kv = [_cache_concat(v) for v in node.inputs[1:3]]
        reason = next((k for k in kv if isinstance(k, str)), None)
        if reason is not None:
            raise ExportError(f"opset 24's fixed-buffer cache cannot rewrite this decoder: {reason}",
                              hint="export at opset 23 or lower (the growing cache)")
        found.append((node, kv[0], kv[1]))
    if not found:
        raise ExportError("opset 24's fixed-buffer cache found no Attention node reading the cache in this decoder",
                          hint="export at opset 23 or lower (the growing cache)")
    return found


def fixed_buffer_cache(model: ir.Model) -> None:
    """Rewrite ``model`` (a decoder with its cache exported at opset 23 by
    ``export_decoder_with_cache``) in place to the fixed-buffer form of the module docstring, its
    default opset set to 24.

    Raises ``ExportError`` when an attention is not the standard export's ``Attention`` over a
    concatenated cache, or the past cache is read otherwise than by that ``Concat`` and the
    ``Shape`` of its length (batch and head sizes may be read)."""
    graph = model.graph
    inputs = {v.name: v for v in graph.inputs}
    if not {"input_ids", "attention_mask"} <= set(inputs):
        raise ExportError("opset 24's fixed-buffer cache needs a decoder with input_ids and attention_mask inputs",
                          hint="export at opset 23 or lower")
    matches = _matches(graph)
    fresh = FreshNames(model)
    const = Constants(graph, fresh, "kv")
    build = Nodes(None, fresh, "kv")
    op = build.op
    total = op("Shape", inputs["attention_mask"], start=1, end=2)  # [1]: T = past + S
    seq = op("Shape", inputs["input_ids"], start=1, end=2)
    batch = op("Shape", inputs["input_ids"], start=0, end=1)
    past = op("Sub", total, seq)  # [1]
    write_indices = op("Expand", past, batch)  # [B] int64
    nonpad = op("Expand", total, batch)
    concats = {c for _, k, v in matches for c in (k, v)}
    past_inputs = {c.inputs[0] for c in concats}
    max_length = ir.SymbolicDim(MAX_LENGTH)
    for value in past_inputs:
        for use in list(value.uses()):
            user = use.node
            if user in concats:
                continue
            if _std(user, "Shape"):
                start, end = (user.attributes[k].value if k in user.attributes else None for k in ("start", "end"))
                if (start, end) == (2, 3):
                    user.outputs[0].replace_all_uses_with(past)
                    continue
                if end is not None and 0 <= end <= 2 and (start or 0) >= 0:
                    continue
            raise ExportError(f"{value.name} is read by a {user.op_type} node, not only as the cache the attention "
                              "concatenates: the fixed-buffer form cannot keep what it computes",
                              hint="export at opset 23 or lower (the growing cache)")
        dims = list(value.shape)
        dims[2] = max_length
        value.shape = ir.Shape(dims)
    graph.extend(build.nodes)
    for attention, key_concat, value_concat in matches:
        step = Nodes(None, fresh, "kv")
        present = [step.op("TensorScatter", c.inputs[0], c.inputs[1], write_indices, axis=2)
                   for c in (key_concat, value_concat)]
        mask = attention.inputs[3]
        if mask.dtype != ir.DataType.BOOL:
            raise ExportError("an Attention node's mask is not boolean: the fixed-buffer form pads a boolean mask",
                              hint="export at opset 23 or lower")
        head = step.op("Shape", mask, start=0, end=3)
        room = step.op("Sub", step.op("Shape", present[0], start=2, end=3), total)
        pad = step.op("Expand", const(np.array(False)), step.op("Concat", head, room, axis=0))
        padded = step.op("Concat", mask, pad, axis=-1)
        new = ir.Node("", "Attention", [attention.inputs[0], present[0], present[1], padded, None, None, nonpad],
                      attributes=list(attention.attributes.values()), num_outputs=1)
        new.outputs[0].name = fresh("kv_attention")
        step.nodes.append(new)
        graph.insert_before(attention, step.nodes)
        for concat, value in zip((key_concat, value_concat), present):
            before = concat.outputs[0]
            if before.is_graph_output():
                name = before.name
                index = graph.outputs.index(before)
                before.name = None
                value.name, value.dtype = name, before.dtype
                value.shape = ir.Shape([*before.shape[:2], max_length, *before.shape[3:]])
                graph.outputs[index] = value
        out = attention.outputs[0]
        new.outputs[0].type, new.outputs[0].shape = out.type, out.shape
        name = out.name
        out.replace_all_uses_with(new.outputs[0], replace_graph_outputs=True)
        out.name, new.outputs[0].name = None, name
        graph.remove(attention, safe=True)
    _tidy(model)


def _tidy(model: ir.Model) -> None:
    import onnx_ir.passes.common as common

    common.RemoveUnusedNodesPass()(model)
    model.opset_imports[""] = FIXED_CACHE_OPSET
    common.TopologicalSortPass()(model)
    common.CheckerPass()(model)


def export_fixed_cache_decoder(model, **options):
    """``model`` (a transformers ``*ForCausalLM`` in eval mode) exported with its cache at opset 23
    (``export_decoder_with_cache``), then rewritten to opset 24's fixed-buffer form
    (``fixed_buffer_cache``). ``options``: further ``onnxport.to_onnx`` arguments, ``opset`` ignored.

    The result's example and module are the standard export's: its ``validate()`` does not apply
    (the inputs differ); ``onnxport.pretrained.fixed_cache_check.check_fixed_cache`` compares steps
    with eager at other sizes, and greedy decoding (``ExportResult.check_generation``) with eager's
    ``generate``, logits of every step included.

    Raises ``ExportError`` (the decoder's attention or cache not of the form the rewrite reads;
    a target other than ``onnxruntime``) and the errors of ``export_decoder_with_cache``."""
    from onnxport.pretrained.decoder import export_decoder_with_cache

    if options.get("target", "onnxruntime") != "onnxruntime":
        raise ExportError(f"opset 24's fixed-buffer cache is written for target onnxruntime, not {options['target']!r}",
                          hint="drop --target (genai-cpu writes its own shared buffer with GroupQueryAttention), "
                               "or export at opset 23 or lower")
    result = export_decoder_with_cache(model, **{**options, "opset": FIXED_CACHE_OPSET - 1})
    fixed_buffer_cache(result.model)
    return result.replace(model=result.model)
