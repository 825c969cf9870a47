"""torchaudio's Emformer while traced (onnxport/library/torchaudio.py): the right context and the block
attention mask computed from index arithmetic equal what torchaudio's segment loops build, for every
utterance length and configuration tried (memory or none, right and left context or none); the patch
changes the methods only while installed. The whole Emformer's export: tests/models/test_speech_torchaudio.py."""

from __future__ import annotations

import itertools

import pytest
import torch

from onnxport.capture.patches import installed
from onnxport.library.torchaudio import EMFORMER_SEGMENTS, attention_mask, right_context
from third_party import import_torchaudio

import_torchaudio()
from torchaudio.models.emformer import _EmformerImpl  # noqa: E402


@pytest.mark.parametrize("segment, right, left, memory",
                         list(itertools.product([1, 4], [0, 2, 5], [0, 3], [0, 2])))
def test_index_arithmetic_equals_the_segment_loops(segment, right, left, memory):
    impl = _EmformerImpl(torch.nn.ModuleList(), segment, left, right, memory)
    for length in range(1, 14):
        x = torch.randn(length + right, 2, 3)
        expected, got = impl._gen_right_context(x), right_context(impl, x)
        assert got.shape == expected.shape and torch.equal(got, expected), length
        expected, got = impl._gen_attention_mask(x[:length]), attention_mask(impl, x[:length])
        assert got.dtype == expected.dtype and got.shape == expected.shape and torch.equal(got, expected), length


def test_the_methods_are_torchaudios_outside_the_patch():
    own = _EmformerImpl._gen_right_context, _EmformerImpl._gen_attention_mask
    with installed(EMFORMER_SEGMENTS):
        assert (_EmformerImpl._gen_right_context, _EmformerImpl._gen_attention_mask) == (right_context, attention_mask)
    assert (_EmformerImpl._gen_right_context, _EmformerImpl._gen_attention_mask) == own
