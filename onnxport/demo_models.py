"""Small seeded models for examples, the command line and tests (no downloaded weights).

CNN: ``resnet_same_cnn()`` and ``cnn_example()``, a 1-D ResNet-style network over
``[batch, channels, time]`` made of ``padding="same"`` convolutions (odd and even kernels, one
dilated), batch norm with non-trivial running statistics, ReLU, max pooling, adaptive average
pooling and a linear head.

Transformer: ``transformer_encoder()`` and ``transformer_example()``, a 2-layer
``nn.TransformerEncoder`` (d_model 64) over ``[batch, time, 64]``.
"""

from __future__ import annotations

import torch
from torch import nn

# ------------------------------------------------------------------------------------------ CNN

CNN_IN_CHANNELS = 8
CNN_CLASSES = 5


def _randomize_batch_norm(module: nn.Module) -> None:
    """Give every batch norm of ``module`` random affine parameters and running statistics."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.2)
                m.running_mean.normal_(0.0, 0.5)
                m.running_var.uniform_(0.5, 2.0)


class SameResidualBlock(nn.Module):
    """``relu(x + bn(conv_k4(relu(bn(conv_k3(x))))))`` with ``padding="same"`` convolutions.

    Args:
        channels: channels in and out.
        dilation: dilation of the second (even-kernel) convolution.
        dims: 1 for ``[N, C, T]`` inputs, 2 for ``[N, C, H, W]``.
    """

    def __init__(self, channels: int, dilation: int = 1, dims: int = 1):
        super().__init__()
        conv = nn.Conv1d if dims == 1 else nn.Conv2d
        norm = nn.BatchNorm1d if dims == 1 else nn.BatchNorm2d
        self.conv1 = conv(channels, channels, 3, padding="same", bias=False)
        self.bn1 = norm(channels)
        self.conv2 = conv(channels, channels, 4, padding="same", dilation=dilation, bias=False)
        self.bn2 = norm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(x + y)


class ResNetSameCNN(nn.Module):
    """A ResNet-style classifier: stem conv, two residual blocks around a max pool, adaptive
    average pool to one step, linear head. Input ``[N, in_channels, T]`` (or ``[N, C, H, W]`` with
    ``dims=2``), output ``[N, classes]``. Needs ``T >= 2`` (one max pool of stride 2)."""

    def __init__(self, in_channels: int = CNN_IN_CHANNELS, width: int = 16, classes: int = CNN_CLASSES,
                 dims: int = 1):
        super().__init__()
        conv = nn.Conv1d if dims == 1 else nn.Conv2d
        norm = nn.BatchNorm1d if dims == 1 else nn.BatchNorm2d
        # torch.export (2.13) specializes the length of max_pool1d called without indices;
        # the form with indices keeps it symbolic, so the pool asks for them and drops them
        pool = (lambda k: nn.MaxPool1d(k, return_indices=True)) if dims == 1 else nn.MaxPool2d
        adaptive = nn.AdaptiveAvgPool1d if dims == 1 else nn.AdaptiveAvgPool2d
        self.stem = conv(in_channels, width, 3, padding="same")
        self.stem_bn = norm(width)
        self.block1 = SameResidualBlock(width, dilation=1, dims=dims)
        self.pool = pool(2)
        self.block2 = SameResidualBlock(width, dilation=2, dims=dims)
        self.gap = adaptive(1)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem_bn(self.stem(x)))
        x = self.pool(self.block1(x))
        if isinstance(x, tuple):
            x = x[0]
        x = self.block2(x)
        return self.head(torch.flatten(self.gap(x), 1))


def resnet_same_cnn(dims: int = 1, seed: int = 0) -> ResNetSameCNN:
    """The seeded, eval-mode ResNet-style CNN (``dims=1``: input ``[batch, 8, time]``)."""
    torch.manual_seed(seed)
    model = ResNetSameCNN(dims=dims)
    _randomize_batch_norm(model)
    return model.eval()


def cnn_example(batch: int = 2, time: int = 24, seed: int = 0) -> tuple[tuple, dict]:
    """``(args, dynamic_shapes)`` for ``resnet_same_cnn()``: ``x`` of ``[batch, 8, time]`` with
    ``batch`` and ``time`` dynamic."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, CNN_IN_CHANNELS, time, generator=gen)
    return (x,), {"x": {0: "batch", 2: "time"}}


# ------------------------------------------------------------------------------------ Transformer

TRANSFORMER_D_MODEL = 64


def transformer_encoder(seed: int = 0, enable_nested_tensor: bool = False) -> nn.TransformerEncoder:
    """The seeded, eval-mode 2-layer ``nn.TransformerEncoder`` (d_model 64, 4 heads, feed-forward
    128, batch first). Input ``src: [batch, time, 64]``, optional
    ``src_key_padding_mask: bool[batch, time]`` (True = padding); output ``[batch, time, 64]``.

    ``enable_nested_tensor=True`` makes eager PyTorch (eval, no grad) return zeros at padded
    positions when a ``src_key_padding_mask`` is given.
    """
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(TRANSFORMER_D_MODEL, nhead=4, dim_feedforward=128, dropout=0.1,
                                       batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=enable_nested_tensor).eval()


def transformer_example(batch: int = 2, time: int = 12, seed: int = 0) -> tuple[tuple, dict]:
    """``(args, dynamic_shapes)`` for ``transformer_encoder()``: ``src`` of ``[batch, time, 64]``
    with ``batch`` and ``time`` dynamic."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randn(batch, time, TRANSFORMER_D_MODEL, generator=gen)
    return (src,), {"src": {0: "batch", 1: "time"}}


# (name, model factory, example factory) exported by ``onnxport demo``
DEMOS = [
    ("resnet_same_cnn", resnet_same_cnn, cnn_example),
    ("transformer_encoder", transformer_encoder, transformer_example),
]
