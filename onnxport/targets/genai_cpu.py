"""Target ``genai-cpu``: a decoder exported with its cache rewritten into the forms onnxruntime-genai's
model builder writes for CPU, one rewrite per fusion, each matched on the standard graph and
skipped, with its reason recorded, where it does not match:

1. ``attention``: each attention with its concatenated cache as ``com.microsoft.GroupQueryAttention``
   (``onnxport.targets.genai_attention``);
2. ``rotary``: the rotary embedding of the query and key as ``com.microsoft.RotaryEmbedding`` on the
   projections (``onnxport.targets.genai_rotary``), its cos/sin initializers of
   ``max_position_embeddings`` rows where the export recorded that number (``CACHES_HELD``; else
   computed each step, the reason recorded); then, where the projections are packed (4.) and the
   head size a multiple of 16, moved inside ``GroupQueryAttention`` (``do_rotary=1`` reading the
   caches and ``position_ids``: ``ROTARY_INSIDE``, ``genai_rotary.rotate_inside``), as the builder
   writes it; else left outside (``ROTARY_OUTSIDE``);
3. ``shared_buffer``: when no node but ``GroupQueryAttention`` reads a past cache input, the cache
   may be one buffer of ``max_length`` shared by past and present, written in place
   (``genai_config.json``'s ``past_present_share_buffer: true``, ``onnxport.pretrained.genai``);
4. ``packed_qkv``: the query, key and value projections of each attention as one ``MatMul``
   (``onnxport.targets.genai_packed``; a projection the model packed itself, as Phi-3's, taken as
   packed), read whole by ``GroupQueryAttention`` where the rotary is inside it, else ``Split``;
5. ``skip_norm``: each RMS norm of a residual sum as ``com.microsoft.SkipSimplifiedLayerNormalization``
   (``onnxport.targets.genai_norm``);
6. ``norm``: each other RMS norm (the first layer's, of the embedding alone; a final one of no
   residual sum) as ``SimplifiedLayerNormalization`` of the ONNX domain (``onnxport.targets.genai_norm``).

What applied and why a fusion did not is the model's metadata ``onnxport.genai_cpu`` (JSON:
fusion -> ``"applied"`` or the reason), read by ``genai_fusions``.

Padding: with the rotary inside ``GroupQueryAttention``, the decoder is right for prompts as
onnxruntime-genai feeds them, unpadded or padded on the right (``attention_mask`` 0 on the trailing
padding, each row's ``position_ids`` its own), and not for a batch of first prompts whose rows start at
different positions (a left-padded batch, as transformers' ``generate`` pads one): a plain onnxruntime
user pads on the right. With the rotary outside, both are right.

Why: onnxruntime 1.32's operator, given ``position_ids``, rotates a first prompt (no past:
``sequence_length == total_sequence_length``) at ``position_ids[0, 0] + s`` for every row, other steps at
each row's own ``position_ids`` (measured against ``RotaryEmbedding`` outside: equal except on a first
prompt whose rows start at different positions; its ``contrib_ops/cpu/bert/group_query_attention.cc``:
``position_ids_format = !is_first_prompt ? 1 : 0``, format 0 reading ``pos_ids[0] + s``). A left-padded
row's keys are so cached at positions shifted by its padding, and its later steps, at their own
positions, differ. onnxruntime-genai never feeds such a prompt: its ``src/models/model.cpp``
``PadInputs`` pads a batch of prompts on the right (``bool pad_right_{true}``), and its
``src/models/position_inputs.cpp`` (``CreateAndInitializePositionIDs``,
``CreateAndInitializeAttentionMask``) scans each row from its end, masking only the trailing
``pad_token_id`` tokens and giving every token before them its index as position (a leading pad is a
token to it); decode steps give each row its previous position + 1 (``src/cpu/interface.cpp``
``UpdatePositionIds``) and append a 1 to the mask. The check against eager PyTorch feeds the model so
(``check_inputs``: the positions alike in every row, a row padded on the right), and so does the
decoding check (``onnxport.pretrained``: a batch of prompts of one length).
"""

from __future__ import annotations

import json

import onnx_ir as ir

from onnxport.targets.genai_attention import fuse_group_query_attention, shares_cache_buffer
from onnxport.targets.genai_norm import fuse_rms_norm, fuse_skip_rms_norm
from onnxport.targets.genai_packed import pack_qkv
from onnxport.targets.genai_rotary import MAX_POSITIONS_KEY, fuse_rotary, rotate_inside

