"""Small models for the export-config and ``onnxport export`` tests (only elementwise, linear and
reshape ops, so that they export with the core translations alone)."""

from __future__ import annotations

import torch
from torch import nn


class Framer(nn.Module):
    """features [batch, time, 16] -> logits [batch, 2*time, vocab] (frames of 8), lengths doubled."""

    def __init__(self, vocab: int = 5):
        super().__init__()
        self.lin = nn.Linear(8, vocab)

    def forward(self, features, lengths):
        b, t, f = features.shape
        y = torch.tanh(self.lin(features.reshape(b, t * (f // 8), 8)))
        return {"logits": y, "out_lengths": lengths * (f // 8)}


class Renamed(Framer):
    """Returns ``scores`` where the config declares ``logits``."""

    def forward(self, features, lengths):
        out = super().forward(features, lengths)
        return {"scores": out["logits"], "out_lengths": out["out_lengths"]}


class Net(nn.Module):
    """x [batch, 16] -> [batch, 4]: the ``--input`` declaration example."""

    def __init__(self, hidden: int = 8):
        super().__init__()
        self.l1 = nn.Linear(16, hidden)
        self.l2 = nn.Linear(hidden, 4)

    def forward(self, x):
        return self.l2(torch.tanh(self.l1(x)))


class Drifting(Net):
    """Eager results change with every call (a counter outside the graph): validation must fail."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return super().forward(x) * float(self.calls)


def build_framer(vocab: int = 5, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return Framer(vocab)


def build_renamed(vocab: int = 5) -> nn.Module:
    torch.manual_seed(0)
    return Renamed(vocab)


def build_net(hidden: int = 8) -> nn.Module:
    torch.manual_seed(0)
    return Net(hidden)


def build_drifting() -> nn.Module:
    torch.manual_seed(0)
    return Drifting()


class Pairs(nn.Module):
    """x [batch, time, 16] -> [batch, time/2, 16], adding even and odd frames: even lengths only."""

    def forward(self, x):
        return x[:, ::2] + x[:, 1::2]


def build_pairs() -> nn.Module:
    return Pairs()


class Kept(nn.Module):
    """Boxes scoring over a threshold: outputs of a size known only when the model runs."""

    def forward(self, boxes, scores):
        keep = scores > 0.5
        return boxes[keep] * 2, scores[keep]


def build_kept() -> nn.Module:
    return Kept()
