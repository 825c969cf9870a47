"""Streaming speech models from the toolkits' own classes (tiny configs, seeded random weights), each step
wrapped as ``forward(chunk, *states) -> (*outputs, *new_states)`` with its states as explicit tensors.

- ``EmformerInfer``: torchaudio's ``Emformer.infer``; per layer the memory, the left-context keys and
  values, and the frames seen so far (``past_length``, read with ``.item()`` to cut the left context while
  it fills). Its chunk is fixed (``infer`` raises unless it is ``segment_length + right_context_length``
  frames) and so are its caches (``left_context_length`` rows): the batch is the dynamic dim.
- ``RnntStep``: an Emformer RNN-T step (``torchaudio.models.emformer_rnnt_model``): the transcriber's
  ``infer`` on a chunk, the predictor's LSTM on the last token with its ``(h, c)`` per layer, the joiner.
- ``ConformerStreaming``: SpeechBrain's ``TransformerASR.encode_streaming`` with its Dynamic Chunk Training
  context: per layer the attention's left context (empty, then growing to 16 frames) and the convolution's
  (empty, then 3 frames); chunk and both context lengths dynamic and named.
- ``EspnetStreamingStep``: ESPnet's contextual-block Conformer ``forward_infer`` (not the last chunk). It
  asserts batch 1, runs a Python loop over the blocks a chunk holds (its chunk length fixes the count)
  and starts from ``None`` states, which no tensor input can hold: its stream starts from ESPnet's own
  state after its first chunk, no block processed yet (``espnet_stream_from_first_block``: the counter 0,
  whose step emits more frames than the later ones; the two states ESPnet holds None there given as
  zeros), or after two chunks (``espnet_stream``).

Used by ``tests/models/test_speech_streaming.py``, ``tests/rewrite/test_state_branches.py`` and
``benchmarks/speech.py`` (its streaming section). ``CASES`` maps a case's name to the function building its
``StreamCase``: the wrapper, its example, dynamic shapes, ONNX names, the state pairs, the toolkit's initial
state at any batch and the fresh inputs of any step.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

import torch
from torch import nn
from torch.export import Dim

from third_party import import_speech


def flat(states: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """Per-layer state lists, one after the other."""
    return [t for layer in states for t in layer]


def grouped(tensors, size: int, count: int) -> list[list[torch.Tensor]]:
    """``tensors`` cut into ``count`` lists of ``size``: the per-layer form a toolkit takes."""
    return [list(tensors[size * i:size * i + size]) for i in range(count)]


def names(prefix: str, parts: tuple[str, ...], layers: int) -> list[str]:
    """``{prefix}{part}_{layer}`` for each layer and part, in the flat state order."""
    return [f"{prefix}{part}_{i}" for i in range(layers) for part in parts]


# ============================================================================ torchaudio Emformer
EMFORMER_STATE = ("memory", "left_key", "left_value", "past_length")


class EmformerInfer(nn.Module):
    """``Emformer.infer(input, lengths, states)`` with the states flat: per layer memory ``[M, B, D]``, left
    context keys and values ``[L, B, D]``, frames seen ``int32 [1, B]``."""

    def __init__(self, emformer: nn.Module, layers: int):
        super().__init__()
        self.emformer, self.layers = emformer, layers

    def forward(self, input, lengths, *states):
        out, out_lengths, new = self.emformer.infer(input, lengths, grouped(states, 4, self.layers))
        return (out, out_lengths, *flat(new))


def emformer_states(emformer, batch: int, layers: int) -> list[torch.Tensor]:
    """The toolkit's own initial state of every layer (``_init_state``: zeros, nothing seen)."""
    return flat([layer._init_state(batch, None) for layer in emformer.emformer_layers][:layers])


