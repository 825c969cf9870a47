"""torchaudio's own model classes (tests/speech_zoo.py: small configs, seeded weights), batch and time dynamic,
lengths as inputs, matching eager at the example and at two other (batch, time) with unequal lengths; the
MelSpectrogram front end at n_fft=400 within 1e-4 * max(1, |eager|) of eager."""

from exportcheck import check_export
from speech_front_ends import check_front_end
from speech_zoo import build, check
from third_party import import_speech

import_speech("torchaudio")


def test_conformer():
    """``int(torch.max(lengths).item())`` in its padding mask: kept a data-dependent size by the non-strict
    capture (``capture/symbolic_builtins.py``)."""
    check("torchaudio_conformer")


def test_emformer():
    """``int(torch.max(lengths).item())`` kept a data-dependent size (``capture/symbolic_builtins.py``); the
    segment loops computed from index arithmetic while traced (``library/torchaudio.py``)."""
    check("torchaudio_emformer")


def test_rnnt_predictor_tokens_dynamic():
    check("torchaudio_rnnt_predictor")


def test_rnnt_joiner_tokens_dynamic():
    check("torchaudio_rnnt_joiner")


def test_conv_tasnet_samples_not_a_multiple_of_the_stride():
    case = build("torchaudio_conv_tasnet")
    assert case.args[0].shape[-1] % 8 and not case.others[0][0].shape[-1] % 8  # and a multiple at another set
    check_export(case.model, case.args, case.dynamic_shapes, inputs=case.others)


def test_mel_spectrogram_n_fft_400():
    check_front_end(build("torchaudio_mel_spectrogram"))
