"""transformers' TimeSformer (tiny config, seeded, weights spread) with dynamic batch and image size,
the example at the config's own image size: its position and time
embeddings are resized at every size (``onnxport.library.transformers.timesformer``; nearest resizing
to the table's own size returns it unchanged), so the ONNX model matches eager PyTorch (which adds the
tables as they are at the config's size) at other image sizes."""

import re

import pytest
import torch

import onnxport
from exportcheck import check_export
from hf_recurrent import spread

transformers = pytest.importorskip("transformers")


class Video(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).last_hidden_state


def test_timesformer_keeps_image_size_and_frames_dynamic():
    torch.manual_seed(0)
    config = transformers.TimesformerConfig(image_size=32, patch_size=8, num_frames=4, hidden_size=32,
                                            num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    model = Video(spread(transformers.TimesformerModel(config)))
    # the layers read the frame count from the config (TimesformerLayer: num_frames = config.num_frames)
    # and reshape the tokens to rows of config.image_size // patch_size = 4 patches: an even number of patches a side
    image = 16 * torch.export.Dim("pairs", min=1)
    check_export(model, (torch.randn(2, 4, 3, 32, 32),), {"pixel_values": {0: "batch", 3: image, 4: image}},
                 sizes=[{"batch": 1, "pairs": 1}, {"batch": 3, "pairs": 3}, {"batch": 2, "pairs": 4}], values=[],
                 expect_inputs={"pixel_values": ["batch", 4, 3, "16*pairs", "16*pairs"]})


def test_timesformer_image_without_its_multiple_names_the_line_that_needs_it():
    # declared as any size, the image must be two patches or more and whole patches (then whole pairs of
    # them: the layers' reshape by the config's patch rows): the refusal names the line and a multiple
    torch.manual_seed(0)
    config = transformers.TimesformerConfig(image_size=32, patch_size=8, num_frames=4, hidden_size=32,
                                            num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    model = Video(transformers.TimesformerModel(config).eval())
    with pytest.raises(onnxport.DynamicShapesError) as info:
        onnxport.to_onnx(model, (torch.randn(2, 4, 3, 32, 32),),
                         dynamic_shapes={"pixel_values": {0: "batch", 3: "image", 4: "image"}})
    assert "modeling_timesformer.py" in (info.value.where or ""), info.value
    assert re.search(r"image = \d+\*_image", str(info.value)), info.value  # torch's multiple of the patch