def build_emformer() -> nn.Module:
    """torchaudio's Emformer: 2 layers, d 32, segment 4, right context 2, left context 8, memory 2."""
    ta = import_speech("torchaudio")
    torch.manual_seed(0)
    return ta.models.Emformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=2, segment_length=4,
                              left_context_length=8, right_context_length=2, max_memory_size=2).eval()


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
                                                                     grouped(states[:n], 4, self.layers))
        pred, pred_lengths, pred_state = self.rnnt.predict(token, torch.ones_like(lengths),
                                                           grouped(states[n:], 2, self.lstm_layers))
        logits, _, _ = self.rnnt.join(enc, enc_lengths, pred, pred_lengths)
        return (logits, enc_lengths, *flat(enc_state), *flat(pred_state))


LSTM_HIDDEN = 16  # emformer_rnnt_model's LSTM width: its symbol_embedding_dim
RNNT_SYMBOLS = 29


def rnnt_initial(rnnt, batch: int) -> list[torch.Tensor]:
    """The transcriber's initial state per Emformer layer, then zero ``(h, c)`` per LSTM layer (as
    ``predict(..., None)`` starts), four tensors (one tensor given four times would be traced as one input)."""
    return emformer_states(rnnt.transcriber.transformer, batch, 2) + [torch.zeros(batch, LSTM_HIDDEN) for _ in range(4)]


def build_rnnt() -> nn.Module:
    """``emformer_rnnt_model``: features 20, encoding 24, 29 symbols, segment 8, right context 4, 2 Emformer
    layers (left context 8), time reduction 2, 2 LSTM layers of 16 with layer norm."""
    ta = import_speech("torchaudio")
    torch.manual_seed(0)
    return ta.models.emformer_rnnt_model(
        input_dim=20, encoding_dim=24, num_symbols=RNNT_SYMBOLS, segment_length=8, right_context_length=4,
        time_reduction_input_dim=16, time_reduction_stride=2, transformer_num_heads=2, transformer_ffn_dim=32,
        transformer_num_layers=2, transformer_left_context_length=8, transformer_dropout=0.0,
        transformer_activation="gelu", transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=True,
        symbol_embedding_dim=LSTM_HIDDEN, num_lstm_layers=2, lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-5,
        lstm_dropout=0.0).eval()


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


def build_speechbrain_asr():
    """SpeechBrain's Conformer ``TransformerASR`` (2 layers, d 32, RelPosMHAXL, kernel 7) and its Dynamic Chunk
    Training config: chunks of 8, 2 chunks (16 frames) of left context."""
    asr_module = import_speech("speechbrain.lobes.models.transformer.TransformerASR")
    from speechbrain.utils.dynamic_chunk_training import DynChunkTrainConfig

    torch.manual_seed(0)
    asr = asr_module.TransformerASR(
        tgt_vocab=29, input_size=40, d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=0, d_ffn=64,
        dropout=0.0, encoder_module="conformer", normalize_before=True, kernel_size=7, causal=False,
        attention_type="RelPosMHAXL", positional_encoding=None).eval()
    return asr, DynChunkTrainConfig(chunk_size=8, left_context_size=2)


# ============================================================================ ESPnet contextual-block Conformer
ESPNET_STATES = ("prev_addin", "buffer_before_downsampling", "ilens_buffer", "buffer_after_downsampling",
                 "n_processed_blocks", "past_encoder_ctx")


