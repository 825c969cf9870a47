"""Target ``genai-cpu``: a tiny Llama (``export-hf --target genai-cpu``) and a tiny Qwen2
(``export_pretrained(target="genai-cpu")``), two architectures written by ``save_pretrained``, have
their attention fused as ``com.microsoft.GroupQueryAttention`` with a cache buffer shared by past and
present, rotating (``do_rotary``) by cos/sin caches of max_position_embeddings rows (right up to the last
position, refused beyond it) the q/k/v projections packed into one MatMul it reads whole, and the norms of
residual sums as SkipSimplifiedLayerNormalization; the rewritten decoder is validated against eager PyTorch
on inputs fed as onnxruntime-genai feeds them, its greedy tokens equal ``generate``'s in onnxruntime
(batch 1, and batch 2 of one length) and in onnxruntime-genai.
A model whose attention does not match keeps its standard graph and says why."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch

from onnxport import to_onnx
from onnxport.cli import main
from onnxport.targets.genai_cpu import APPLIED, CACHES_HELD, ROTARY_INSIDE, genai_fusions
from onnxport.targets.genai_rotary import position_caches
from tests.cli.test_export_hf_files import llama  # noqa: F401 - fixture: a saved tiny Llama

pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)

og = pytest.importorskip("onnxruntime_genai")
transformers = pytest.importorskip("transformers")

GENERATE = 6
PROMPT = [5, 17, 42, 99, 7, 3, 250]


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    """A tiny Qwen2 (biased q/k/v projections, grouped-query attention) written by ``save_pretrained`` (seeded)."""
    path = tmp_path_factory.mktemp("hf") / "qwen2"
    torch.manual_seed(1)
    config = transformers.Qwen2Config(vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def _eager_tokens(directory, steps: int) -> list[int]:
    model = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=steps, do_sample=False)
    return out[0, len(PROMPT):].tolist()


def _genai_tokens(directory, steps: int, prompt: list[int] = PROMPT) -> list[int]:
    """Greedy decoding in onnxruntime-genai of ``steps`` tokens after ``prompt``."""
    model = og.Model(str(directory))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + steps, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([prompt], dtype=np.int32))
    tokens = []
    while not generator.is_done():
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
    return tokens


def _check_fused(out, layers: int = 2):
    proto = onnx.load(str(out / "model.onnx"))
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("GroupQueryAttention") == layers and "Softmax" not in ops
    # rotated inside the attention by cos/sin caches, initializers of max_position_embeddings rows: no angle
    # computed per step; the packed projections read whole (no Split)
    assert not {"RotaryEmbedding", "Split", "Sin", "Cos", "Range"} & set(ops)
    positions = json.loads((out / "config.json").read_text())["max_position_embeddings"]
    caches = {i.name: i for i in proto.graph.initializer if i.name.endswith("_cache")}
    assert sorted(caches) == ["cos_cache", "sin_cache"]
    assert [tuple(i.dims) for i in caches.values()] == [(positions, 8)] * 2  # head size 16
    assert ops.count("MatMul") == 5 * layers + 1  # q/k/v packed, output, gate, up, down; lm_head
    # the norms of residual sums: after each attention and each MLP (the next layer's, the final one)
    assert ops.count("SkipSimplifiedLayerNormalization") == 2 * layers
    assert ops.count("SimplifiedLayerNormalization") == 1  # the first layer's, of the embedding alone
    gqa = next(n for n in proto.graph.node if n.op_type == "GroupQueryAttention")
    assert gqa.domain == "com.microsoft"
    assert {a.name: onnx.helper.get_attribute_value(a) for a in gqa.attribute if a.name.endswith("heads")
            or a.name == "do_rotary"} == {"num_heads": 4, "kv_num_heads": 2, "do_rotary": 1}
    assert list(gqa.input[1:3]) == ["", ""] and list(gqa.input[7:10]) == ["cos_cache", "sin_cache", "position_ids"]
    config = json.loads((out / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True


@pytest.mark.slow
def test_llama_export_hf_target_genai_cpu(llama, tmp_path):  # noqa: F811 - the fixture's value
    out, report = tmp_path / "out", tmp_path / "report.json"
    code = main(["export-hf", str(llama), "-o", str(out), "--quiet", "--target", "genai-cpu",
                 "--generate", str(GENERATE), "--report", str(report)])
    data = json.loads(report.read_text())
    assert code == 0 and data["ok"]
    assert {c["inputs"] for c in data["validation"]["model"]["checks"]} == {"inputs 1", "inputs 2", "inputs 3"}
    assert [g["label"] for g in data["generation"]] == ["batch 1", "batch 2, prompts of one length"]
    _check_fused(out)
    tokens = _genai_tokens(out, GENERATE)
    assert len(tokens) >= 2 and tokens == _eager_tokens(llama, GENERATE)


@pytest.mark.slow
def test_qwen2_export_pretrained_target_genai_cpu(qwen2, tmp_path):
    from onnxport.pretrained import export_pretrained

    result = export_pretrained(qwen2, target="genai-cpu", generate=GENERATE)
    decoder = result.parts["model"]
    assert decoder.target == "genai-cpu"
    assert genai_fusions(decoder.model) == {
        "attention": APPLIED, "rotary": f"{APPLIED} ({CACHES_HELD}; {ROTARY_INSIDE})", "shared_buffer": APPLIED,
        "packed_qkv": f"{APPLIED} (fed to GroupQueryAttention whole)", "skip_norm": APPLIED, "norm": APPLIED}
    assert decoder.validation.ok and all(g.ok for _, g in result.generation) and result.ok
    result.save(tmp_path / "out")
    _check_fused(tmp_path / "out")
    tokens = _genai_tokens(tmp_path / "out", GENERATE)
    assert len(tokens) >= 2 and tokens == _eager_tokens(qwen2, GENERATE)
    _check_last_positions(qwen2, tmp_path / "out" / "model.onnx")


def _check_last_positions(directory, path):
    """The decoder's logits at the last positions of its caches (max_position_embeddings - 3 .. - 1)
    and a row of a batch padded on the right (as onnxruntime-genai pads it, its padding at position 0) equal
    eager's; a position beyond them is refused by onnxruntime."""
    import onnxruntime as ort

    eager = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    last = eager.config.max_position_embeddings
    session = ort.InferenceSession(str(path))
    ids = np.array([[5, 17, 42], [9, 11, 0]], np.int64)
    mask = np.array([[1, 1, 1], [1, 1, 0]], np.int64)

    def run(positions):
        feed = {"input_ids": ids, "attention_mask": mask, "position_ids": np.array(positions, np.int64)}
        feed |= {i.name: np.zeros((2, 2, 0, 16), np.float32) for i in session.get_inputs()
                 if i.name.startswith("past_key_values.")}
        return session.run(["logits"], feed)[0]

    for start in (0, last - 3):
        positions = [[start, start + 1, start + 2], [start, start + 1, 0]]
        with torch.no_grad():
            expected = eager(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                             position_ids=torch.tensor(positions)).logits.numpy()
        got = run(positions)
        np.testing.assert_allclose(got[0], expected[0], atol=1e-5)
        np.testing.assert_allclose(got[1, :2], expected[1, :2], atol=1e-5)  # (the padded token's logits: any)
    with pytest.raises(Exception, match="exceeds cos/sin cache range"):
        run([[last - 2, last - 1, last]] * 2)