FUSIONS_KEY = "onnxport.genai_cpu"  # model metadata: fusion -> "applied" or why not (JSON)
APPLIED = "applied"
# where the rotary could not move inside GroupQueryAttention (genai_rotary.rotate_inside says why)
ROTARY_OUTSIDE = "outside GroupQueryAttention"

# the builder's form: packed QKV into GroupQueryAttention rotating it (do_rotary=1, position_ids given); its
# rotary rotates every row of a first prompt at the first row's positions (module docstring)
ROTARY_INSIDE = ("inside GroupQueryAttention (do_rotary, position_ids): right as onnxruntime-genai feeds prompts, "
                 "padded on the right; a first prompt whose rows start at different positions (left-padded) "
                 "is rotated at the first row's")

# the rotary's cos/sin read by position from initializers of max_position_embeddings rows (genai_rotary)
CACHES_HELD = "cos/sin caches of max_position_embeddings rows"


def rewrite_for_genai_cpu(model: ir.Model) -> None:
    """``model`` rewritten for onnxruntime-genai on CPU (module docstring), in place; a fusion that
    does not match leaves the graph as it is and records its reason."""
    import onnx_ir.passes.common as common

    fusions: dict[str, str] = {}
    reasons = fuse_group_query_attention(model)
    fused = any(n.op_type == "GroupQueryAttention" for n in model.graph)
    if fused and reasons:
        fusions["attention"] = f"{APPLIED} (not to every Softmax: {'; '.join(sorted(set(reasons)))})"
    else:
        fusions["attention"] = APPLIED if fused else "; ".join(sorted(set(reasons)))
    if fused:
        unrotated, per_step = fuse_rotary(model)
        rotaries = sum(n.op_type == "RotaryEmbedding" for n in model.graph)
        caches = f"cos/sin computed each step: {per_step}" if per_step else CACHES_HELD
        whole = f"{APPLIED} (com.microsoft.RotaryEmbedding, {caches}; {ROTARY_OUTSIDE})"
        fusions["rotary"] = (whole if not unrotated else
                             f"{APPLIED} to {rotaries} of the queries and keys, not to {len(unrotated)}: "
                             f"{'; '.join(sorted(set(unrotated)))} ({caches})" if rotaries else
                             "; ".join(sorted(set(unrotated))))
    else:
        fusions["rotary"] = "the attention is not GroupQueryAttention"
    common.RemoveUnusedNodesPass()(model)  # the standard attention's mask and cache reads, now unread
    if shares_cache_buffer(model):
        fusions["shared_buffer"] = APPLIED
    else:
        fusions["shared_buffer"] = ("the past cache is read by other nodes than GroupQueryAttention (its length "
                                    "would be max_length in a shared buffer)" if fused else
                                    "the attention is not GroupQueryAttention")
    if fused:
        unpacked = pack_qkv(model)
        # one reason for each attention not packed (pack_qkv)
        packed = sum(n.op_type == "GroupQueryAttention" for n in model.graph) - len(unpacked)
        fusions["packed_qkv"] = (APPLIED if not unpacked else
                                 f"{APPLIED} to {packed} attentions, not to {len(unpacked)}: "
                                 f"{'; '.join(sorted(set(unpacked)))}" if packed else "; ".join(sorted(set(unpacked))))
    else:
        fusions["packed_qkv"] = "the attention is not GroupQueryAttention"
    if fused and fusions["rotary"].startswith(APPLIED) and fusions["packed_qkv"].startswith(APPLIED):
        inside, outside = rotate_inside(model)
        why = "; ".join(sorted(set(outside)))
        if inside and not outside:
            fusions["rotary"] = fusions["rotary"].replace(ROTARY_OUTSIDE, ROTARY_INSIDE).replace(
                "com.microsoft.RotaryEmbedding, ", "")
            fusions["packed_qkv"] = f"{APPLIED} (fed to GroupQueryAttention whole)"
        elif inside:
            fusions["rotary"] += f"; {ROTARY_INSIDE} for {inside} attentions, outside for {len(outside)}: {why}"
            fusions["packed_qkv"] += f" (fed to GroupQueryAttention whole for {inside} attentions)"
        else:
            fusions["rotary"] += f" ({why})"
    norms = fuse_skip_rms_norm(model)
    fusions["skip_norm"] = APPLIED if norms else "no RMS norm (Pow, ReduceMean, Sqrt, Reciprocal) of a residual sum"
    norms = fuse_rms_norm(model)
    fusions["norm"] = APPLIED if norms else ("no RMS norm (Pow, ReduceMean, Sqrt, Reciprocal) but of residual "
                                             "sums" if fusions["skip_norm"] == APPLIED else "no RMS norm")
    model.metadata_props.pop(MAX_POSITIONS_KEY, None)  # fuse_rotary's input, not a property of the model
    model.metadata_props[FUSIONS_KEY] = json.dumps(fusions)


