"""Target ``genai-cpu``: its RMS norms not of a residual sum as ``SimplifiedLayerNormalization`` (a tiny Llama's
and a tiny Qwen2's first layer's, a tiny Qwen3's norms of heads), its padding mask (``total_sequence_length``,
``seqlens_k``, ``attention_bias`` from ``attention_mask`` in 9 nodes) and its rotary inside
``GroupQueryAttention`` reading the packed projections whole: the rewritten decoder checked against eager
PyTorch (the export's own check on inputs fed as onnxruntime-genai feeds them, and its greedy decoding); a batch
padded on the right as onnxruntime-genai pads one (``PadInputs``) equal to eager at its tokens over a prompt and
a decode step, in onnxruntime and in onnxruntime-genai; a left-padded batch not (the documented limit); a head
size of 8 keeping the rotary outside; a norm or a mask rewritten wrong refused."""

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
    assert [label for label, _ in result.generation] == ["batch 1", "batch 2, prompts of one length"]
    assert {c.inputs for c in decoder.validation.checks} == {"inputs 1", "inputs 2", "inputs 3"}
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
    """``fuse_group_query_attention``, then each ``GroupQueryAttention``'s attention_bias times 0: no padding masked."""
    reasons = fuse_group_query_attention(model)
    zero = ir.Value(name="zero_bias_factor", const_value=ir.tensor(np.array(0, np.float32)))
    model.graph.register_initializer(zero)
    for node in [n for n in model.graph if n.op_type == "GroupQueryAttention"]:
        nothing = ir.Node("", "Mul", [node.inputs[10], zero])
        model.graph.append(nothing)
        node.replace_input_with(10, nothing.outputs[0])
    return reasons


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_a_wrong_norm_is_refused(family, tmp_path, monkeypatch):
    """The first norm with epsilon 1 instead of the model's: the export's check against eager refuses it."""
    from onnxport.pretrained import export_pretrained

    _tiny(family, tmp_path / family)
    monkeypatch.setattr(genai_cpu, "fuse_rms_norm", _wrong_epsilon)
    with pytest.raises(RuntimeTargetError, match="rewritten for target 'genai-cpu' differs from eager"):
        export_pretrained(tmp_path / family, target="genai-cpu", validate=False, generate=0)


def test_a_mask_ignored_is_refused(tmp_path, monkeypatch):
    """Without its attention_bias the rewritten decoder computes a row padded on the right otherwise than
    eager: the export's check, fed such a row as onnxruntime-genai feeds it, refuses it."""
    from onnxport.pretrained import export_pretrained

    _tiny("llama", tmp_path / "llama")
    monkeypatch.setattr(genai_cpu, "fuse_group_query_attention", _bias_ignored)
    with pytest.raises(RuntimeTargetError, match="rewritten for target 'genai-cpu' differs from eager"):
        export_pretrained(tmp_path / "llama", target="genai-cpu", validate=False, generate=0)


def test_a_left_padded_batch_is_not_what_the_decoder_computes(tmp_path):
    """The documented limit of the rotary inside ``GroupQueryAttention``: after a left-padded first prompt
    (transformers' positions, 1 on the padding), the next step's logits of the padded row differ from eager's."""
    from onnxport.pretrained import export_pretrained

    eager = _tiny("qwen2", tmp_path / "qwen2")
    session = ort.InferenceSession(export_pretrained(tmp_path / "qwen2", target="genai-cpu", validate=False,
                                                     generate=0).parts["model"].model_proto.SerializeToString())
    ids = np.array([[5, 17, 42, 9], [0, 0, 7, 3]], np.int64)
    mask = np.array([[1, 1, 1, 1], [0, 0, 1, 1]], np.int64)
    positions = np.array([[0, 1, 2, 3], [1, 1, 0, 1]], np.int64)
    feed = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
    feed |= {i.name: np.zeros((2, 2, 0, 16), np.float32) for i in session.get_inputs()
             if i.name.startswith("past_key_values.")}
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, feed)))
    step = {"input_ids": np.array([[13], [14]], np.int64), "attention_mask": np.concatenate([mask, [[1], [1]]], 1),
            "position_ids": np.array([[4], [2]], np.int64)}
    with torch.no_grad():
        first = eager(**{k: torch.tensor(v) for k, v in feed.items() if not k.startswith("past")}, use_cache=True)
        after = eager(**{k: torch.tensor(v) for k, v in step.items()}, past_key_values=first.past_key_values)
    step |= {n.replace("present", "past_key_values"): v for n, v in got.items() if n.startswith("present.")}
    logits = session.run(["logits"], step)[0]
    np.testing.assert_allclose(logits[0], after.logits[0].numpy(), atol=1e-4)  # the unpadded row
    assert np.abs(logits[1] - after.logits[1].numpy()).max() > 1e-3


def test_heads_of_8_keep_the_rotary_outside(tmp_path):
    """A head size of 8 (the operator's own rotary needs a multiple of 16): the rotary stays outside
    ``GroupQueryAttention``, the packed projections are split for it, and the decoder stays right for a
    left-padded batch (the decoding check with a left-padded second prompt)."""
    from onnxport.pretrained import export_pretrained

    torch.manual_seed(5)
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "llama")
    result = export_pretrained(tmp_path / "llama", target="genai-cpu", generate=2)
    decoder = result.parts["model"]
    fusions = genai_fusions(decoder.model)
    assert fusions["rotary"].endswith("outside GroupQueryAttention) (the head size 8 is not a multiple of 16 (the "
                                      "operator's rotary needs one))") and fusions["packed_qkv"] == APPLIED
    ops = [n.op_type for n in decoder.model.graph]
    assert ops.count("RotaryEmbedding") == 4 and ops.count("Split") == 2
    assert [label for label, _ in result.generation] == ["batch 1", "batch 2, the second prompt left-padded"]
    assert decoder.validation.ok and result.ok


@pytest.mark.slow
def test_a_batch_padded_on_the_right_decodes_in_genai(tmp_path):
    """onnxruntime-genai decoding a batch of two prompts of unequal length, the shorter padded on the right
    with ``pad_token_id`` (as it pads one), with the cache one shared buffer: each row's greedy tokens equal
    eager ``generate``'s on that prompt alone."""
    og = pytest.importorskip("onnxruntime_genai")
    from onnxport.pretrained import export_pretrained

    eager = _tiny("qwen2", tmp_path / "qwen2")
    export_pretrained(tmp_path / "qwen2", target="genai-cpu", generate=0).save(tmp_path / "out")
    prompts, steps = [[5, 17, 42, 90, 7, 3, 25], [9, 11, 23, 60]], 6
    model = og.Model(str(tmp_path / "out"))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompts[0]) + steps, do_sample=False, batch_size=2)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([prompts[0], prompts[1] + [0] * 3], np.int32))
    rows = [[], []]
    while not generator.is_done():
        generator.generate_next_token()
        for row, token in zip(rows, generator.get_next_tokens()):
            row.append(int(token))
    for prompt, row in zip(prompts, rows):
        with torch.no_grad():
            expected = eager.generate(torch.tensor([prompt]), max_new_tokens=len(row), min_new_tokens=len(row),
                                      do_sample=False)
        assert len(row) >= 2 and row == expected[0, len(prompt):].tolist()


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
