"""Target ``genai-cpu``'s RMS norms not of a residual sum as ``SimplifiedLayerNormalization`` (a tiny Llama's
and a tiny Qwen2's first layer's, a tiny Qwen3's norms of heads) and its padding mask (``total_sequence_length``,
``seqlens_k``, ``attention_bias`` from ``attention_mask`` in 9 nodes): the rewritten decoder checked against
eager PyTorch (the export's own check, and its greedy decoding with a left-padded row), a batch padded on the
right as onnxruntime-genai pads one (``PadInputs``) equal to eager at its tokens over a prompt and a decode
step, and a norm or a mask rewritten wrong refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir
import pytest
import torch

from onnxport.errors import RuntimeTargetError
from onnxport.targets import TARGETS, genai_cpu
from onnxport.targets.genai_attention import fuse_group_query_attention
from onnxport.targets.genai_cpu import APPLIED, genai_fusions
from onnxport.targets.genai_norm import fuse_rms_norm
from onnxport.targets.genai_rotary import MAX_POSITIONS_KEY, recorded_positions

pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)

transformers = pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")

NORM = {"Pow", "ReduceMean", "Sqrt", "Reciprocal"}
# the padding mask's nodes: total_sequence_length (Shape, Cast), seqlens_k (ArgMax, Cast), attention_bias
# (Mul, Unsqueeze twice, Equal, Where)
MASK = {"Shape": 1, "Cast": 2, "ArgMax": 1, "Unsqueeze": 2, "Equal": 1, "Where": 1, "Concat": 0, "Expand": 0}


def _tiny(family: str, path):
    """A tiny ``family`` decoder (2 layers, hidden 64, grouped-query attention) of seeded random weights
    written by ``save_pretrained``; its eager model."""
    torch.manual_seed(5)
    common = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, pad_token_id=0,
                  bos_token_id=1, eos_token_id=2)
    model = (transformers.LlamaForCausalLM(transformers.LlamaConfig(**common)) if family == "llama" else
             transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))).eval()
    model.save_pretrained(path)
    return model


def _right_padded_matches_eager(eager, proto):
    """A batch of two prompts padded on the right (the second 3 tokens shorter), position ids as
    onnxruntime-genai gives them (``position_inputs.cpp``: 0.. on the tokens, 0 on the padding), then
    one decode step (the mask extended by 1, each row at its own next position): the logits at the
    tokens equal eager's."""
    session = ort.InferenceSession(proto.SerializeToString())
    ids = np.array([[5, 17, 42, 9, 11, 23], [7, 3, 30, 0, 0, 0]], np.int64)
    mask = np.array([[1] * 6, [1, 1, 1, 0, 0, 0]], np.int64)
    positions = np.array([[0, 1, 2, 3, 4, 5], [0, 1, 2, 0, 0, 0]], np.int64)
    feed = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
    feed |= {i.name: np.zeros((2, 2, 0, 16), np.float32) for i in session.get_inputs()
             if i.name.startswith("past_key_values.")}
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, feed)))
    with torch.no_grad():
        expected = eager(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                         position_ids=torch.tensor(positions), use_cache=True)
    np.testing.assert_allclose(got["logits"][0], expected.logits[0].numpy(), atol=1e-4)
    np.testing.assert_allclose(got["logits"][1, :3], expected.logits[1, :3].numpy(), atol=1e-4)
    step = {"input_ids": np.array([[13], [14]], np.int64), "attention_mask": np.concatenate([mask, [[1], [1]]], 1),
            "position_ids": np.array([[6], [3]], np.int64)}
    step |= {n.replace("present", "past_key_values"): v for n, v in got.items() if n.startswith("present.")}
    with torch.no_grad():
        after = eager(input_ids=torch.tensor(step["input_ids"]), attention_mask=torch.tensor(step["attention_mask"]),
                      position_ids=torch.tensor(step["position_ids"]), past_key_values=expected.past_key_values)
    np.testing.assert_allclose(session.run(["logits"], step)[0], after.logits.numpy(), atol=1e-4)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_first_norm_and_mask(family, tmp_path):
    from onnxport.pretrained import export_pretrained

    eager = _tiny(family, tmp_path / family)
    result = export_pretrained(tmp_path / family, target="genai-cpu", generate=2)
    decoder = result.parts["model"]
    assert decoder.validation.ok and all(g.ok for _, g in result.generation) and result.ok
    assert [label for label, _ in result.generation][-1] == "batch 2, the second prompt left-padded"
    fusions = genai_fusions(decoder.model)
    assert fusions["norm"] == fusions["skip_norm"] == APPLIED
    ops = [n.op_type for n in decoder.model.graph]
    assert not NORM & set(ops)  # every RMS norm fused: the first layer's one, the others of residual sums
    norm = next(n for n in decoder.model.graph if n.op_type == "SimplifiedLayerNormalization")
    assert norm.domain == "" and norm.inputs[0].producer().op_type == "Gather"  # the embedding's
    attrs = {k: a.value for k, a in norm.attributes.items()}
    assert attrs["axis"] == -1 and attrs["stash_type"] == 1 and attrs["epsilon"] == pytest.approx(1e-5)
    assert ops.count("SkipSimplifiedLayerNormalization") == 4
    gqa = [n for n in decoder.model.graph if n.op_type == "GroupQueryAttention"]
    mask_nodes = {id(n): n.op_type for g in gqa for n in _ancestors_from_mask(g)}  # shared by every attention
    assert {k: ops.count(k) for k in MASK} == MASK and len(mask_nodes) == 9
    assert sorted(mask_nodes.values()) == sorted([k for k, n in MASK.items() for _ in range(n)] + ["Mul"])
    _right_padded_matches_eager(eager, decoder.model_proto)


