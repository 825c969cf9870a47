"""Tiny models trained for a few seconds, so that a quantized model's agreement with the float one
means something (with random weights, logits are nearly flat and any error flips the argmax).

- ``shapes_cnn()``: a small CNN classifying synthetic 16x16 images of four shapes (horizontal bar,
  vertical bar, square outline, diagonal) at random places, with noise; ``shapes_data(n, seed)``
  makes labelled images.
- ``text_llama()``: a 2-layer Llama (transformers' ``LlamaForCausalLM`` from a ``LlamaConfig``)
  trained on a short text at character level; ``TEXT``, ``encode`` and ``decode`` map text to ids
  (0 padding, 1 beginning, 2 end of sequence, then the characters).

Everything is seeded and built in memory; nothing is downloaded or written to disk.
"""

from __future__ import annotations

import torch

SHAPES = 4
SIDE = 16

TEXT = ("the quick brown fox jumps over the lazy dog. a journey of a thousand miles begins with a single step. "
        "all that glitters is not gold. to be or not to be, that is the question. the early bird catches the worm. "
        "knowledge is power. time flies like an arrow; fruit flies like a banana. ")
CHARS = sorted(set(TEXT))
SPECIAL = 3  # pad, bos, eos


def encode(text: str) -> list[int]:
    return [SPECIAL + CHARS.index(c) for c in text]


def decode(ids) -> str:
    return "".join(CHARS[i - SPECIAL] if i >= SPECIAL else "" for i in ids)


def shapes_data(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(images float32[n, 1, 16, 16], labels int64[n])``: one of four shapes drawn at a random
    place and size, plus Gaussian noise (std 0.3)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, SIDE, SIDE, generator=g) * 0.3
    y = torch.randint(0, SHAPES, (n,), generator=g)
    for i in range(n):
        size = int(torch.randint(5, 10, (1,), generator=g))
        r, c = (int(v) for v in torch.randint(0, SIDE - size, (2,), generator=g))
        k = int(y[i])
        if k == 0:
            x[i, 0, r + size // 2, c:c + size] += 1.0
        elif k == 1:
            x[i, 0, r:r + size, c + size // 2] += 1.0
        elif k == 2:
            x[i, 0, r, c:c + size] += 1.0
            x[i, 0, r + size - 1, c:c + size] += 1.0
            x[i, 0, r:r + size, c] += 1.0
            x[i, 0, r:r + size, c + size - 1] += 1.0
        else:
            idx = torch.arange(size)
            x[i, 0, r + idx, c + idx] += 1.0
    return x, y


class ShapesCNN(torch.nn.Module):
    """Two convolutions, pooling, a hidden linear layer and the class scores."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.hidden = torch.nn.Linear(32 * 4 * 4, 64)
        self.classes = torch.nn.Linear(64, SHAPES)

    def forward(self, x):
        return self.classes(torch.relu(self.hidden(self.features(x).flatten(1))))


def shapes_cnn(steps: int = 150, seed: int = 0) -> ShapesCNN:
    """A ``ShapesCNN`` trained ``steps`` Adam steps (batch 64) on ``shapes_data``; eval mode."""
    torch.manual_seed(seed)
    model = ShapesCNN()
    x, y = shapes_data(2048, seed=seed + 1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        i = torch.randint(0, len(x), (64,), generator=g)
        loss = torch.nn.functional.cross_entropy(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def text_llama(steps: int = 300, seed: int = 0, width: int = 64, layers: int = 2, window: int = 48):
    """A ``LlamaForCausalLM`` (``width`` wide, ``layers`` layers, 4 heads, 2 key/value heads)
    trained ``steps`` Adam steps on random ``window``-character windows of ``TEXT``; eval mode."""
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=SPECIAL + len(CHARS), hidden_size=width, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, intermediate_size=2 * width,
                                   max_position_embeddings=256, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(cfg)
    data = torch.tensor(encode(TEXT * 2))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        starts = torch.randint(0, len(data) - window - 1, (16,), generator=g)
        batch = torch.stack([data[s:s + window] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()
