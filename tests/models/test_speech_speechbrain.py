"""SpeechBrain's own model classes (tests/speech_zoo.py: small configs, seeded weights), batch and time
dynamic, lengths as input (SpeechBrain's relative lengths, ``wav_lens``, made from integer lengths in the
wrapper), matching eager at the example and at two other (batch, time) with unequal lengths; the Fbank front
end at n_fft=400 within 1e-4 * max(1, |eager|) of eager."""

from speech_front_ends import check_front_end
from speech_zoo import build, check
from third_party import import_speech

import_speech("speechbrain")


def test_ecapa_tdnn():
    """``.expand(len(length), max_len)`` in SpeechBrain's ``length_to_mask``: ``len()`` kept symbolic by the
    non-strict capture (``capture/symbolic_builtins.py``)."""
    check("speechbrain_ecapa_tdnn")


def test_conformer_encoder_with_wav_lens():
    """``.expand(len(length), max_len)`` in its mask: ``len()`` kept symbolic by the non-strict capture."""
    check("speechbrain_conformer")


def test_crdnn():
    check("speechbrain_crdnn")


def test_fbank_n_fft_400():
    check_front_end(build("speechbrain_fbank"))
