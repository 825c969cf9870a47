"""TensorFlow's "SAME" padding as one formula of the size (``onnxport.library.transformers.mobilenet``): the
same padding as transformers' ``apply_tf_padding`` at every size, for kernels at least the stride (no max
needed) and below it (the max binds), and a strided convolution's output size ``ceil(size / stride)``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from onnxport.library.transformers.mobilenet import tf_same_padding

transformers = pytest.importorskip("transformers")
from transformers.models.mobilenet_v2.modeling_mobilenet_v2 import apply_tf_padding  # noqa: E402


@pytest.mark.parametrize(("kernel", "stride"), [(3, 2), (3, 1), (1, 2), (2, 3), (5, 2)])
def test_the_padding_is_transformers_at_every_size(kernel, stride):
    conv = nn.Conv2d(1, 1, kernel, stride=stride, bias=False)
    for height in range(1, 20):
        width = 2 * height + 1
        features = torch.randn(1, 1, height, width)
        ours, theirs = tf_same_padding(features, conv), apply_tf_padding(features, conv)
        assert ours.shape == theirs.shape and torch.equal(ours, theirs), (kernel, stride, height)
        if kernel >= stride and height >= kernel:
            assert conv(ours).shape[-2:] == (-(-height // stride), -(-width // stride))