def test_position_caches_within_one_ulp_of_eager():
    """The cos/sin caches (float64, rounded) against eager's float32 cos/sin of the angles transformers
    computes (``inv_freq @ position_ids`` in float32), at 32768 positions of a 128-wide head."""
    dim, positions = 128, 32768
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    angles = (inv_freq[None, :, None] @ torch.arange(positions)[None, None, :].float()).transpose(1, 2)[0]
    for ours, eager in zip(position_caches(inv_freq.numpy(), positions), (angles.cos(), angles.sin())):
        eager = eager.numpy()
        assert ours.dtype == np.float32 and ours.shape == (positions, dim // 2)
        ulps = np.abs(ours.astype(np.float64) - eager) / np.spacing(np.abs(eager))
        assert ulps.max() <= 1 and (ours == eager).mean() > 0.9


class NoCacheAttention(torch.nn.Module):
    """Self-attention over its own tokens, no cache, masked by padding alone (not causal): no attention
    the fusion matches."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, input_ids, attention_mask):
        batch, seq = input_ids.shape
        q, k, v = (t.view(batch, seq, 2, 8).transpose(1, 2) for t in self.qkv(self.embed(input_ids)).chunk(3, dim=-1))
        bias = (1.0 - attention_mask[:, None, None, :].float()) * -1e4
        return torch.softmax((q * 0.25) @ k.transpose(2, 3) + bias, dim=-1) @ v


def test_unmatched_attention_keeps_the_standard_graph():
    inputs = {"input_ids": torch.tensor([[3, 4, 5, 6]]), "attention_mask": torch.tensor([[0, 1, 1, 1]])}
    dims = {"input_ids": {1: torch.export.Dim("seq")}, "attention_mask": {1: torch.export.Dim("seq")}}
    model = NoCacheAttention().eval()
    standard = to_onnx(model, kwargs=inputs, dynamic_shapes=dims)
    result = to_onnx(model, kwargs=inputs, dynamic_shapes=dims, target="genai-cpu")
    assert [n.op_type for n in result.model.graph] == [n.op_type for n in standard.model.graph]
    fusions = genai_fusions(result.model)
    assert fusions["attention"] == ("the mask compares positions by nothing, not by one causal LessOrEqual (a sliding "
                                    "window or another pattern the operator does not compute)")
    assert fusions["shared_buffer"] == fusions["rotary"] == fusions["packed_qkv"] == \
        "the attention is not GroupQueryAttention"
    assert fusions["skip_norm"].startswith("no RMS norm") and fusions["norm"] == "no RMS norm"
    assert result.validate().ok


@pytest.mark.slow
def test_genai_cpu_quantized_int4_validated_at_the_operator_sizes(qwen2, tmp_path):
    """``--quantize int4`` after the rewrite: MatMulNBits beside GroupQueryAttention, the accuracy
    checked at the sizes the operator runs (not the example, which it refuses), every set compared."""
    from onnxport.pretrained import export_pretrained

    result = export_pretrained(qwen2, target="genai-cpu", quantize="int4", generate=0)
    decoder = result.parts["model"]
    ops = [n.op_type for n in decoder.model.graph]
    assert ops.count("GroupQueryAttention") == 2 and ops.count("MatMulNBits") == 11 and "MatMul" not in ops
    checks = decoder.validation.checks
    assert sorted({c.inputs for c in checks}) == ["inputs 1", "inputs 2", "inputs 3"]
    assert len(checks) == 15 and all(np.isfinite(c.max_abs) and np.isfinite(c.cosine) for c in checks), checks
    # saved, it is one cache buffer shared by past and present, and onnxruntime-genai decodes it
    result.save(tmp_path / "out")
    config = json.loads((tmp_path / "out" / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True
    assert len(_genai_tokens(tmp_path / "out", GENERATE)) == GENERATE


def test_max_positions_only_where_the_angles_depend_on_the_position_alone():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from onnxport.library.transformers.rotary_positions import max_positions

    def rotary(**rope):
        config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=96,
                                          **({"rope_parameters": rope | {"rope_theta": 1e4}} if rope else {}))
        return torch.nn.Sequential(LlamaRotaryEmbedding(config))

    assert max_positions(rotary()) == max_positions(rotary(rope_type="linear", factor=2.0)) == (96, "")
    assert max_positions(rotary(rope_type="dynamic", factor=2.0)) == \
        (None, "the rotary scaling (dynamic) depends on more than the position")
    assert max_positions(torch.nn.Linear(2, 2))[0] is None


@pytest.mark.slow
def test_rotary_without_known_positions_computes_its_caches_each_step(qwen2, monkeypatch):
    """Where the number of positions is not known, the cos/sin are computed from position_ids each
    step (the reason recorded), still equal to eager."""
    import onnxport.library.transformers.rotary_positions as rotary_positions
    from onnxport.pretrained import export_pretrained

    monkeypatch.setattr(rotary_positions, "max_positions", lambda module: (None, "not known here"))
    decoder = export_pretrained(qwen2, target="genai-cpu", generate=GENERATE)
    model = decoder.parts["model"].model
    assert genai_fusions(model)["rotary"] == f"{APPLIED} (cos/sin computed each step: not known here; {ROTARY_INSIDE})"
    ops = [n.op_type for n in model.graph]
    assert "RotaryEmbedding" not in ops and {"Sin", "Cos", "Range"} <= set(ops)
    assert "onnxport.max_positions" not in model.metadata_props
    assert decoder.parts["model"].validation.ok and all(g.ok for _, g in decoder.generation)