def test_norms_of_heads(tmp_path):
    """A tiny Qwen3's RMS norms of the query and key heads (``[B, S, N, d]``, over the head size) as
    ``SimplifiedLayerNormalization`` too, beside the first layer's: the export's check against eager passes."""
    from onnxport.pretrained import export_pretrained

    torch.manual_seed(5)
    config = transformers.Qwen3Config(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                      max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.Qwen3ForCausalLM(config).save_pretrained(tmp_path / "qwen3")
    result = export_pretrained(tmp_path / "qwen3", target="genai-cpu", generate=0)
    decoder = result.parts["model"]
    norms = [n for n in decoder.model.graph if n.op_type == "SimplifiedLayerNormalization"]
    assert decoder.validation.ok and genai_fusions(decoder.model)["norm"] == APPLIED
    assert sorted(len(n.inputs[0].shape) for n in norms) == [3] + [4] * 4  # the first layer's; q and k per layer
    assert not NORM & {n.op_type for n in decoder.model.graph}


def _ancestors_from_mask(gqa):
    """The nodes between ``attention_mask`` and ``gqa``'s seqlens_k, total_sequence_length, attention_bias."""
    found, stack = [], [gqa.inputs[5], gqa.inputs[6], gqa.inputs[10]]
    while stack:
        node = stack.pop().producer()
        if node is not None and node not in found:
            found.append(node)
            stack.extend(v for v in node.inputs if v is not None and v.producer() is not None)
    return found


def _wrong_epsilon(model):
    count = fuse_rms_norm(model)
    for node in model.graph:
        if node.op_type == "SimplifiedLayerNormalization":
            node.attributes["epsilon"] = ir.AttrFloat32("epsilon", 1.0)
    return count


def _bias_ignored(model):
    reasons = fuse_group_query_attention(model)
    for node in [n for n in model.graph if n.op_type == "GroupQueryAttention"]:
        node.replace_input_with(10, None)
    return reasons


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_a_wrong_norm_is_refused(family, tmp_path, monkeypatch):
    """The first norm with epsilon 1 instead of the model's: the export's check against eager refuses it."""
    from onnxport.pretrained import export_pretrained

    _tiny(family, tmp_path / family)
    monkeypatch.setattr(genai_cpu, "fuse_rms_norm", _wrong_epsilon)
    with pytest.raises(RuntimeTargetError, match="rewritten for target 'genai-cpu' differs from eager"):
        export_pretrained(tmp_path / family, target="genai-cpu", validate=False, generate=0)


def test_a_mask_ignored_fails_the_left_padded_decoding(tmp_path, monkeypatch):
    """Without its attention_bias the rewritten decoder passes the check at full masks but decodes a
    left-padded row otherwise than eager: the generation check says so."""
    from onnxport.pretrained import export_pretrained

    _tiny("llama", tmp_path / "llama")
    monkeypatch.setattr(genai_cpu, "fuse_group_query_attention", _bias_ignored)
    result = export_pretrained(tmp_path / "llama", target="genai-cpu", validate=False, generate=4)
    outcome = dict(result.generation)
    assert outcome["batch 1"].ok and not outcome["batch 2, the second prompt left-padded"].ok


def test_max_positions_of_zero_is_not_recorded():
    model = ir.Model(ir.Graph([], [], nodes=[]), ir_version=10)
    assert recorded_positions(model) == (None, "the maximum position is not known (not recorded)")
    model.metadata_props[MAX_POSITIONS_KEY] = "0"
    assert recorded_positions(model) == (None, "the recorded maximum position is 0 (cos/sin tables of no row)")
    model.metadata_props[MAX_POSITIONS_KEY] = "64"
    assert recorded_positions(model) == (64, "") and MAX_POSITIONS_KEY in model.metadata_props


def test_the_check_runs_on_the_target_runtime(monkeypatch):
    """``check_rewritten`` validates both models on ``Target.runtime`` of the rewritten model's target."""
    import importlib

    from onnxport.verify.report import ValidationReport
    from onnxport.verify.rewritten import check_rewritten

    monkeypatch.setitem(TARGETS, "genai-cpu", dataclasses.replace(TARGETS["genai-cpu"], runtime="elsewhere"))
    runtimes = []
    validate_module = importlib.import_module("onnxport.verify.validate")  # (the package's name is the function)
    monkeypatch.setattr(validate_module, "validate", lambda result, **kw: runtimes.append(kw["runtime"]) or
                        ValidationReport(()))

    class Rewritten:
        target = "genai-cpu"

    check_rewritten(None, Rewritten(), None, None)
    assert runtimes == ["elsewhere"]