class EspnetStreamingStep(nn.Module):
    """One call of ESPnet's ``forward_infer`` (not the last chunk) with its state as tensors:
    ``forward(chunk, *states) -> (ys, olens, *new_states)``."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, chunk, prev_addin, buffer_before_downsampling, ilens_buffer, buffer_after_downsampling,
                n_processed_blocks, past_encoder_ctx):
        states = dict(zip(ESPNET_STATES, (prev_addin, buffer_before_downsampling, ilens_buffer,
                                          buffer_after_downsampling, n_processed_blocks, past_encoder_ctx)))
        ilens = torch.full((chunk.shape[0],), chunk.shape[1], dtype=torch.long)
        ys, olens, new = self.encoder.forward_infer(chunk, ilens, states, is_final=False)
        return (ys, olens, *[torch.as_tensor(new[k]) for k in ESPNET_STATES])


def build_espnet_encoder() -> nn.Module:
    """ESPnet's ``ContextualBlockConformerEncoder``: features 20, d 16, 2 blocks, conv2d subsampling, blocks
    of 8 frames, hop 4, look-ahead 2."""
    module = import_speech("espnet2.asr.encoder.contextual_block_conformer_encoder")
    torch.manual_seed(0)
    return module.ContextualBlockConformerEncoder(
        input_size=20, output_size=16, attention_heads=2, linear_units=32, num_blocks=2, dropout_rate=0.0,
        positional_dropout_rate=0.0, attention_dropout_rate=0.0, input_layer="conv2d", cnn_module_kernel=3,
        macaron_style=True, block_size=8, hop_size=4, look_ahead=2).eval()


def espnet_stream(frames: int, chunks: int, encoder: nn.Module | None = None):
    """The encoder and the inputs of its steps from the third chunk on (the first two run with ESPnet's own
    ``None`` states; chunks of ``frames`` frames, seeded by ``frames``): ``(encoder, [(chunk, *states), ...])``."""
    encoder = build_espnet_encoder() if encoder is None else encoder
    gen = torch.Generator().manual_seed(frames)
    states, steps = None, []
    with torch.no_grad():
        for k in range(chunks + 2):
            chunk = torch.randn(1, frames, 20, generator=gen)
            if k >= 2:
                steps.append((chunk, *[torch.as_tensor(states[s]) for s in ESPNET_STATES]))
            _, _, states = encoder.forward_infer(chunk, torch.tensor([frames]), states, is_final=False)
    return encoder, steps


def espnet_first_state(encoder: nn.Module, frames: int, gen: torch.Generator) -> dict:
    """ESPnet's state after its first chunk of ``frames`` frames (too short for a block: no block processed,
    ``n_processed_blocks`` 0, the frames buffered), as tensors: ``prev_addin`` and ``past_encoder_ctx``, None
    there in ESPnet's own stream (no input can hold None), zeros (``forward_infer`` takes the tensors given)."""
    with torch.no_grad():
        _, _, states = encoder.forward_infer(torch.randn(1, frames, 20, generator=gen), torch.tensor([frames]), None,
                                             is_final=False)
    d = encoder.output_size()
    states = {**states, "prev_addin": torch.zeros(1, 1, d),
              "past_encoder_ctx": torch.zeros(1, len(encoder.encoders), d)}
    return {k: torch.as_tensor(states[k]) for k in ESPNET_STATES}


def espnet_stream_from_first_block(frames: int, chunks: int, encoder: nn.Module | None = None):
    """The encoder and the inputs of ``chunks`` steps from its first block on (``espnet_first_state``: the
    counter 0), each step's states those the step before returned (``EspnetStreamingStep`` in eager mode):
    ``(encoder, [(chunk, *states), ...])``; the first step emits the frames before the first block's hop too."""
    encoder = build_espnet_encoder() if encoder is None else encoder
    gen = torch.Generator().manual_seed(frames)
    states = espnet_first_state(encoder, frames, gen)
    step, steps = EspnetStreamingStep(encoder), []
    with torch.no_grad():
        for _ in range(chunks):
            inputs = (torch.randn(1, frames, 20, generator=gen), *[states[k] for k in ESPNET_STATES])
            steps.append(inputs)
            states = dict(zip(ESPNET_STATES, step(*inputs)[2:]))
    return encoder, steps


# ============================================================================ the cases, for the benchmark
@dataclasses.dataclass
class StreamCase:
    """One streaming step: ``model(*example)``; ``dynamic_shapes`` by the forward's argument names;
    ``input_names`` / ``output_names`` of the ONNX model; ``states``: ``{state output: state input}``;
    ``initial(batch)``: ``{state input: tensor}``, the toolkit's initial state; ``make_step(step, batch,
    chunk)``: ``{fresh input: tensor}``; ``batches`` and ``chunk_lengths``: the sizes its streams run at
    (one where the dim is fixed); ``declared``: ``{input name: {axis: dim name}}`` of the dims declared
    dynamic."""

    name: str
    toolkit: str
    what: str
    model: nn.Module
    example: tuple
    dynamic_shapes: Any
    input_names: list[str]
    output_names: list[str]
    states: dict[str, str]
    initial: Callable[[int], dict]
    make_step: Callable[[int, int, int], dict]
    batches: list[int]
    chunk_lengths: list[int]
    declared: dict[str, dict[int, str]] = dataclasses.field(default_factory=dict)


