"""State-space, hybrid and recurrent decoders of transformers with default arguments (no
``rewrite_control_flow``), tiny configs, seeded. Jamba (Mamba layers with an attention layer and
experts) and RecurrentGemma (RG-LRU recurrent blocks and a local attention block): capture fails on
their Python loops over the sequence, onnxport rewrites them (one warning naming them). Mamba2 (its
chunked scan pads the sequence to whole chunks and cuts the padding under ``if pad_size > 0``):
captured with the cut at every length, no loop, no constraint. Each export matches eager PyTorch at
the default sizes, one token and longer sequences included.

With their caches: Mamba2's decoder (prompt and decoding steps in one model, the convolution and
recurrent states as inputs and outputs) and Jamba's decoding step (one token, its Mamba states and
its attention layer's keys and values) validate and decode 16 greedy tokens in onnxruntime as
``generate`` does."""

import warnings

import pytest
import torch

import onnxport
from exportcheck import check_export, count_ops
from hf_recurrent import Backbone, spread

transformers = pytest.importorskip("transformers")

VOCAB = 100
IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _jamba_config(vocab: int = VOCAB):
    return transformers.JambaConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=64, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, attn_layer_period=2,
        attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, num_experts=2, use_mamba_kernels=False,
        **IDS)


def _mamba2_config(vocab: int = VOCAB):
    return transformers.Mamba2Config(vocab_size=vocab, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
                                     conv_kernel=4, num_heads=4, head_dim=16, n_groups=1, chunk_size=4, **IDS)


def _jamba():
    return transformers.JambaModel(_jamba_config())


def _recurrent_gemma():
    return transformers.RecurrentGemmaModel(transformers.RecurrentGemmaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=64, lru_width=32, attention_window_size=8,
        block_types=["recurrent", "recurrent", "attention"]))


def _falcon_mamba():
    # its loop over the sequence pins seq in torch's range check (``7 <= seq <= 7``), not in a guard
    return transformers.FalconMambaModel(transformers.FalconMambaConfig(
        vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4, **IDS))


@pytest.mark.parametrize("build", [_jamba, _recurrent_gemma, _falcon_mamba], ids=["jamba", "recurrent_gemma",
                                                                                   "falcon_mamba"])
def test_exports_with_default_arguments(build):
    torch.manual_seed(0)
    model = Backbone(build()).eval()
    with pytest.warns(UserWarning, match="onnxport rewrote"):
        r = check_export(model, (torch.randint(0, VOCAB, (2, 7)),), {"input_ids": {0: "batch", 1: "seq"}},
                         sizes=[{"batch": 1, "seq": 1}, {"batch": 2, "seq": 19}], values=[],
                         expect_outputs={"output": ["batch", "seq", 32]})
    assert count_ops(r, "Scan") + count_ops(r, "Loop") >= 1


def test_falcon_mamba_with_its_attention_mask_is_rewritten_by_default():
    # with the mask, torch's range check pins seq (``7 <= seq <= 7``): the loop over the sequence
    torch.manual_seed(0)
    model = _falcon_mamba().eval()
    ids, mask = torch.randint(0, VOCAB, (2, 7)), torch.ones(2, 7, dtype=torch.int64)
    with pytest.warns(UserWarning, match="onnxport rewrote the for at .*modeling_falcon_mamba.py"):
        check_export(model, (), {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
                     kwargs={"input_ids": ids, "attention_mask": mask}, values=[],
                     sizes=[{"batch": 1, "seq": 5}, {"batch": 3, "seq": 12}])


def test_mamba2_exports_with_default_arguments_at_every_length():
    import transformers.models.mamba2.modeling_mamba2 as mamba2

    torch.manual_seed(0)
    model = Backbone(transformers.Mamba2Model(_mamba2_config())).eval()
    scan = mamba2.mamba2_chunk_scan
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing rewritten, nothing adopted
        r = check_export(model, (torch.randint(0, VOCAB, (2, 7)),), {"input_ids": {0: "batch", 1: "seq"}},
                         sizes=[{"batch": 1, "seq": 1}, {"batch": 1, "seq": 4}, {"batch": 2, "seq": 8},
                                {"batch": 3, "seq": 19}], expect_outputs={"output": ["batch", "seq", 32]})
    assert not r.constraints and not r.rewrite_notes
    assert count_ops(r, "If") == 0  # the padding cut is one Slice at every length
    assert mamba2.mamba2_chunk_scan is scan  # restored after capture


def test_mamba2_example_of_one_chunk_is_traced_at_two_chunks_and_keeps_every_length():
    # seq = 3 pads to one chunk of 4: torch.export would specialize that count of 1, and with it seq;
    # capture traces at seq = 5 (two chunks), the constraint that trace states (seq >= 5) is checked
    # at the sizes it excludes and dropped
    torch.manual_seed(0)
    model = Backbone(transformers.Mamba2Model(_mamba2_config())).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing adopted in the end
        r = check_export(model, (torch.randint(0, VOCAB, (2, 3)),), {"input_ids": {0: "batch", 1: "seq"}},
                         sizes=[{"batch": 1, "seq": 1}, {"batch": 2, "seq": 4}, {"batch": 3, "seq": 5},
                                {"batch": 2, "seq": 19}], expect_outputs={"output": ["batch", "seq", 32]},
                         rewrite_control_flow=False)
    assert not r.constraints
    steps = [a.why for a in r.captured.attempts if a.applied]
    assert any("traced at seq = 5" in why for why in steps), steps
    assert [t.shape[1] for t in r.captured.example[0]] == [3]  # the user's example is the one handed forward


# ------------------------------------------------------------------------------ with their caches
DECODE_VOCAB = 1000


def _prompts() -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts of 6 tokens, the second left-padded by 2, and their attention mask."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, DECODE_VOCAB, (2, 6), generator=gen)
    mask = torch.ones(2, 6, dtype=torch.int64)
    ids[1, :2], mask[1, :2] = 0, 0
    return ids, mask


def _cache_after(model, past: int):
    cache = transformers.DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=torch.randint(3, DECODE_VOCAB, (2, past)), cache=cache, use_cache=True)
    return cache


