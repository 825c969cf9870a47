"""Blocks whose ONNX forms are measured against eager float64 by tests/translate/ops/test_numerics.py and
benchmarks/numerics.py alike."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class SqueezeExcitation(torch.nn.Module):
    """torchvision's SqueezeExcitation: the channels' means gate the channels; the first 1x1
    convolution scaled to the inputs' magnitude (as a block trained on them is) so that the sigmoid
    does not saturate and the gate reads the means."""

    def __init__(self, channels: int = 32, squeezed: int = 8):
        super().__init__()
        self.fc1 = torch.nn.Conv2d(channels, squeezed, 1)
        self.fc2 = torch.nn.Conv2d(squeezed, channels, 1)
        with torch.no_grad():
            self.fc1.weight.mul_(1e-2)

    def forward(self, x):
        scale = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(torch.relu(self.fc1(scale))))
