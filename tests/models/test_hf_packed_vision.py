"""transformers' packed vision towers (Qwen2-VL's, Qwen2.5-VL's and GLM-Image's; tiny configs, seeded,
weights spread): every image of a call packed into one sequence of patches, ``grid_thw`` giving each
image's frames, rows and columns. The per-image attention (``torch.split`` over ``lengths.tolist()``) is
captured as one block-diagonal masked attention (``onnxport.library.transformers.packed_vision_attention``),
the per-image position loop as per-token arithmetic (``packed_vision_positions``) and Qwen2.5-VL's
window order as an argsort (``packed_vision_windows``), so the number of patches and of images stay
dynamic: the ONNX model matches eager PyTorch on other numbers, sizes and frame counts of images."""

import pytest
import torch

from exportcheck import check_export
from hf_recurrent import spread

transformers = pytest.importorskip("transformers")


class Tower(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, patches, grid_thw):
        out = self.model(patches, grid_thw)
        return out.last_hidden_state, out.pooler_output


def _patches(grids, width, seed):
    """Patches of the images of ``grids`` (``[[t, h, w], ...]``) and their ``grid_thw``."""
    g = torch.Generator().manual_seed(seed)
    count = sum(t * h * w for t, h, w in grids)
    return torch.randn(count, width, generator=g), torch.tensor(grids)


OTHERS = [[[1, 2, 2]], [[2, 4, 2], [1, 6, 4], [1, 2, 2]], [[1, 8, 8]], [[3, 2, 6], [1, 4, 4]]]
IMAGES = [[[1, 2, 2]], [[1, 4, 2], [1, 6, 4], [1, 2, 2]], [[1, 8, 8]], [[1, 2, 6], [1, 4, 4]]]  # GLM-Image: one frame


def test_qwen2_vl_vision_tower_keeps_patches_and_images_dynamic():
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

    torch.manual_seed(0)
    config = Qwen2VLVisionConfig(depth=2, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=2,
                                 temporal_patch_size=2, spatial_merge_size=2, in_channels=3)
    model = Tower(spread(Qwen2VisionTransformerPretrainedModel(config)))
    width = 3 * 2 * 2 * 2
    check_export(model, _patches([[1, 4, 4], [2, 2, 4]], width, 0),
                 {"patches": {0: "patches"}, "grid_thw": {0: "images"}},
                 inputs=[_patches(grids, width, i + 1) for i, grids in enumerate(OTHERS)], sizes=[], values=[],
                 expect_inputs={"grid_thw": ["images", 3]})


def test_glm_image_vision_tower_keeps_patches_and_images_dynamic():
    from transformers.models.glm_image.configuration_glm_image import GlmImageVisionConfig
    from transformers.models.glm_image.modeling_glm_image import GlmImageVisionModel

    torch.manual_seed(0)
    config = GlmImageVisionConfig(depth=2, hidden_size=32, num_heads=2, intermediate_size=64, patch_size=2,
                                  image_size=32, spatial_merge_size=1, in_channels=3)
    model = Tower(spread(GlmImageVisionModel(config)))
    width = 3 * 2 * 2
    check_export(model, _patches([[1, 4, 4], [1, 2, 4]], width, 0),
                 {"patches": {0: "patches"}, "grid_thw": {0: "images"}},
                 inputs=[_patches(grids, width, i + 1) for i, grids in enumerate(IMAGES)], sizes=[], values=[],
                 expect_inputs={"grid_thw": ["images", 3]})


def test_qwen2_5_vl_vision_tower_windows_keep_patches_and_images_dynamic():
    # window attention in every block but the last (fullatt_block_indexes): the patches in window order
    # (packed_vision_windows), the windows as the pieces of the block-diagonal mask
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

    torch.manual_seed(0)
    config = Qwen2_5_VLVisionConfig(depth=2, hidden_size=32, out_hidden_size=32, num_heads=2, intermediate_size=64,
                                    patch_size=2, temporal_patch_size=2, spatial_merge_size=2, window_size=8,
                                    fullatt_block_indexes=[1], in_channels=3)
    model = Tower(spread(Qwen2_5_VisionTransformerPretrainedModel(config)))
    width = 3 * 2 * 2 * 2
    others = OTHERS + [[[1, 12, 8], [2, 4, 10]]]  # several windows a side, and a partial one
    check_export(model, _patches([[1, 8, 12], [2, 4, 4]], width, 0),
                 {"patches": {0: "patches"}, "grid_thw": {0: "images"}},
                 inputs=[_patches(grids, width, i + 1) for i, grids in enumerate(others)], sizes=[], values=[],
                 expect_inputs={"grid_thw": ["images", 3]})


