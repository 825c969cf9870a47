"""Speech models built from the toolkits' own classes (torchaudio, SpeechBrain, ESPnet, asteroid, EnCodec),
small configs and seeded random weights, each with its example inputs, batch and time dynamic, lengths as
inputs where the model takes them, and two other input sets at other (batch, time) with unequal lengths.

Used by the speech tests (``tests/models/test_speech_<toolkit>.py``) and by ``benchmarks/speech.py``.
``ZOO`` maps a case's name to the function building it; ``build(name)`` builds one. The toolkits come from
``<venv>/speech-packages`` (``tests/third_party.py``); a builder imports its toolkit when it runs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch import nn
from torch.export import Dim

from third_party import import_speech, import_torchaudio


@dataclasses.dataclass
class SpeechCase:
    """One speech model: ``model(*args)`` at the example (batch 3); ``others``: two more argument tuples at
    other (batch, time), batch 2 and 4, lengths unequal; ``dynamic_shapes`` by the forward's argument names;
    ``make(batch, time)``: the arguments at any other size (ESPnet's 20,010 frames)."""

    name: str
    toolkit: str
    model: nn.Module
    args: tuple
    dynamic_shapes: dict
    others: list[tuple]
    what: str = ""
    make: Callable[[int, int], tuple] | None = None  # (batch, time) -> args, for sizes beyond the three sets


ZOO: dict[str, Callable[[], SpeechCase]] = {}
TOOLKITS = ("torchaudio", "speechbrain", "espnet", "asteroid", "encodec")
EXAMPLE = (3, 1)  # the example's batch; the other sets' batches are 2 and 4
OTHER_BATCHES = (2, 4)


def case(toolkit: str, what: str):
    def register(fn: Callable[..., SpeechCase]) -> Callable[[], SpeechCase]:
        name = fn.__name__

        def build() -> SpeechCase:
            torch.manual_seed(0)
            made = fn()
            made.name, made.toolkit, made.what = name, toolkit, what
            made.model.eval()
            return made

        ZOO[name] = build
        return build

    return register


def build(name: str) -> SpeechCase:
    return ZOO[name]()


def check(name: str, **kwargs):
    """Export ``build(name)`` and compare it with eager at the example and at its two other sets
    (``exportcheck.check_export``); returns the ``ExportResult``."""
    from exportcheck import check_export

    case = build(name)
    return check_export(case.model, case.args, case.dynamic_shapes, inputs=case.others, **kwargs)


def lengths(batch: int, time: int, seed: int, low: float = 0.5) -> torch.Tensor:
    """``batch`` unequal lengths in [low * time, time], the longest equal to ``time``, not sorted."""
    gen = torch.Generator().manual_seed(seed)
    n = torch.randint(max(1, int(low * time)), time + 1, (batch,), generator=gen)
    n[int(torch.randint(0, batch, (1,), generator=gen))] = time
    if batch > 1 and bool((n == n[0]).all()):
        n[0 if n[0] != time else 1] = max(1, time - 1)
    return n


def _sets(make: Callable[[int, int, int], tuple], time: int, others: tuple[int, int]) -> tuple[tuple, list[tuple]]:
    """The example (batch 3 at ``time``) and two other sets (batch 2 at ``others[0]``, batch 4 at
    ``others[1]``), each from ``make(batch, time, seed)``."""
    return make(3, time, 1), [make(OTHER_BATCHES[0], others[0], 2), make(OTHER_BATCHES[1], others[1], 3)]


def _case(model, make, time, others, dynamic_shapes) -> SpeechCase:
    args, extra = _sets(make, time, others)
    return SpeechCase("", "", model, args, dynamic_shapes, extra, make=lambda b, t: make(b, t, 4))


def _feats_and_lengths(feats: int):
    def make(batch: int, time: int, seed: int) -> tuple:
        gen = torch.Generator().manual_seed(seed)
        return torch.randn(batch, time, feats, generator=gen), lengths(batch, time, seed)

    return make


def _waves_and_lengths(batch: int, time: int, seed: int) -> tuple:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, time, generator=gen), lengths(batch, time, seed)