def _declared(model: nn.Module, dynamic_shapes: Any, input_names: list[str]) -> dict[str, dict[int, str]]:
    """``{ONNX input name: {axis: dim name}}`` from dynamic shapes given by argument name (``*states`` as a
    tuple, as ``torch.export`` takes it)."""
    specs: list = []
    for name, p in inspect.signature(model.forward).parameters.items():
        spec = (dynamic_shapes or {}).get(name)
        if p.kind is p.VAR_POSITIONAL:
            specs += list(spec or [])
        else:
            specs.append(spec)
    return {n: {axis: getattr(d, "__name__", str(d)) for axis, d in (s or {}).items()}
            for n, s in zip(input_names, specs) if s}


def _seeded(step: int, batch: int, chunk: int) -> torch.Generator:
    return torch.Generator().manual_seed(10_000 * step + 100 * batch + chunk)


def _case(name, toolkit, what, model, example, dynamic_shapes, fresh, state_names, initial, make_step, batches,
          chunk_lengths) -> StreamCase:
    input_names = [*fresh[0], *state_names]
    output_names = [*fresh[1], *[f"next_{n}" for n in state_names]]
    return StreamCase(name, toolkit, what, model.eval(), example, dynamic_shapes, input_names, output_names,
                      {f"next_{n}": n for n in state_names}, initial, make_step, batches, chunk_lengths,
                      _declared(model, dynamic_shapes, input_names))


def speechbrain_streaming_conformer() -> StreamCase:
    asr, config = build_speechbrain_asr()
    model = ConformerStreaming(asr, config)
    state_names = names("", ("context", "conv_context"), 2)
    gen = torch.Generator().manual_seed(1)
    example = (torch.randn(3, 8, 40, generator=gen),
               *[torch.randn(3, 16 if n.startswith("context") else 3, 32, generator=gen) for n in state_names])
    batch, chunk, context, conv = Dim("batch"), Dim("chunk"), Dim("context"), Dim("conv_context")
    shapes = {"src": {0: batch, 1: chunk}, "contexts": ({0: batch, 1: context}, {0: batch, 1: conv}) * 2}
    return _case("speechbrain_streaming_conformer", "speechbrain",
                 "TransformerASR.encode_streaming (Conformer, 2 layers, d 32, chunks of 8, 16 frames of left "
                 "context): src[B, chunk, 40], per layer the attention's and the convolution's left context "
                 "(empty at the first chunk); batch, chunk and both context lengths dynamic",
                 model, example, shapes, (["src"], ["out"]), state_names,
                 lambda b: {n: torch.zeros(b, 0, 32) for n in state_names},
                 lambda t, b, c: {"src": torch.randn(b, c, 40, generator=_seeded(t, b, c))}, [3, 1], [8, 4])


def torchaudio_emformer_infer() -> StreamCase:
    emformer = build_emformer()
    model = EmformerInfer(emformer, 2)
    gen = torch.Generator().manual_seed(1)
    states = [t.normal_(generator=gen) if t.is_floating_point() else t + 12 for t in emformer_states(emformer, 3, 2)]
    example = (torch.randn(3, 6, 32, generator=gen), torch.full((3,), 6), *states)
    batch = Dim("batch")
    state_names = names("", EMFORMER_STATE, 2)
    return _case("torchaudio_emformer_infer", "torchaudio",
                 "Emformer.infer (2 layers, d 32, segment 4, right context 2, left context 8, memory 2): "
                 "input[B, 6, 32], lengths, per layer memory, left keys and values, frames seen; batch dynamic "
                 "(infer takes chunks of 6 frames only, its caches are fixed)",
                 model, example, {"input": {0: batch}, "lengths": {0: batch}, "states": ({1: batch},) * 8},
                 (["input", "lengths"], ["output", "output_lengths"]), state_names,
                 lambda b: dict(zip(state_names, emformer_states(emformer, b, 2))),
                 lambda t, b, c: {"input": torch.randn(b, c, 32, generator=_seeded(t, b, c)),
                                  "lengths": torch.full((b,), c)}, [3, 1], [6])


