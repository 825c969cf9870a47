"""Mamba from a tiny config (2 layers, width 64, state 8, vocab 1000, seeded, weights spread so that
the tokens vary): its sequential selective scan (a Python loop over the sequence in a function
``forward`` calls, appending to a list then stacked) exported with default arguments (the loop
rewritten after capture fails on it, with a notice) as an ONNX ``Scan``, correct at other lengths;
and its decoding step with the convolution and recurrent states as inputs and outputs, decoded
greedily in onnxruntime against ``generate``."""

import pytest
import torch

import onnxport
from exportcheck import check_export, count_ops
from hf_recurrent import Backbone, spread

transformers = pytest.importorskip("transformers")
from transformers import DynamicCache  # noqa: E402

VOCAB = 1000


def _config():
    return transformers.MambaConfig(vocab_size=VOCAB, hidden_size=64, state_size=8, num_hidden_layers=2, expand=2,
                                    conv_kernel=4, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def test_the_sequential_selective_scan_exports_as_a_scan_correct_at_other_lengths():
    torch.manual_seed(0)
    model = Backbone(spread(transformers.MambaModel(_config())))
    ids = torch.randint(3, VOCAB, (2, 7))
    with pytest.raises(onnxport.SpecializationError, match="range\\(seq_len\\)"):
        onnxport.to_onnx(model, (ids,), dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}},
                         rewrite_control_flow=False)
    # by default the loop capture fails on is rewritten, with one notice naming it
    with pytest.warns(UserWarning,
                      match=r"onnxport rewrote the for at .*modeling_mamba.py:\d+ in mamba_selective_scan"):
        r = check_export(model, (ids,), {"input_ids": {0: "batch", 1: "seq"}}, atol=1e-4,
                         rtol=1e-3, sizes=[{"batch": 1, "seq": 1}, {"batch": 3, "seq": 30}],
                         expect_outputs={"output": ["batch", "seq", 64]})
    assert count_ops(r, "Scan") == 2  # one per layer
    assert any(n.rewritten and "mamba_selective_scan" in n.where for n in r.rewrite_notes)


def test_the_decoding_step_with_its_states_decodes_as_generate():
    torch.manual_seed(0)
    model = spread(transformers.MambaForCausalLM(_config()))
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=torch.randint(3, VOCAB, (2, 5)), cache=cache, use_cache=True)
    kwargs = dict(input_ids=torch.randint(3, VOCAB, (2, 1)), attention_mask=torch.ones(2, 1, dtype=torch.int64),
                  cache=cache, use_cache=True)
    r = onnxport.to_onnx(model, kwargs=kwargs,
                         dynamic_shapes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
                                         "cache": {0: "batch"}})
    names = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in r.model.graph.inputs}
    assert names["past_key_values.0.conv_state"] == ["batch", 128, 4]
    assert names["past_key_values.1.recurrent_state"] == ["batch", 128, 8]
    assert [v.name for v in r.model.graph.outputs] == ["logits"] + [
        f"present.{i}.{s}" for i in range(2) for s in ("conv_state", "recurrent_state")]
    report = r.validate()
    assert report.ok, report

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, 6), generator=gen)
    mask = torch.ones(2, 6, dtype=torch.int64)
    ids[1, :2], mask[1, :2] = 0, 0
    single = r.check_generation(model, ids[:1], max_new_tokens=16)
    assert single.ok, single
    padded = r.check_generation(model, ids, attention_mask=mask, max_new_tokens=16)
    assert padded.ok, padded
    assert len(set(padded.expected[0])) > 4  # the tokens vary