def _waves(channels: int | None):
    def make(batch: int, time: int, seed: int) -> tuple:
        gen = torch.Generator().manual_seed(seed)
        shape = (batch, time) if channels is None else (batch, channels, time)
        return (torch.randn(*shape, generator=gen),)

    return make


def _batch_time(first: str, second: str | None = None, *, time_axis: int = 1, min_time: int | None = None) -> dict:
    batch = Dim("batch")
    time = Dim("time", min=min_time) if min_time else Dim("time")
    spec: dict[str, Any] = {first: {0: batch, time_axis: time}}
    if second:
        spec[second] = {0: batch}
    return spec


class Encode(nn.Module):
    """SpeechBrain's ``TransformerASR.encode(src, wav_len)`` as a module's forward."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, src, wav_len):
        return self.model.encode(src, wav_len)


class Encoder(nn.Module):
    """An ESPnet encoder's ``(xs, olens)``, without its third output (None: no states)."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, xs_pad, ilens):
        return self.encoder(xs_pad, ilens)[:2]


class Seconds(nn.Module):
    """SpeechBrain's relative lengths (``wav_lens``: length / time, in (0, 1]) from integer lengths, so that
    every set's lengths are the integers the model means."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x, lengths):
        return self.model(x, lengths.to(x.dtype) / x.shape[1])


# ============================================================================ torchaudio
@case("torchaudio", "Conformer (2 layers, d 32): features[B, T, 40], lengths -> output, lengths")
def torchaudio_conformer():
    ta = import_torchaudio()
    model = ta.models.Conformer(input_dim=40, num_heads=4, ffn_dim=64, num_layers=2, depthwise_conv_kernel_size=7)
    return _case(model, _feats_and_lengths(40), 37, (52, 23), _batch_time("input", "lengths"))


@case("torchaudio", "Emformer (2 layers, segment 4, right context 2): input[B, T + 2, 32], lengths")
def torchaudio_emformer():
    ta = import_torchaudio()
    model = ta.models.Emformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=2, segment_length=4,
                               left_context_length=8, right_context_length=2, max_memory_size=0)
    return _case(model, _feats_and_lengths(32), 30, (43, 19), _batch_time("input", "lengths"))


@case("torchaudio", "RNN-T predictor (LSTM 2 layers, layer norm): tokens[B, U], lengths -> output, lengths, state")
def torchaudio_rnnt_predictor():
    import_torchaudio()
    from torchaudio.models.rnnt import _Predictor

    model = _Predictor(num_symbols=29, output_dim=24, symbol_embedding_dim=16, num_lstm_layers=2,
                       lstm_hidden_dim=24, lstm_layer_norm=True)

    def make(batch, tokens, seed):
        gen = torch.Generator().manual_seed(seed)
        return torch.randint(0, 29, (batch, tokens), generator=gen), lengths(batch, tokens, seed)

    batch, tokens = Dim("batch"), Dim("tokens")
    return _case(model, make, 7, (11, 4), {"input": {0: batch, 1: tokens}, "lengths": {0: batch}})


@case("torchaudio", "RNN-T joiner: source[B, T, 24], source lengths, target[B, U, 24], target lengths")
def torchaudio_rnnt_joiner():
    import_torchaudio()
    from torchaudio.models.rnnt import _Joiner

    model = _Joiner(input_dim=24, output_dim=29)

    def make(batch, time, seed):
        gen = torch.Generator().manual_seed(seed)
        tokens = max(2, time // 3)
        return (torch.randn(batch, time, 24, generator=gen), lengths(batch, time, seed),
                torch.randn(batch, tokens, 24, generator=gen), lengths(batch, tokens, seed + 10))

    batch, time, tokens = Dim("batch"), Dim("time"), Dim("tokens")
    spec = {"source_encodings": {0: batch, 1: time}, "source_lengths": {0: batch},
            "target_encodings": {0: batch, 1: tokens}, "target_lengths": {0: batch}}
    return _case(model, make, 21, (30, 13), spec)


@case("torchaudio", "ConvTasNet (stride 8, 2 blocks): waveform[B, 1, samples]; 803 samples, then 1,216 (a multiple "
                   "of 8) and 406")
def torchaudio_conv_tasnet():
    ta = import_torchaudio()
    model = ta.models.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=32, msk_kernel_size=3,
                                 msk_num_feats=16, msk_num_hidden_feats=32, msk_num_layers=2, msk_num_stacks=1)
    return _case(model, _waves(1), 803, (1216, 406), _batch_time("input", time_axis=2))


def _wav2vec2_config(**overrides) -> dict:
    config = dict(extractor_mode="group_norm", extractor_conv_layer_config=[(16, 10, 5), (16, 3, 2), (16, 2, 2)],
                  extractor_conv_bias=False, encoder_embed_dim=32, encoder_projection_dropout=0.0,
                  encoder_pos_conv_kernel=16, encoder_pos_conv_groups=4, encoder_num_layers=2,
                  encoder_num_heads=4, encoder_attention_dropout=0.0, encoder_ff_interm_features=64,
                  encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=False,
                  encoder_layer_drop=0.0, aux_num_out=29)
    config.update(overrides)
    return config


@case("torchaudio", "Wav2Vec2 (group-norm extractor, post-norm, CTC head): waveforms[B, samples], lengths")
def torchaudio_wav2vec2():
    ta = import_torchaudio()
    model = ta.models.wav2vec2_model(**_wav2vec2_config())
    return _case(model, _waves_and_lengths, 1203, (1605, 811), _batch_time("waveforms", "lengths", min_time=40))


@case("torchaudio", "HuBERT-large form (layer-norm extractor, pre-norm): waveforms[B, samples], lengths")
def torchaudio_hubert():
    ta = import_torchaudio()
    model = ta.models.wav2vec2_model(**_wav2vec2_config(extractor_mode="layer_norm", extractor_conv_bias=True,
                                                        encoder_layer_norm_first=True, aux_num_out=None))
    return _case(model, _waves_and_lengths, 1203, (1605, 811), _batch_time("waveforms", "lengths", min_time=40))


@case("torchaudio", "WavLM (bucketed relative positions; takes no lengths): waveforms[B, samples]")
def torchaudio_wavlm():
    ta = import_torchaudio()
    config = _wav2vec2_config(encoder_layer_norm_first=False, aux_num_out=None)
    model = ta.models.wavlm_model(**config, encoder_num_buckets=32, encoder_max_distance=64)
    return _case(model, _waves(None), 1203, (1605, 811), _batch_time("waveforms", min_time=40))


@case("torchaudio", "MelSpectrogram (16 kHz, n_fft 400, hop 160, 80 mels): waveform[B, samples]")
def torchaudio_mel_spectrogram():
    ta = import_torchaudio()
    model = ta.transforms.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160, n_mels=80)
    return _case(model, _waves(None), 4000, (5600, 2410), _batch_time("waveform"))


# ============================================================================ SpeechBrain
@case("speechbrain", "ECAPA-TDNN (channels 32, scale 4): features[B, T, 40], relative lengths -> embedding[B, 1, 24]")
def speechbrain_ecapa_tdnn():
    ecapa = import_speech("speechbrain.lobes.models.ECAPA_TDNN")
    model = ecapa.ECAPA_TDNN(input_size=40, lin_neurons=24, channels=[32, 32, 32, 32, 96], attention_channels=16,
                             res2net_scale=4, se_channels=16)
    return _case(Seconds(model), _feats_and_lengths(40), 37, (52, 23), _batch_time("x", "lengths"))


@case("speechbrain", "Xvector (TDNN, statistics pooling): features[B, T, 40], relative lengths")
def speechbrain_xvector():
    xv = import_speech("speechbrain.lobes.models.Xvector")
    model = xv.Xvector(tdnn_channels=[32, 32, 32, 32, 96], lin_neurons=24, in_channels=40)
    return _case(Seconds(model), _feats_and_lengths(40), 37, (52, 23), _batch_time("x", "lengths"))


def _speechbrain_asr(encoder_module: str, **kwargs):
    asr = import_speech("speechbrain.lobes.models.transformer.TransformerASR")
    model = asr.TransformerASR(tgt_vocab=29, input_size=40, d_model=32, nhead=4, num_encoder_layers=2,
                               num_decoder_layers=0, d_ffn=64, dropout=0.0, encoder_module=encoder_module,
                               normalize_before=True, kernel_size=7, causal=False, **kwargs)
    return _case(Seconds(Encode(model)), _feats_and_lengths(40), 37, (52, 23), _batch_time("x", "lengths"))


@case("speechbrain", "Conformer encoder (TransformerASR.encode, RelPosMHAXL): src[B, T, 40], wav_lens")
def speechbrain_conformer():
    return _speechbrain_asr("conformer", attention_type="RelPosMHAXL", positional_encoding=None)


@case("speechbrain", "Branchformer encoder (TransformerASR.encode, cgMLP): src[B, T, 40], wav_lens")
def speechbrain_branchformer():
    return _speechbrain_asr("branchformer", attention_type="RelPosMHAXL", positional_encoding=None,
                            csgu_linear_units=64)


@case("speechbrain", "Transformer encoder (TransformerASR.encode, absolute sine positions): src[B, T, 40], wav_lens")
def speechbrain_transformer():
    return _speechbrain_asr("transformer", attention_type="regularMHA", positional_encoding="fixed_abs_sine")


@case("speechbrain", "CRDNN (2 CNN blocks, LiGRU 2 layers, 1 DNN block): features[B, T, 40]")
def speechbrain_crdnn():
    crdnn_module = import_speech("speechbrain.lobes.models.CRDNN")
    model = crdnn_module.CRDNN(input_size=40, cnn_blocks=2, cnn_channels=(8, 16), inter_layer_pooling_size=[2, 2],
                               time_pooling=False, rnn_layers=2, rnn_neurons=16, dnn_blocks=1, dnn_neurons=16)

    def make(batch, time, seed):
        return _feats_and_lengths(40)(batch, time, seed)[:1]

    return _case(model, make, 37, (52, 23), _batch_time("x"))


@case("speechbrain", "Fbank (16 kHz, n_fft 400, 40 mels, log): wav[B, samples]")
def speechbrain_fbank():
    features = import_speech("speechbrain.lobes.features")
    return _case(features.Fbank(n_fft=400, n_mels=40), _waves(None), 4000, (5600, 2410), _batch_time("wav"))


# ============================================================================ ESPnet
def _espnet_encoder(module: str, cls: str, **kwargs):
    encoder = getattr(import_speech(module), cls)
    model = encoder(input_size=40, output_size=32, attention_heads=4, num_blocks=2, dropout_rate=0.0,
                    positional_dropout_rate=0.0, attention_dropout_rate=0.0, input_layer="conv2d", **kwargs)
    return _case(Encoder(model), _feats_and_lengths(40), 37, (52, 23), _batch_time("xs_pad", "ilens", min_time=7))


@case("espnet", "Conformer encoder (conv2d subsampling, rel_pos latest, macaron, CNN module): xs_pad[B, T, 40], ilens")
def espnet_conformer():
    return _espnet_encoder("espnet2.asr.encoder.conformer_encoder", "ConformerEncoder", linear_units=64,
                           rel_pos_type="latest", pos_enc_layer_type="rel_pos", selfattention_layer_type="rel_selfattn",
                           macaron_style=True, use_cnn_module=True, cnn_module_kernel=7)


@case("espnet", "E-Branchformer encoder (conv2d subsampling, rel_pos, cgMLP, macaron FFN): xs_pad[B, T, 40], ilens")
def espnet_e_branchformer():
    return _espnet_encoder("espnet2.asr.encoder.e_branchformer_encoder", "EBranchformerEncoder",
                           cgmlp_linear_units=64, cgmlp_conv_kernel=7, use_ffn=True, macaron_ffn=True, linear_units=64)


@case("espnet", "Transformer encoder (conv2d subsampling, absolute positions): xs_pad[B, T, 40], ilens")
def espnet_transformer():
    return _espnet_encoder("espnet2.asr.encoder.transformer_encoder", "TransformerEncoder", linear_units=64)


@case("espnet", "Transformer decoder (teacher forcing): hs_pad[B, T, 32], hlens, ys_in_pad[B, U], ys_in_lens")
def espnet_transformer_decoder():
    decoder = import_speech("espnet2.asr.decoder.transformer_decoder")
    model = decoder.TransformerDecoder(vocab_size=29, encoder_output_size=32, attention_heads=4, linear_units=64,
                                       num_blocks=2, dropout_rate=0.0, positional_dropout_rate=0.0)

    def make(batch, time, seed):
        gen = torch.Generator().manual_seed(seed)
        tokens = max(2, time // 3)
        return (torch.randn(batch, time, 32, generator=gen), lengths(batch, time, seed),
                torch.randint(0, 29, (batch, tokens), generator=gen), lengths(batch, tokens, seed + 10))

    batch, time, tokens = Dim("batch"), Dim("time"), Dim("tokens")
    spec = {"hs_pad": {0: batch, 1: time}, "hlens": {0: batch}, "ys_in_pad": {0: batch, 1: tokens},
            "ys_in_lens": {0: batch}}
    return _case(model, make, 21, (30, 13), spec)


# ============================================================================ asteroid
@case("asteroid", "ConvTasNet (free filterbank, stride 8, 2 blocks): wav[B, samples]")
def asteroid_conv_tasnet():
    models = import_speech("asteroid.models")
    model = models.ConvTasNet(n_src=2, n_blocks=2, n_repeats=1, bn_chan=16, hid_chan=32, skip_chan=16,
                              n_filters=32, kernel_size=16, stride=8)
    return _case(model, _waves(None), 803, (1211, 406), _batch_time("wav"))


@case("asteroid", "DPRNN-TasNet (chunks of 20, hop 10, BiLSTM): wav[B, samples]")
def asteroid_dprnn_tasnet():
    models = import_speech("asteroid.models")
    model = models.DPRNNTasNet(n_src=2, bn_chan=16, hid_size=16, chunk_size=20, hop_size=10, n_repeats=2,
                               n_filters=32, kernel_size=16, stride=8)
    return _case(model, _waves(None), 803, (1211, 406), _batch_time("wav"))


@case("asteroid", "SuDORMRF (U-ConvBlocks, upsampling depth 2): wav[B, samples]")
def asteroid_sudormrf():
    models = import_speech("asteroid.models")
    model = models.SuDORMRFNet(n_src=2, bn_chan=16, num_blocks=2, upsampling_depth=2, n_filters=32, kernel_size=21)
    return _case(model, _waves(None), 803, (1211, 406), _batch_time("wav"))


# ============================================================================ EnCodec
def _seanet(cls: str):
    import_torchaudio()
    modules = import_speech("encodec.modules")
    return getattr(modules, cls)(channels=1, dimension=16, n_filters=4, n_residual_layers=1, ratios=[4, 2], lstm=1)


@case("encodec", "SEANet encoder (ratios 4, 2; LSTM; weight norm): x[B, 1, samples] -> latents[B, 16, frames]")
def encodec_encoder():
    return _case(_seanet("SEANetEncoder"), _waves(1), 803, (1211, 406), _batch_time("x", time_axis=2))


class EncodecCodes(nn.Module):
    """EnCodec's encode to codes: the SEANet encoder, then the residual vector quantizer's nearest codes."""

    def __init__(self):
        super().__init__()
        quantization = import_speech("encodec.quantization")
        self.encoder = _seanet("SEANetEncoder")
        self.quantizer = quantization.ResidualVectorQuantizer(dimension=16, n_q=4, bins=32)
        for layer in self.quantizer.vq.layers:  # trained codebooks, not k-means' first call
            layer._codebook.inited.fill_(1.0)
            layer._codebook.embed.normal_()

    def forward(self, x):
        return self.quantizer.encode(self.encoder(x), 100)


@case("encodec", "SEANet encoder + residual vector quantizer (4 codebooks of 32): x[B, 1, samples] -> codes")
def encodec_encode_codes():
    return _case(EncodecCodes(), _waves(1), 803, (1211, 406), _batch_time("x", time_axis=2))


@case("encodec", "SEANet decoder: latents[B, 16, frames] -> x[B, 1, samples]")
def encodec_decoder():
    def make(batch, time, seed):
        gen = torch.Generator().manual_seed(seed)
        return (torch.randn(batch, 16, time, generator=gen),)

    return _case(_seanet("SEANetDecoder"), make, 25, (38, 13), _batch_time("z", time_axis=2))