def torchaudio_emformer_rnnt_step() -> StreamCase:
    rnnt = build_rnnt()
    model = RnntStep(rnnt, 2, 2)
    gen = torch.Generator().manual_seed(1)
    example = (torch.randn(3, 12, 20, generator=gen), torch.full((3,), 12),
               torch.randint(0, RNNT_SYMBOLS, (3, 1), generator=gen),
               *[t.normal_(generator=gen) if t.is_floating_point() else t + 8 for t in rnnt_initial(rnnt, 3)])
    state_names = names("", EMFORMER_STATE, 2) + names("lstm_", ("h", "c"), 2)
    batch = Dim("batch")

    def make_step(t, b, c):
        gen = _seeded(t, b, c)
        return {"features": torch.randn(b, c, 20, generator=gen), "lengths": torch.full((b,), c),
                "token": torch.randint(0, RNNT_SYMBOLS, (b, 1), generator=gen)}

    return _case("torchaudio_emformer_rnnt_step", "torchaudio",
                 "emformer_rnnt_model step: transcribe_streaming on features[B, 12, 20] (2 Emformer layers), "
                 "predict on the last token (2 LSTM layers of 16, layer norm), join; the Emformer states and "
                 "the LSTM (h, c) in and out; batch dynamic (chunks of 12 frames only)",
                 model, example, {"features": {0: batch}, "lengths": {0: batch}, "token": {0: batch},
                                  "states": ({1: batch},) * 8 + ({0: batch},) * 4},
                 (["features", "lengths", "token"], ["logits", "frames"]), state_names,
                 lambda b: dict(zip(state_names, rnnt_initial(rnnt, b))), make_step, [3, 1], [12])


def espnet_contextual_block_conformer() -> StreamCase:
    encoder, steps = espnet_stream_from_first_block(frames=32, chunks=1)
    model = EspnetStreamingStep(encoder)
    start = dict(zip(ESPNET_STATES, steps[0][1:]))
    return _case("espnet_contextual_block_conformer", "espnet",
                 "ContextualBlockConformerEncoder.forward_infer (d 16, 2 blocks, blocks of 8, hop 4, look-ahead "
                 "2): chunk[1, 32, 20] and its six states; static (forward_infer asserts batch 1; its Python "
                 "loop over the blocks of a chunk fixes the chunk length); the stream starts from ESPnet's state "
                 "after its first chunk, no block processed (n_processed_blocks 0: the first step emits 2 more "
                 "frames, a branch on the counter exported one side at a time), prev_addin and past_encoder_ctx "
                 "zeros where ESPnet holds None (which no input can hold)",
                 model, steps[0], None, (["chunk"], ["ys", "olens"]), list(ESPNET_STATES),
                 lambda b: {k: v.clone() for k, v in start.items()},
                 lambda t, b, c: {"chunk": torch.randn(b, c, 20, generator=_seeded(t, b, c))}, [1], [32])


CASES: dict[str, Callable[[], StreamCase]] = {
    "speechbrain_streaming_conformer": speechbrain_streaming_conformer,
    "torchaudio_emformer_infer": torchaudio_emformer_infer,
    "torchaudio_emformer_rnnt_step": torchaudio_emformer_rnnt_step,
    "espnet_contextual_block_conformer": espnet_contextual_block_conformer,
}


def build(name: str) -> StreamCase:
    """The streaming case ``name`` (a key of ``CASES``), seeded."""
    torch.manual_seed(0)
    return CASES[name]()
