"""Hugging Face decoders called as their users call them, ``model(input_ids=..., attention_mask=...,
position_ids=..., past_key_values=DynamicCache(...), use_cache=True)``, from tiny configs (2 layers,
width 64, vocab 1000, seeded): exported with the cache as inputs and outputs, validated at the default
sizes (``total = past + seq`` respected, an empty cache included), and decoded greedily in
onnxruntime against the model's own ``generate``: 16 tokens, batch 1 and a left-padded batch 2.
Mistral has a sliding window of 8, shorter than prompt and generated tokens together; Gemma 3 a
sliding-window layer and a full-attention one."""

import functools

import numpy as np
import onnx
import pytest
import torch

import onnxport

from hf_decoding import IDS, VOCAB, check_validates_and_decodes, export_step, prompts

transformers = pytest.importorskip("transformers")

WIDTH, LAYERS, HEADS, FF = 64, 2, 4, 128


def _config(name: str):
    common = dict(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  intermediate_size=FF, max_position_embeddings=128, **IDS)
    if name == "llama":
        return transformers.LlamaForCausalLM, transformers.LlamaConfig(num_key_value_heads=2, **common)
    if name == "qwen2":
        return transformers.Qwen2ForCausalLM, transformers.Qwen2Config(num_key_value_heads=2, **common)
    if name == "phi":
        return transformers.PhiForCausalLM, transformers.PhiConfig(**common)
    if name == "mistral":
        return transformers.MistralForCausalLM, transformers.MistralConfig(num_key_value_heads=2, sliding_window=8,
                                                                           **common)
    if name == "gemma3":  # hybrid: a sliding-window layer, then a full-attention one
        return transformers.Gemma3ForCausalLM, transformers.Gemma3TextConfig(
            num_key_value_heads=2, head_dim=16, sliding_window=8, layer_types=["sliding_attention", "full_attention"],
            **common)
    return transformers.GPT2LMHeadModel, transformers.GPT2Config(vocab_size=VOCAB, n_embd=WIDTH, n_layer=LAYERS,
                                                                  n_head=HEADS, n_positions=128, **IDS)


@functools.lru_cache(maxsize=None)
def exported(name: str):
    """The model and its decoder exported from a step with 5 cached and 3 new tokens."""
    return export_step(*_config(name))


@pytest.mark.parametrize("name", ["llama", "qwen2", "phi", "gpt2", "mistral", "gemma3"])
def test_decoder_with_cache_validates_and_decodes_as_generate(name):
    model, r = exported(name)
    onnx.checker.check_model(r.model_proto, full_check=True)
    inputs = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in r.model.graph.inputs}
    outputs = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in r.model.graph.outputs}
    heads = 4 if name in ("phi", "gpt2") else 2
    assert list(inputs) == ["input_ids", "attention_mask", "position_ids"] + \
        [f"past_key_values.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    assert inputs["attention_mask"] == ["batch", "total"]
    assert inputs["past_key_values.1.value"] == ["batch", heads, "past", 16]
    assert outputs["logits"] == ["batch", "seq", VOCAB]
    assert outputs["present.0.key"] == ["batch", heads, "past + seq", 16]

    check_validates_and_decodes(model, r)


def test_a_decoder_that_computes_otherwise_is_reported_at_its_first_differing_step():
    model, r = exported("llama")
    proto = onnx.ModelProto()
    proto.CopyFrom(r.model_proto)
    head = next(t for t in proto.graph.initializer if t.name.startswith("lm_head"))
    values = onnx.numpy_helper.to_array(head).copy()
    values[:, :] = values[::-1, :] if values.shape[0] == VOCAB else values[:, ::-1]  # the vocabulary reversed
    head.CopyFrom(onnx.numpy_helper.from_array(values, head.name))
    from onnxport.verify import check_generation

    report = check_generation(model, proto, prompts()[0][:1], max_new_tokens=4)
    assert not report.ok and report.first_difference == 0
    assert report.logits_max_abs[0] > 1e-3 and "first differing step: 0" in str(report)


def test_the_call_as_written_needs_no_relation():
    """Without ``relations``, the mask's ``total = past + seq`` is adopted from the cache's contract,
    with one notice; the export validates and decodes as with the relation stated."""
    cls, cfg = _config("llama")
    with pytest.warns(UserWarning, match=r"adopted the relation total = past \+ seq"):
        model, result = export_step(cls, cfg, relations=None)
    assert str(result.captured.relations["total"]) == "past + seq"
    check_validates_and_decodes(model, result)


def test_a_model_without_a_cache_input_is_refused_for_the_decoding_check():
    model, _ = exported("gpt2")

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            return self.model(input_ids=input_ids, use_cache=False).logits

    r = onnxport.to_onnx(Plain(), (torch.randint(3, VOCAB, (1, 4)),), dynamic_shapes={"input_ids": {1: "seq"}})
    with pytest.raises(onnxport.ValidationError, match="no 'logits'|no cache input"):
        r.check_generation(model, torch.tensor([[5, 6, 7]]), max_new_tokens=2)


def test_the_greedy_loop_feeds_positions_as_generate_does():
    from onnxport.verify.decoding import first_positions

    mask = np.array([[1, 1, 1], [0, 1, 1]])
    assert first_positions(mask).tolist() == [[0, 1, 2], [0, 0, 1]]
