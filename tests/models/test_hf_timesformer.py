"""transformers' TimeSformer (tiny config, seeded, weights spread) with dynamic batch and image size,
the example at the config's own image size: its position and time
embeddings are resized at every size (``onnxport.library.transformers.timesformer``; nearest resizing
to the table's own size returns it unchanged), so the ONNX model matches eager PyTorch (which adds the
tables as they are at the config's size) at other image sizes."""

import pytest
import torch

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


def test_timesformer_image_declared_any_size_states_the_whole_pairs_of_patches_it_needs():
    # declared as any size, the image must be two patches or more (torch's solver states 16 <= image with no
    # fix to suggest) and whole pairs of patches up to its last half patch (the layers' reshape by the
    # config's patch rows): adopted as constraints, each where eager PyTorch refuses too
    torch.manual_seed(0)
    config = transformers.TimesformerConfig(image_size=32, patch_size=8, num_frames=4, hidden_size=32,
                                            num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    model = Video(spread(transformers.TimesformerModel(config)))
    r = check_export(model, (torch.randn(2, 4, 3, 32, 32),), {"pixel_values": {0: "batch", 3: "image", 4: "image"}},
                     sizes=[{"batch": 1, "image": 16}, {"batch": 3, "image": 48}, {"batch": 2, "image": 70}], values=[])
    adopted = [g for g in r.captured.guards if g.adopted]
    assert [g.text for g in adopted] == ["image >= 16", "image % 16 in (0, 1, 2, 3, 4, 5, 6, 7)"]
    for size in (8, 24, 40, 60):  # excluded: eager PyTorch refuses there too
        assert not all(g.holds({"image": size}) for g in adopted)
        with pytest.raises(RuntimeError):
            model(torch.randn(1, 4, 3, size, size))
