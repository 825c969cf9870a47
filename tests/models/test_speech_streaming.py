"""Streaming speech models from the toolkits' own classes (tiny configs, seeded random weights), each step
exported with its states as explicit inputs and outputs, then run chunk after chunk from the toolkit's
initial state, six chunks, at two batch sizes (and two chunk lengths where the model takes any), in
onnxruntime against eager PyTorch, every output of every step compared (``result.validate_stream``).
The wrappers, configs and initial states are ``tests/speech_streaming.py``'s (``benchmarks/speech.py``
streams the same cases).

- torchaudio's ``Emformer.infer``: per layer the memory, the left-context keys and values, and the frames
  seen so far (``past_length``, read with ``.item()`` to cut the left context while it fills). Its chunk
  is fixed (``infer`` raises unless it is ``segment_length + right_context_length`` frames) and so are
  its caches (``left_context_length`` rows, the filled part chosen from ``past_length``): the batch is
  the dynamic dim.
- an Emformer RNN-T step (``torchaudio.models.emformer_rnnt_model``): the transcriber's ``infer`` on a
  chunk, the predictor's LSTM on the last token with its ``(h, c)`` per layer, the joiner.
- SpeechBrain's streaming Conformer (``TransformerASR.encode_streaming`` with its Dynamic Chunk Training
  context): per layer the attention's left context (empty, then growing to 16 frames) and the
  convolution's left context (empty, then 3 frames), chunk and both context lengths dynamic and named.
"""

import pytest
import torch

from exportcheck import check_export
from speech_streaming import build, emformer_states, rnnt_initial

STEPS = 6


def _check_stream(result, pairs: dict, initial, **kwargs):
    report = result.validate_stream(pairs, initial=initial, steps=STEPS, **kwargs)
    assert report.ok, f"\n{report}"
    assert report.steps == STEPS and len(report.streams) >= 2
    batches = {s.split(",")[0] for _, s, _ in report.streams}
    assert len(batches) >= 2, report.streams
    return report


def _export(case):
    return check_export(case.model, case.example, case.dynamic_shapes, values=[], input_names=case.input_names,
                        output_names=case.output_names)


# ============================================================================ torchaudio Emformer
def test_emformer_infer_streams_from_its_initial_state():
    case = build("torchaudio_emformer_infer")
    result = _export(case)
    emformer = case.model.emformer
    first = torch.randn(2, 6, 32)
    own = emformer.infer(first, torch.full((2,), 6), None)  # the toolkit starts from no state
    ours = case.model(first, torch.full((2,), 6), *emformer_states(emformer, 2, 2))
    torch.testing.assert_close(ours[0], own[0], rtol=0, atol=0)
    _check_stream(result, case.states, case.initial)


# ============================================================================ torchaudio Emformer RNN-T
def test_emformer_rnnt_step_streams_from_its_initial_state():
    case = build("torchaudio_emformer_rnnt_step")
    result = _export(case)
    rnnt = case.model.rnnt
    features, token = torch.randn(2, 12, 20), torch.randint(0, 29, (2, 1))
    enc, enc_lengths, _ = rnnt.transcribe_streaming(features, torch.full((2,), 12), None)
    pred, pred_lengths, _ = rnnt.predict(token, torch.ones(2, dtype=torch.long), None)
    own = rnnt.join(enc, enc_lengths, pred, pred_lengths)[0]
    torch.testing.assert_close(case.model(features, torch.full((2,), 12), token, *rnnt_initial(rnnt, 2))[0], own,
                               rtol=0, atol=0)
    _check_stream(result, case.states, case.initial)


# ============================================================================ SpeechBrain streaming Conformer
@pytest.mark.slow  # about 10 s
def test_speechbrain_streaming_conformer_with_its_dct_context():
    case = build("speechbrain_streaming_conformer")
    result = _export(case)
    assert [str(d) for d in result.model.graph.inputs[1].shape] == ["batch", "context", "32"]
    assert [str(d) for d in result.model.graph.inputs[2].shape] == ["batch", "conv_context", "32"]
    asr, config = case.model.asr, case.model.config
    own_context = asr.make_streaming_context(config)  # SpeechBrain's own stream, from its fresh context
    gen = torch.Generator().manual_seed(2)
    chunks = [torch.randn(2, 8, 40, generator=gen) for _ in range(3)]
    states = [torch.zeros(2, 0, 32)] * 4
    for x in chunks:
        own = asr.encode_streaming(x, own_context)
        out, *states = case.model(x, *states)
        torch.testing.assert_close(out, own, rtol=0, atol=0)
    report = _check_stream(result, case.states, case.initial)
    assert {s for _, s, _ in report.streams} == {"batch=3, chunk=8", "batch=3, chunk=4", "batch=1, chunk=8",
                                                 "batch=1, chunk=4"}
    lengths = [c.shape[1] for c in report.checks if c.output == "next_context_0" and c.inputs.startswith("stream 2 ")]
    assert lengths == [4, 8, 12, 16, 16, 16]  # the left context empty, filling, then cut to 16 frames
