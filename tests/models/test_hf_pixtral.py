"""transformers' Pixtral vision encoder (tiny config, seeded, weights spread) called without
``image_sizes``, with dynamic batch, height and width: its per-image list ``[(height, width)] *
batch_size`` is captured as the batch tensor (``onnxport.library.transformers.pixtral``), and the ONNX
model matches eager PyTorch (which runs the list path) at other batch sizes and image shapes."""

import pytest
import torch

from exportcheck import check_export
from hf_recurrent import spread

transformers = pytest.importorskip("transformers")


class Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).last_hidden_state


def test_pixtral_batch_of_one_image_size_keeps_batch_and_image_dynamic():
    import transformers.models.pixtral.modeling_pixtral as pixtral

    torch.manual_seed(0)
    model = Encoder(spread(transformers.PixtralVisionModel(transformers.PixtralVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, head_dim=16,
        image_size=64, patch_size=8))))
    forward = pixtral.PixtralVisionModel.forward
    check_export(model, (torch.randn(2, 3, 32, 48),), {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                 sizes=[{"batch": 1, "height": 32, "width": 48}, {"batch": 3, "height": 64, "width": 24},
                        {"batch": 2, "height": 40, "width": 40}, {"batch": 4, "height": 16, "width": 72}],
                 values=[], expect_inputs={"pixel_values": ["batch", 3, "height", "width"]})
    assert pixtral.PixtralVisionModel.forward is forward  # restored after capture
