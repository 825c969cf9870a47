"""Mixture-of-experts decoders of transformers 5 (Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V3) called
as their users call them, with a ``DynamicCache``, from tiny configs (2 layers, width 64, vocab
1000, 4 to 8 experts, 2 per token, seeded): exported with the cache as inputs and outputs,
validated at the default sizes (``total = past + seq``, an empty cache included), and decoded
greedily in onnxruntime against the model's own ``generate``: 16 tokens, batch 1 and a left-padded
batch 2. The experts run transformers' grouped products (one Slice + MatMul per expert in ONNX);
Mixtral is also exported with ``experts_implementation="eager"``, its per-expert Python loop."""

import functools

import onnx
import pytest
import torch

import onnxport

transformers = pytest.importorskip("transformers")
from transformers import DynamicCache  # noqa: E402

VOCAB, WIDTH, LAYERS, HEADS = 1000, 64, 2, 4
IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
COMMON = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
              max_position_embeddings=128, **IDS)
EXPERTS = {"mixtral": 4, "mixtral-eager": 4, "qwen2_moe": 4, "qwen3_moe": 4, "deepseek_v3": 8}


def _config(name: str):
    experts = EXPERTS[name]
    if name.startswith("mixtral"):
        cfg = transformers.MixtralConfig(num_key_value_heads=2, intermediate_size=128, num_local_experts=experts,
                                         num_experts_per_tok=2, **COMMON)
        if name == "mixtral-eager":
            cfg._experts_implementation = "eager"
        return transformers.MixtralForCausalLM, cfg
    if name == "qwen2_moe":  # routed experts and a gated shared expert
        return transformers.Qwen2MoeForCausalLM, transformers.Qwen2MoeConfig(
            num_key_value_heads=2, intermediate_size=128, moe_intermediate_size=32, shared_expert_intermediate_size=64,
            num_experts=experts, num_experts_per_tok=2, **COMMON)
    if name == "qwen3_moe":
        return transformers.Qwen3MoeForCausalLM, transformers.Qwen3MoeConfig(
            num_key_value_heads=2, head_dim=16, intermediate_size=128, moe_intermediate_size=32, num_experts=experts,
            num_experts_per_tok=2, **COMMON)
    # DeepSeek-V3: latent attention, a dense first layer, then routed experts chosen within groups
    return transformers.DeepseekV3ForCausalLM, transformers.DeepseekV3Config(
        num_key_value_heads=HEADS, intermediate_size=128, moe_intermediate_size=32, n_routed_experts=experts,
        num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, **COMMON)


DIMS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "seq"}, "past_key_values": {0: "batch", 2: "past"}}


@functools.lru_cache(maxsize=None)
def exported(name: str):
    """The model and its decoder exported from a step with 5 cached and 3 new tokens."""
    torch.manual_seed(0)
    cls, cfg = _config(name)
    model = cls(cfg).eval()
    past, seq = 5, 3
    cache = DynamicCache(config=cfg)
    with torch.no_grad():
        model(input_ids=torch.randint(3, VOCAB, (2, past)), past_key_values=cache, use_cache=True)
    kwargs = dict(input_ids=torch.randint(3, VOCAB, (2, seq)), attention_mask=torch.ones(2, past + seq, dtype=torch.int64),
                  position_ids=torch.arange(past, past + seq).expand(2, seq), past_key_values=cache, use_cache=True)
    result = onnxport.to_onnx(model, kwargs=kwargs, dynamic_shapes=DIMS, relations={"total": "past + seq"})
    return model, result


def _prompts():
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, 6), generator=gen)
    mask = torch.ones(2, 6, dtype=torch.int64)
    ids[1, :2], mask[1, :2] = IDS["pad_token_id"], 0  # the second prompt is 2 shorter: left padding
    return ids, mask


@pytest.mark.parametrize("name", list(EXPERTS))
def test_moe_decoder_with_cache_validates_and_decodes_as_generate(name):
    model, r = exported(name)
    onnx.checker.check_model(r.model_proto, full_check=True)
    inputs = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in r.model.graph.inputs}
    outputs = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in r.model.graph.outputs}
    assert list(inputs) == ["input_ids", "attention_mask", "position_ids"] + \
        [f"past_key_values.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    assert inputs["attention_mask"] == ["batch", "total"] and outputs["logits"] == ["batch", "seq", VOCAB]
    assert outputs["present.1.key"][::2] == ["batch", "past + seq"]
    moe_layers = 1 if name == "deepseek_v3" else LAYERS
    # two grouped products per MoE layer, one MatMul per expert each, every expert's matrix an initializer
    expert_matmuls = [n for n in r.model.graph if n.op_type == "MatMul" and n.inputs[1].name.startswith("model.layers.")
                      and ".experts." in n.inputs[1].name]
    assert len(expert_matmuls) == 2 * EXPERTS[name] * moe_layers
    assert not any(n.op_type in ("Loop", "Scan", "NonZero") for n in r.model.graph)

    report = r.validate()
    assert report.ok, report
    compared = [c for c in report.checks if not c.rejected]
    assert not report.rejected and len({c.inputs for c in compared}) >= 6
    for c in compared:
        sizes = {k: int(v) for k, v in (kv.split("=") for kv in c.sizes.split(", "))}
        assert sizes["total"] == sizes["past"] + sizes["seq"]
    assert any(c.why.startswith("empty") and "past=0" in c.sizes for c in compared)

    ids, mask = _prompts()
    single = r.check_generation(model, ids[:1], max_new_tokens=16)
    assert single.ok, single
    padded = r.check_generation(model, ids, attention_mask=mask, max_new_tokens=16)
    assert padded.ok, padded
    assert len(padded.expected[0]) == 16 and padded.got == padded.expected
