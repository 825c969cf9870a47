"""Vision models from transformers' own classes (tiny configs, seeded) exported with height and
width declared under one name (``{2: "image", 3: "image"}``, a square image of any size).
torch.export gives the two axes symbols of their own; tied only from the start of the trace they
keep one size, where MobileViT's comparison of its patch counts narrowed the image to the example's
neighbourhood (ONNX Reshape failed at larger images). MobileViT's example of 64 makes its last patch
grid one patch (a size torch fixes): it is traced at twice the example."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")
SQUARE = {"pixel_values": {0: "batch", 2: "image", 3: "image"}}


def test_mobilevit_at_other_square_sizes():
    torch.manual_seed(0)
    config = transformers.MobileViTConfig(image_size=64, patch_size=2, hidden_sizes=[24, 24, 32],
                                          neck_hidden_sizes=[8, 8, 8, 16, 16, 24, 80], num_attention_heads=2)
    model = transformers.MobileViTModel(config).eval()
    check_export(model, (torch.randn(2, 3, 64, 64),), SQUARE, values=[],
                 sizes=[{"batch": 3, "image": 68}, {"batch": 1, "image": 96}, {"batch": 2, "image": 40}])

