"""transformers' MobileNet v1 / v2: TensorFlow's "SAME" padding captured at every image size.

transformers' MobileNet v1 / v2 compute TensorFlow's "SAME" padding with ``int(features.shape[-2])``
and a branch on ``in_height % stride == 0`` (``apply_tf_padding``): torch.export fixes the image size
there. The padding is one formula at every size, TensorFlow's own
``max((ceil(size / stride) - 1) * stride + kernel - size, 0)``: ``max(kernel - stride, 0)`` where
``size % stride == 0``, ``max(kernel - size % stride, 0)`` elsewhere, the two branches of
transformers' code. ``TF_SAME_PADDING`` (a registered capture patch) gives the traced modules
that formula; eager execution outside the trace is unchanged.

Semantics: TensorFlow's padding notes (https://www.tensorflow.org/api_docs/python/tf/nn#notes_on_padding_2),
transformers' ``apply_tf_padding``.
"""

from __future__ import annotations

import sys

import torch
from torch import nn

from onnxport.capture.patches import Patch, SetAttribute, always, register

MODULES = ("transformers.models.mobilenet_v1.modeling_mobilenet_v1",
           "transformers.models.mobilenet_v2.modeling_mobilenet_v2")


def tf_same_padding(features: torch.Tensor, conv_layer: nn.Conv2d) -> torch.Tensor:
    """``features`` (N, C, H, W) padded with zeros as TensorFlow's "SAME" convolution pads before
    ``conv_layer`` (its stride, kernel size and dilation), H and W kept symbolic."""
    height, width = features.shape[-2], features.shape[-1]
    stride_height, stride_width = conv_layer.stride
    kernel_height, kernel_width = conv_layer.kernel_size
    dilation_height, dilation_width = conv_layer.dilation
    along_height = _along(height, kernel_height, stride_height)
    along_width = _along(width, kernel_width, stride_width)
    left, top = along_width // 2, along_height // 2
    padding = (left * dilation_width, (along_width - left) * dilation_width,
               top * dilation_height, (along_height - top) * dilation_height)
    return nn.functional.pad(features, padding, "constant", 0.0)


def _along(size, kernel: int, stride: int):
    """The padding along one axis, TensorFlow's ``max((ceil(size / stride) - 1) * stride + kernel - size, 0)``
    (equal to both branches of transformers' code); constant for stride 1. Where ``kernel >= stride``
    (every strided convolution of MobileNet: 3x3, stride 2) the difference is at least
    ``ceil(size / stride) * stride - size >= 0`` at every size, so the max is the difference itself: the
    convolution's output size is then ``ceil(size / stride)`` by its form, where a ``Max`` of the size
    nested in every later layer's size made torch's size reasoning grow layer by layer (a tiny
    MobileNetV2 captured in minutes instead of seconds)."""
    if stride == 1:
        return max(kernel - 1, 0)
    along = ((size + stride - 1) // stride - 1) * stride + kernel - size
    return along if kernel >= stride else torch.sym_max(along, 0)


def _changes() -> list:
    return [SetAttribute(sys.modules[name], "apply_tf_padding", lambda original: tf_same_padding)
            for name in MODULES if name in sys.modules and hasattr(sys.modules[name], "apply_tf_padding")]


TF_SAME_PADDING = register(Patch(
    "TF SAME padding symbolic", _changes,
    "transformers' MobileNet v1/v2 apply_tf_padding: while torch.export traces, the same padding as one formula "
    "of the size (no int() of a size, no branch on its parity); nothing happens where those modules are not "
    "imported", when=always, order=110))