def test_mamba2_decoder_with_its_states_decodes_as_generate():
    """Prompt and decoding steps in one model: dynamic batch and seq (the chunked scan from the
    cached recurrent state; at seq = 1 it computes what transformers' recurrent step computes)."""
    torch.manual_seed(0)
    model = spread(transformers.Mamba2ForCausalLM(_mamba2_config(DECODE_VOCAB)))
    seq = 7
    kwargs = dict(input_ids=torch.randint(3, DECODE_VOCAB, (2, seq)),
                  attention_mask=torch.ones(2, seq, dtype=torch.int64), cache=_cache_after(model, 5), use_cache=True)
    r = onnxport.to_onnx(model, kwargs=kwargs, dynamic_shapes={
        "input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "cache": {0: "batch"}})
    dims = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in r.model.graph.inputs}
    assert dims["past_key_values.0.conv_state"] == ["batch", 80, 4]
    assert dims["past_key_values.1.recurrent_state"] == ["batch", 4, 16, 8]
    assert [v.name for v in r.model.graph.outputs] == ["logits"] + [
        f"present.{i}.{s}" for i in range(2) for s in ("conv_state", "recurrent_state")]
    report = r.validate()
    assert report.ok, report
    assert any(c.sizes.endswith("seq=1") for c in report.checks if not c.rejected)

    ids, mask = _prompts()
    single = r.check_generation(model, ids[:1], max_new_tokens=16)
    assert single.ok, single
    padded = r.check_generation(model, ids, attention_mask=mask, max_new_tokens=16)
    assert padded.ok, padded
    assert len(padded.expected[0]) == 16 and len(set(padded.expected[0])) > 4  # the tokens vary


def test_jamba_decoding_step_decodes_as_generate():
    """One new token per step: the Mamba layer's convolution and recurrent states, the attention
    layer's keys and values (``past``), the mask over ``past + 1`` tokens. The prompt is fed one
    token at a time; transformers ignores the mask of a one-token step in its Mamba layers, so the
    prompts are not padded."""
    torch.manual_seed(0)
    model = spread(transformers.JambaForCausalLM(_jamba_config(DECODE_VOCAB)))
    kwargs = dict(input_ids=torch.randint(3, DECODE_VOCAB, (2, 1)), attention_mask=torch.ones(2, 6, dtype=torch.int64),
                  cache=_cache_after(model, 5), use_cache=True)
    per_kind = {"key": {0: "batch", 2: "past"}, "value": {0: "batch", 2: "past"}, "conv_state": {0: "batch"},
                "recurrent_state": {0: "batch"}}
    r = onnxport.to_onnx(model, kwargs=kwargs, relations={"total": "past + 1"}, dynamic_shapes={
        "input_ids": {0: "batch"}, "attention_mask": {0: "batch", 1: "total"}, "cache": per_kind})
    dims = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in r.model.graph.inputs}
    assert dims["past_key_values.0.conv_state"] == ["batch", 64, 4]
    assert dims["past_key_values.1.key"] == ["batch", 1, "past", 16]
    report = r.validate()
    assert report.ok, report
    assert any("past=0" in c.sizes for c in report.checks if not c.rejected)  # an empty cache

    ids, _ = _prompts()
    ids[1, :2] = torch.tensor([17, 42])
    for prompt in (ids[:1], ids):
        decoded = r.check_generation(model, prompt, max_new_tokens=16)
        assert decoded.ok, decoded
    assert len(set(decoded.expected[0])) > 4
