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



def test_step3p7_vision_tower_at_grids_on_both_sides_of_its_1_by_1_map():
    # patches of 14, then two stride-2 convolutions: at the example's 64 (a grid of 4) the last map is 1 x 1,
    # and torch.export's strides bound the image to 42..69 (grids of 3 and 4); traced at 128 instead
    from transformers.models.step3p7.configuration_step3p7 import Step3p7VisionConfig
    from transformers.models.step3p7.modeling_step3p7 import Step3p7VisionModel

    torch.manual_seed(0)
    config = Step3p7VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 image_size=64, patch_size=14)
    r = check_export(Step3p7VisionModel(config).eval(), (torch.randn(2, 3, 64, 64),), SQUARE, values=[],
                     sizes=[{"batch": 1, "image": 70}, {"batch": 3, "image": 130}, {"batch": 1, "image": 28},
                            {"batch": 2, "image": 41}])
    assert [str(c) for c in r.constraints] == ["image >= 14"]  # its patch convolution's kernel