def genai_fusions(model: ir.Model) -> dict[str, str]:
    """The fusions of a model of target ``genai-cpu`` (fusion -> ``"applied"`` or why not); ``{}``
    for a model of another target."""
    return json.loads(model.metadata_props.get(FUSIONS_KEY, "{}"))


def check_sizes(model: ir.Model) -> list[dict] | None:
    """The sizes at which the rewritten ``model`` is checked against eager PyTorch instead of the
    example, or None (the example) when no ``GroupQueryAttention`` was made: onnxruntime's operator
    refuses a batch of more than one row taking several new tokens after a past (the example of a
    decoder export: batch 2, 3 new tokens after 5), so each of batch, new tokens and past is brought
    to its smallest in turn (1, 1, 0), every dim given (the total is the past plus the new tokens)."""
    if not any(n.op_type == "GroupQueryAttention" for n in model.graph):
        return None
    inputs = {v.name: v for v in model.graph.inputs}
    past = next(v for name, v in inputs.items() if name.startswith("past_key_values."))
    batch, _, past_len, _ = (str(d) for d in past.shape)
    seq, total = str(inputs["input_ids"].shape[1]), str(inputs["attention_mask"].shape[1])
    return [{batch: b, seq: s, past_len: p, total: p + s} for b, s, p in ((1, 3, 5), (2, 1, 5), (2, 3, 0))]



def check_inputs(result, sizes: list[dict]) -> list[tuple[tuple, dict]]:
    """The input sets of the check of ``result`` (an ``ExportResult`` of a model of this target) at
    ``sizes`` (``check_sizes``): made as any validation makes them at those sizes, then fed as
    onnxruntime-genai feeds a decoder (``src/models/position_inputs.cpp``, ``src/cpu/interface.cpp``):
    ``attention_mask`` 1 and ``position_ids`` ``past .. past + S - 1`` (``past`` the mask's length minus
    the new tokens'), except, in a batch, the last row padded on the right: a first prompt's last slot
    masked (its position continuing the row's, where onnxruntime-genai gives a pad 0: a slot no kept
    token attends, whose key eager PyTorch then rotates as the operator does), or, one token after a
    past, 2 slots before it masked and its position 2 less (the row's own count). Empty where the
    result has no captured inputs to make them from (a model loaded from a file)."""
    import torch

    from onnxport.capture.inputs import dim_examples, dim_names, inputs_like_example

    if result.captured is None:
        return []
    names = dim_names(result.captured, result.dim_names)
    examples, _ = dim_examples(result.captured, names)
    sets = []
    for i, s in enumerate(sizes):
        args, kwargs = inputs_like_example(result.captured, names, {**examples, **s}, seed=i + 1)
        ids, mask = kwargs["input_ids"], kwargs["attention_mask"]
        past = mask.shape[1] - ids.shape[1]
        mask = torch.ones_like(mask)
        positions = torch.arange(past, mask.shape[1]).expand(ids.shape[0], -1).clone()
        if ids.shape[0] > 1 and past == 0 and ids.shape[1] > 1:  # a first prompt: the last row's last slot a pad
            mask[-1, -1] = 0
        elif ids.shape[0] > 1 and past > 2 and ids.shape[1] == 1:  # a step after a prompt padded by 2 slots
            mask[-1, -3:-1] = 0
            positions[-1] -= 2
        kwargs["attention_mask"] = mask
        if "position_ids" in kwargs:
            kwargs["position_ids"] = positions.to(kwargs["position_ids"].dtype)
        sets.append((args, kwargs))
    return sets
