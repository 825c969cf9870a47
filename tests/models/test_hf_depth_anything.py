"""transformers' Depth Anything (tiny DINOv2 backbone and DPT-style neck, seeded, weights spread) with
dynamic batch and image size: its head upsamples to ``int(patch_height * self.patch_size)``, an ``int``
that fixes ``image // 14`` to the example's (a range of sizes); onnxport retraces with that module's
``int`` keeping the size symbolic (``onnxport.capture.symbolic_builtins``), so the ONNX model's depth map
follows the image size and matches eager PyTorch at other batch sizes and at image sizes on and off
the patch grid."""

import pytest
import torch

from exportcheck import check_export
from hf_recurrent import spread

transformers = pytest.importorskip("transformers")


def test_depth_anything_keeps_image_size_dynamic():
    torch.manual_seed(0)
    backbone = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                                         intermediate_size=64, image_size=56, patch_size=14,
                                         out_features=["stage1", "stage2", "stage3", "stage4"],
                                         reshape_hidden_states=False)
    config = transformers.DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=32,
                                              neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16,
                                              head_hidden_size=8, patch_size=14)
    model = spread(transformers.DepthAnythingForDepthEstimation(config), scale=0.1)

    class Depth(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            return self.model(pixel_values=pixel_values).predicted_depth

    result = check_export(Depth(), (torch.randn(2, 3, 56, 56),), {"pixel_values": {0: "batch", 2: "image", 3: "image"}},
                 sizes=[{"batch": 1, "image": 70}, {"batch": 3, "image": 42}, {"batch": 2, "image": 100}],
                 values=[])
    depth = result.model.graph.outputs[0].shape
    assert all(not isinstance(d, int) for d in depth), depth  # the depth map follows the image
