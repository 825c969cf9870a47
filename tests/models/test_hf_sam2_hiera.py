"""SAM2's Hiera image encoder (transformers' own classes, small config, seeded): every stage pads its
feature map to a multiple of the window (``height + (-height) % window``) and pools by 2; captured
as written, the sizes' expressions doubled with each stage. The export keeps the image size
dynamic, adopting the sizes eager PyTorch runs at (the windowed positional embedding is tiled a
whole number of times), and is compared with eager at other batch and image sizes."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")


def test_sam2_hiera_keeps_its_image_size_dynamic():
    torch.manual_seed(0)
    config = transformers.Sam2HieraDetConfig(
        hidden_size=16, num_attention_heads=1, image_size=[256, 256], blocks_per_stage=[1, 1, 2, 1],
        embed_dim_per_stage=[16, 32, 64, 128], num_attention_heads_per_stage=[1, 1, 2, 2],
        window_size_per_stage=[8, 4, 14, 7], global_attention_blocks=[3], num_query_pool_stages=3)
    model = transformers.Sam2HieraDetModel(config).eval()
    with pytest.warns(UserWarning, match="the export holds for image"):
        result = check_export(model, (), {"pixel_values": {0: "batch", 2: "image", 3: "image"}},
                              kwargs={"pixel_values": torch.randn(2, 3, 256, 256)}, values=[],
                              sizes=[{"batch": 1, "image": 192}, {"batch": 3, "image": 352}])
    assert {g.python for g in result.constraints} >= {"image >= 29"}