@pytest.mark.parametrize("grids", OTHERS + [[[1, 12, 8], [2, 4, 10]], [[2, 6, 6]]])
def test_per_token_positions_and_window_order_match_transformers_loops(grids):
    # the forms the patches trace, against transformers' own loops in eager (also the frame column,
    # include_temporal, which no tower above reads)
    from transformers import vision_utils

    from onnxport.library.transformers.packed_vision_positions import positions_per_token
    from onnxport.library.transformers.packed_vision_windows import windows_per_token

    grid = torch.tensor(grids)
    for temporal in (False, True):
        expected = vision_utils.get_vision_position_ids(grid, 2, include_temporal=temporal)
        assert torch.equal(positions_per_token(grid, 2, temporal), expected)
    index, cu = vision_utils.get_vision_window_index(grid, 2, 8, 2)
    got_index, got_cu = windows_per_token(grid, 2, 8, 2)
    assert torch.equal(got_index, index)
    assert got_cu[0] == 0 and torch.equal(got_cu[got_cu > 0], cu[cu > 0])  # 0 where no window ends


class Hidden(torch.nn.Module):
    """A vision tower's ``last_hidden_state`` (its pooled output is a Python list of images where it has one)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, patches, grid_thw):
        return self.model(patches, grid_thw).last_hidden_state


ONE_IMAGE = [[[1, 2, 6]], [[1, 6, 4]], [[1, 8, 2]], [[1, 2, 2]]]  # one image of other rows and columns


def test_hunyuan_vl_attention_passing_kwargs_is_one_masked_attention():
    # HunYuanVL's per-piece call gives no attention_mask of its own, only **kwargs: the block mask is
    # given where kwargs carry none. Its merger loops over grid_thw's rows: one image, any rows and columns.
    # Its position grid is resized to each image's (bilinear): 24 rows, a multiple of every size tried, so
    # that no sample falls between two float32 positions (where eager and onnxruntime may round apart).
    from transformers.models.hunyuan_vl.configuration_hunyuan_vl import HunYuanVLVisionConfig
    from transformers.models.hunyuan_vl.modeling_hunyuan_vl import HunYuanVLVisionTransformer

    torch.manual_seed(0)
    config = HunYuanVLVisionConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=2,
                                   out_hidden_size=32, patch_size=2, spatial_merge_size=2, text_hidden_size=32,
                                   num_channels=3, max_image_size=48)  # a 24 x 24 position grid
    model = Tower(spread(HunYuanVLVisionTransformer(config).eval()))
    width = 3 * 2 * 2
    check_export(model, _patches([[1, 4, 4]], width, 0), {"patches": {0: "patches"}},
                 inputs=[_patches(grids, width, i + 1) for i, grids in enumerate(ONE_IMAGE)], sizes=[], values=[])


@pytest.mark.parametrize("family", ["lfm3_vl", "ovis2_5"])
def test_attention_loop_collecting_weights_is_one_masked_attention(family):
    # LFM3-VL's and Ovis2.5's per-piece loop also collects each piece's attention weights: under SDPA
    # there are none, and one masked attention stands for the loop
    if family == "lfm3_vl":
        from transformers.models.lfm3_vl.configuration_lfm3_vl import Lfm3VlVisionConfig as Config
        from transformers.models.lfm3_vl.modeling_lfm3_vl import Lfm3VlVisionModel as Model

        config = Config(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1,
                        num_hidden_layers=2, layer_types=["conv", "full_attention"], patch_size=2,
                        temporal_patch_size=2, spatial_merge_size=2)
        width = 3 * 2 * 2 * 2
    else:
        from transformers.models.ovis2_5.configuration_ovis2_5 import Ovis2_5VisionConfig as Config
        from transformers.models.ovis2_5.modeling_ovis2_5 import Ovis2_5VisionModel as Model

        config = Config(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=2,
                        patch_size=2, spatial_merge_size=2, image_size=16, window_size=8)
        width = 3 * 2 * 2
    torch.manual_seed(0)
    model = Hidden(spread(Model(config).eval()))
    check_export(model, _patches([[1, 4, 4]], width, 0), {"patches": {0: "patches"}},
                 inputs=[_patches(grids, width, i + 1) for i, grids in enumerate(ONE_IMAGE)], sizes=[], values=[])
