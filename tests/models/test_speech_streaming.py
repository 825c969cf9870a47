"""Streaming speech models from the toolkits' own classes (tiny configs, seeded random weights), each step
exported with its states as explicit inputs and outputs, then run chunk after chunk from the toolkit's
initial state, six chunks, at two batch sizes (and two chunk lengths where the model takes any), in
onnxruntime against eager PyTorch, every output of every step compared (``result.validate_stream``).

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
from torch import nn
from torch.export import Dim

from exportcheck import check_export
from third_party import import_speech

STEPS = 6


def _flat(states: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    return [t for layer in states for t in layer]


def _grouped(flat, size: int, count: int) -> list[list[torch.Tensor]]:
    return [list(flat[size * i:size * i + size]) for i in range(count)]


def _names(prefix: str, parts: tuple[str, ...], layers: int) -> list[str]:
    return [f"{prefix}{part}_{i}" for i in range(layers) for part in parts]


def _check_stream(result, pairs: dict, initial, **kwargs):
    report = result.validate_stream(pairs, initial=initial, steps=STEPS, **kwargs)
    assert report.ok, f"\n{report}"
    assert report.steps == STEPS and len(report.streams) >= 2
    batches = {s.split(",")[0] for _, s, _ in report.streams}
    assert len(batches) >= 2, report.streams
    return report


# ============================================================================ torchaudio Emformer
EMFORMER_STATE = ("memory", "left_key", "left_value", "past_length")


class EmformerInfer(nn.Module):
    """``Emformer.infer(input, lengths, states)`` with the states flat: per layer memory ``[M, B, D]``, left
    context keys and values ``[L, B, D]``, frames seen ``int32 [1, B]``."""

    def __init__(self, emformer: nn.Module, layers: int):
        super().__init__()
        self.emformer, self.layers = emformer, layers

    def forward(self, input, lengths, *states):
        out, out_lengths, new = self.emformer.infer(input, lengths, _grouped(states, 4, self.layers))
        return (out, out_lengths, *_flat(new))


def _emformer_states(emformer, batch: int, layers: int) -> list[torch.Tensor]:
    """The toolkit's own initial state of every layer (``_init_state``: zeros, nothing seen)."""
    return _flat([layer._init_state(batch, None) for layer in emformer.emformer_layers][:layers])


def _emformer():
    ta = import_speech("torchaudio")
    torch.manual_seed(0)
    return ta.models.Emformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=2, segment_length=4,
                              left_context_length=8, right_context_length=2, max_memory_size=2).eval()


def test_emformer_infer_streams_from_its_initial_state():
    emformer = _emformer()
    model = EmformerInfer(emformer, 2).eval()
    gen = torch.Generator().manual_seed(1)
    states = [t.normal_(generator=gen) if t.is_floating_point() else t + 12 for t in _emformer_states(emformer, 3, 2)]
    example = (torch.randn(3, 6, 32, generator=gen), torch.full((3,), 6), *states)
    batch = Dim("batch")
    names = _names("", EMFORMER_STATE, 2)
    result = check_export(model, example, {"input": {0: batch}, "lengths": {0: batch}, "states": [{1: batch}] * 8},
                          values=[], input_names=["input", "lengths", *names],
                          output_names=["output", "output_lengths", *[f"next_{n}" for n in names]])
    first = torch.randn(2, 6, 32)
    own = emformer.infer(first, torch.full((2,), 6), None)  # the toolkit starts from no state
    ours = model(first, torch.full((2,), 6), *_emformer_states(emformer, 2, 2))
    torch.testing.assert_close(ours[0], own[0], rtol=0, atol=0)
    _check_stream(result, {f"next_{n}": n for n in names}, lambda b: dict(zip(names, _emformer_states(emformer, b, 2))))


# ============================================================================ torchaudio Emformer RNN-T
class RnntStep(nn.Module):
    """One streaming RNN-T step: the transcriber's ``infer`` on a chunk of features, the predictor on the
    last token from its LSTM state, the joiner on both; the transcriber's and the predictor's states in
    and out."""

    def __init__(self, rnnt: nn.Module, layers: int, lstm_layers: int):
        super().__init__()
        self.rnnt, self.layers, self.lstm_layers = rnnt, layers, lstm_layers

    def forward(self, features, lengths, token, *states):
        n = 4 * self.layers
        enc, enc_lengths, enc_state = self.rnnt.transcribe_streaming(features, lengths,
                                                                     _grouped(states[:n], 4, self.layers))
        pred, pred_lengths, pred_state = self.rnnt.predict(token, torch.ones_like(lengths),
                                                           _grouped(states[n:], 2, self.lstm_layers))
        logits, _, _ = self.rnnt.join(enc, enc_lengths, pred, pred_lengths)
        return (logits, enc_lengths, *_flat(enc_state), *_flat(pred_state))


LSTM_HIDDEN = 16  # emformer_rnnt_model's LSTM width: its symbol_embedding_dim


def _rnnt_initial(rnnt, batch: int) -> list[torch.Tensor]:
    """The transcriber's initial state per Emformer layer, then zero ``(h, c)`` per LSTM layer (as
    ``predict(..., None)`` starts)."""
    return _emformer_states(rnnt.transcriber.transformer, batch, 2) + [torch.zeros(batch, LSTM_HIDDEN)] * 4


