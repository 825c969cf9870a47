"""transformers' Qwen3-ASR audio encoder (tiny config, seeded, weights spread) with dynamic batch and
frame count, the samples' lengths given by the mask: its attention windows, cut in a Python loop over
the lengths (``get_audio_cu_seqlens``), are computed as a tensor of boundaries
(``onnxport.library.transformers.audio_windows``), the attention per window as one block-diagonal
masked attention (``packed_vision_attention``), and SDPA's ``is_causal`` without reading the packed
frame count first (``sdpa_causal``): the ONNX model packs as many frames as the lengths keep and
matches eager PyTorch at other batch sizes, frame counts and lengths."""

import pytest
import torch

from exportcheck import check_export
from hf_recurrent import spread

transformers = pytest.importorskip("transformers")


class Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_features, input_features_mask):
        return self.model(input_features, input_features_mask).last_hidden_state


def _audio(lengths, frames, seed):
    """Mel features ``[batch, 16, frames]`` and the mask of each sample's first ``lengths[i]`` frames."""
    g = torch.Generator().manual_seed(seed)
    mask = (torch.arange(frames)[None, :] < torch.tensor(lengths)[:, None]).long()
    return torch.randn(len(lengths), 16, frames, generator=g), mask


def test_qwen3_asr_encoder_packs_the_frames_the_lengths_keep():
    from transformers.models.qwen3_asr.configuration_qwen3_asr import Qwen3ASREncoderConfig
    from transformers.models.qwen3_asr.modeling_qwen3_asr import Qwen3ASREncoder

    torch.manual_seed(0)
    config = Qwen3ASREncoderConfig(num_mel_bins=16, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64,
                                   d_model=32, n_window=50, n_window_infer=200, downsample_hidden_size=8,
                                   output_dim=32)
    model = Encoder(spread(Qwen3ASREncoder(config), scale=0.1))
    # the encoder takes whole chunks of 2 * n_window frames (13 frames each after its convolutions)
    frames = 100 * torch.export.Dim("chunks", min=1)
    batch = torch.export.Dim("batch")
    others = [_audio([500, 170, 333], 500, 1), _audio([100], 100, 2), _audio([400, 400], 400, 3),
              _audio([5, 240, 1, 199], 300, 4)]
    check_export(model, _audio([300, 190], 300, 0), {"input_features": {0: batch, 2: frames},
                                                  "input_features_mask": {0: batch, 1: frames}},
                 inputs=others, sizes=[], values=[])
