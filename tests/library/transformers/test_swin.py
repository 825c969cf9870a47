"""transformers' Swin layers clamping their window per call (``onnxport.library.transformers.swin``):
found in each module holding a copy, installed and restored by the registry; the attention mask at
every shift is transformers' where the layer shifts and all zeros (no mask) where it does not."""

from __future__ import annotations

import importlib

import pytest
import torch

from onnxport.capture.patches import installed
from onnxport.capture.source_variants import source_variant
from onnxport.library.transformers.swin import WINDOW_AT_EVERY_SIZE, _every_shift

transformers = pytest.importorskip("transformers")

LAYERS = [("swin", "modeling_swin", "SwinLayer"), ("donut", "modeling_donut_swin", "DonutSwinLayer"),
          ("clap", "modeling_clap", "ClapAudioLayer")]


@pytest.mark.parametrize("package, module, name", LAYERS)
def test_each_copy_is_found_and_restored(package, module, name):
    cls = getattr(importlib.import_module(f"transformers.models.{package}.{module}"), name)
    originals = {k: cls.__dict__[k] for k in ("set_shift_and_window_size", "get_attn_mask", "forward")}
    with installed(WINDOW_AT_EVERY_SIZE):
        assert all(cls.__dict__[k] is not v for k, v in originals.items())
    assert all(cls.__dict__[k] is v for k, v in originals.items())


@pytest.mark.parametrize("height, width", [(8, 8), (12, 16), (4, 20)])
def test_the_mask_at_every_shift(height, width):
    from transformers.models.swin.modeling_swin import SwinLayer

    layer = SwinLayer(transformers.SwinConfig(window_size=4, embed_dim=8), dim=8, input_resolution=(16, 16),
                      num_heads=1, shift_size=2)
    every = source_variant(SwinLayer.get_attn_mask, _every_shift)
    torch.testing.assert_close(every(layer, height, width, torch.float32, None),
                               layer.get_attn_mask(height, width, torch.float32, None))
    layer.shift_size = 0
    assert layer.get_attn_mask(height, width, torch.float32, None) is None
    zeros = every(layer, height, width, torch.float32, None)
    assert zeros.shape == ((height // 4) * (width // 4), 16, 16) and not zeros.any()


def test_a_map_of_fixed_size_at_every_batch():
    """CLAP's audio encoder on a spectrogram of fixed size, only its batch dynamic: its last stage's
    map is one window (eager's branch clamps the window to it), taken in Python ints while traced
    (transformers' traced form makes the window a tensor whose value torch.export cannot read)."""
    from exportcheck import check_export

    config = transformers.ClapAudioConfig(
        spec_size=64, num_mel_bins=16, window_size=4, patch_size=4, patch_stride=[4, 4], depths=[1, 1, 1],
        num_attention_heads=[1, 1, 1], hidden_size=32, patch_embeds_hidden_size=16, projection_dim=16)
    torch.manual_seed(0)
    model = transformers.ClapAudioModel(config).eval()
    features = torch.randn(2, 1, 32, 16)
    batch = torch.export.Dim("batch", min=1)
    check_export(model, (features,), {"input_features": {0: batch}},
                 sizes=[{"batch": 1}, {"batch": 3}, {"batch": 5}])
