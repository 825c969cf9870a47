"""Models compared by ``benchmarks/compare.py``: name -> factory returning (model, args, dynamic_shapes).

``dynamic_shapes`` names dimensions with plain strings (onnxport's form) or ``torch.export.Dim``
objects where a range is needed; compare.py turns the strings into ``Dim`` objects for
torch.onnx.export. Weights are seeded random, nothing is downloaded.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


class MLP(torch.nn.Module):
    """Three Linear layers with GELU and ReLU over (batch, time, 64)."""

    def __init__(self, d: int = 64, hidden: int = 256):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, hidden)
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.fc3 = torch.nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.nn.functional.gelu(self.fc1(x)))))


class SmallCNN(torch.nn.Module):
    """Conv-BN-ReLU-pool twice, global average pool, linear head, over (batch, 3, H, W)."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        )
        self.head = torch.nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def mlp() -> tuple[torch.nn.Module, tuple, Any]:
    return MLP().eval(), (torch.randn(2, 7, 64),), {"x": {0: "batch", 1: "time"}}


def transformer_encoder() -> tuple[torch.nn.Module, tuple, Any]:
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    return model, (torch.randn(2, 9, 64),), {"src": {0: "batch", 1: "seq"}}


def small_cnn() -> tuple[torch.nn.Module, tuple, Any]:
    size = {"min": 4, "max": 1024}  # two 2x poolings need at least 4 pixels
    dims = {0: "batch", 2: torch.export.Dim("height", **size), 3: torch.export.Dim("width", **size)}
    return SmallCNN().eval(), (torch.randn(2, 3, 32, 32),), {"x": dims}


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, tuple, Any]]] = {
    "mlp": mlp,
    "transformer_encoder": transformer_encoder,
    "small_cnn": small_cnn,
}
