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

from hf_decoding import IDS, VOCAB, check_validates_and_decodes, export_step

transformers = pytest.importorskip("transformers")

WIDTH, LAYERS, HEADS = 64, 2, 4
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


@functools.lru_cache(maxsize=None)
def exported(name: str):
    """The model and its decoder exported from a step with 5 cached and 3 new tokens."""
    return export_step(*_config(name))


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
    expert_matmuls = [n for n in r.model.graph if n.op_type == "MatMul" and ".experts." in n.inputs[1].name]
    assert len(expert_matmuls) == 2 * EXPERTS[name] * moe_layers
    assert not any(n.op_type in ("Loop", "Scan", "NonZero") for n in r.model.graph)

    check_validates_and_decodes(model, r)


def test_dbrx_experts_loop_validates_and_decodes_as_generate():
    """DBRX's experts loop over the experts some token selected (a count known only when the model runs):
    captured as the same loop over every expert, the export validates and decodes as ``generate``."""
    cfg = transformers.DbrxConfig(vocab_size=VOCAB, d_model=WIDTH, n_layers=LAYERS, n_heads=HEADS, max_seq_len=128,
                                  attn_config={"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
                                  ffn_config={"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2}, **IDS)
    model, r = export_step(transformers.DbrxForCausalLM, cfg)
    check_validates_and_decodes(model, r)
