"""A small speech encoder: two stride-2 Conv1d (time subsampled by 4), then transformer layers
whose self-attention masks the padded frames (key padding mask built from the lengths).

Export it with its config::

    onnxport export examples/speech_encoder.py:build_encoder --config examples/speech_encoder.toml \
        -o speech_encoder.onnx --report report.json

Inputs: ``features: float32[batch, time, n_mels]`` (zero past each length) and
``lengths: int64[batch]``. Outputs: ``logits: float32[batch, out_time, vocab]`` and
``out_lengths: int64[batch]``, ``out_time = ((time - 1) // 2) // 2 + 1``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class EncoderLayer(nn.Module):
    """Pre-norm self-attention + feed-forward; ``mask`` is ``[batch, 1, 1, time]``, True = keep."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, 2 * d_model)
        self.ff2 = nn.Linear(2 * d_model, d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).contiguous().reshape(b, t, d))
        return x + self.ff2(F.relu(self.ff1(self.norm2(x))))


class SpeechEncoder(nn.Module):
    """features [batch, time, n_mels] + lengths [batch] -> logits [batch, out_time, vocab] + out_lengths."""

    def __init__(self, n_mels: int = 80, d_model: int = 64, heads: int = 4, layers: int = 1, vocab: int = 32):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, d_model, kernel_size=3, stride=2, padding=1)
        self.conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)
        self.layers = nn.ModuleList(EncoderLayer(d_model, heads) for _ in range(layers))
        self.out = nn.Linear(d_model, vocab)

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
        x = F.relu(self.conv1(features.transpose(1, 2)))
        x = F.relu(self.conv2(x)).transpose(1, 2)  # [batch, out_time, d_model]
        out_lengths = ((lengths - 1) // 2) // 2 + 1  # each conv: (n + 2 - 3) // 2 + 1
        steps = torch.arange(x.shape[1], device=x.device)
        mask = (steps.unsqueeze(0) < out_lengths.unsqueeze(1)).unsqueeze(1).unsqueeze(1)
        for layer in self.layers:
            x = layer(x, mask)
        return {"logits": self.out(x), "out_lengths": out_lengths}


def build_encoder(n_mels: int = 80, d_model: int = 64, heads: int = 4, layers: int = 1, vocab: int = 32,
                  seed: int = 0) -> SpeechEncoder:
    """A ``SpeechEncoder`` with seeded random weights, in eval mode."""
    torch.manual_seed(seed)
    return SpeechEncoder(n_mels, d_model, heads, layers, vocab).eval()