def test_emformer_rnnt_step_streams_from_its_initial_state():
    ta = import_speech("torchaudio")
    torch.manual_seed(0)
    rnnt = ta.models.emformer_rnnt_model(
        input_dim=20, encoding_dim=24, num_symbols=29, segment_length=8, right_context_length=4,
        time_reduction_input_dim=16, time_reduction_stride=2, transformer_num_heads=2, transformer_ffn_dim=32,
        transformer_num_layers=2, transformer_left_context_length=8, transformer_dropout=0.0,
        transformer_activation="gelu", transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=True,
        symbol_embedding_dim=LSTM_HIDDEN, num_lstm_layers=2, lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-5,
        lstm_dropout=0.0).eval()
    model = RnntStep(rnnt, 2, 2).eval()
    gen = torch.Generator().manual_seed(1)
    initial3 = _rnnt_initial(rnnt, 3)
    example = (torch.randn(3, 12, 20, generator=gen), torch.full((3,), 12), torch.randint(0, 29, (3, 1), generator=gen),
               *[t.normal_(generator=gen) if t.is_floating_point() else t + 8 for t in initial3])
    names = _names("", EMFORMER_STATE, 2) + _names("lstm_", ("h", "c"), 2)
    batch = Dim("batch")
    result = check_export(model, example, {"features": {0: batch}, "lengths": {0: batch}, "token": {0: batch},
                                           "states": [{1: batch}] * 8 + [{0: batch}] * 4},
                          values=[], input_names=["features", "lengths", "token", *names],
                          output_names=["logits", "frames", *[f"next_{n}" for n in names]])
    features, token = torch.randn(2, 12, 20), torch.randint(0, 29, (2, 1))
    enc, enc_lengths, _ = rnnt.transcribe_streaming(features, torch.full((2,), 12), None)
    pred, pred_lengths, _ = rnnt.predict(token, torch.ones(2, dtype=torch.long), None)
    own = rnnt.join(enc, enc_lengths, pred, pred_lengths)[0]
    torch.testing.assert_close(model(features, torch.full((2,), 12), token, *_rnnt_initial(rnnt, 2))[0], own,
                               rtol=0, atol=0)
    _check_stream(result, {f"next_{n}": n for n in names}, lambda b: dict(zip(names, _rnnt_initial(rnnt, b))))


# ============================================================================ SpeechBrain streaming Conformer
class ConformerStreaming(nn.Module):
    """``TransformerASR.encode_streaming(src, context)`` with the context's tensors as inputs and outputs: per
    layer the attention's left context ``[B, context, D]`` and the convolution's ``[B, conv_context, D]``,
    empty (length 0) at the first chunk where SpeechBrain's fresh context holds None (``torch.cat`` with an
    empty tensor is the tensor)."""

    def __init__(self, asr: nn.Module, config):
        super().__init__()
        self.asr, self.config = asr, config

    def forward(self, src, *contexts):
        context = self.asr.make_streaming_context(self.config)
        layers = context.encoder_context.layers
        for i, layer in enumerate(layers):
            layer.mha_left_context, layer.dcconv_left_context = contexts[2 * i], contexts[2 * i + 1]
        out = self.asr.encode_streaming(src, context)
        return (out, *[t for layer in layers for t in (layer.mha_left_context, layer.dcconv_left_context)])


@pytest.mark.slow  # about 10 s
def test_speechbrain_streaming_conformer_with_its_dct_context():
    asr_module = import_speech("speechbrain.lobes.models.transformer.TransformerASR")
    from speechbrain.utils.dynamic_chunk_training import DynChunkTrainConfig

    torch.manual_seed(0)
    asr = asr_module.TransformerASR(
        tgt_vocab=29, input_size=40, d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=0, d_ffn=64,
        dropout=0.0, encoder_module="conformer", normalize_before=True, kernel_size=7, causal=False,
        attention_type="RelPosMHAXL", positional_encoding=None).eval()
    config = DynChunkTrainConfig(chunk_size=8, left_context_size=2)  # 2 chunks of left context: 16 frames
    model = ConformerStreaming(asr, config).eval()
    names = _names("", ("context", "conv_context"), 2)
    gen = torch.Generator().manual_seed(1)
    example = (torch.randn(3, 8, 40, generator=gen),
               *[torch.randn(3, 16 if n.startswith("context") else 3, 32, generator=gen) for n in names])
    batch, chunk, context, conv = Dim("batch"), Dim("chunk"), Dim("context"), Dim("conv_context")
    result = check_export(model, example, {"src": {0: batch, 1: chunk},
                                           "contexts": [{0: batch, 1: context}, {0: batch, 1: conv}] * 2},
                          values=[], input_names=["src", *names], output_names=["out", *[f"next_{n}" for n in names]])
    assert [str(d) for d in result.model.graph.inputs[1].shape] == ["batch", "context", "32"]
    assert [str(d) for d in result.model.graph.inputs[2].shape] == ["batch", "conv_context", "32"]
    own_context = asr.make_streaming_context(config)  # SpeechBrain's own stream, from its fresh context
    chunks = [torch.randn(2, 8, 40, generator=gen) for _ in range(3)]
    states = [torch.zeros(2, 0, 32)] * 4
    for x in chunks:
        own = asr.encode_streaming(x, own_context)
        out, *states = model(x, *states)
        torch.testing.assert_close(out, own, rtol=0, atol=0)
    report = _check_stream(result, {f"next_{n}": n for n in names},
                           lambda b: {n: torch.zeros(b, 0, 32) for n in names})
    assert {s for _, s, _ in report.streams} == {"batch=3, chunk=8", "batch=3, chunk=4", "batch=1, chunk=8",
                                                 "batch=1, chunk=4"}
    lengths = [c.shape[1] for c in report.checks if c.output == "next_context_0" and c.inputs.startswith("stream 2 ")]
    assert lengths == [4, 8, 12, 16, 16, 16]  # the left context empty, filling, then cut to 16 frames
