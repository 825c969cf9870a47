"""Kimi K2.5's vision tower on packed clips (``onnxport.library.transformers.kimi_k25``): frame indices
per token and merge counts as symbolic sizes, so one export runs every grid of the same patch count
(an image of 4 x 4 or 2 x 8 patches, a clip of 2 or 4 frames), each compared with eager PyTorch."""

from __future__ import annotations

import pytest
import torch

from exportcheck import check_export
from onnxport.library.transformers.kimi_k25 import frames_per_token

transformers = pytest.importorskip("transformers")
kimi = pytest.importorskip("transformers.models.kimi_k25.modeling_kimi_k25")

GRIDS = [[[1, 4, 4]], [[1, 2, 8]], [[2, 2, 4]], [[4, 2, 2]]]


@pytest.mark.parametrize("grid", [[[1, 2, 3], [3, 2, 2], [2, 1, 4]], [[4, 2, 2]], [[1, 4, 4], [1, 2, 2]]])
def test_frames_per_token_are_transformers(grid):
    grid = torch.tensor(grid)
    assert torch.equal(frames_per_token(grid), kimi.get_vision_frame_index(grid))


def test_the_tower_at_every_grid_of_its_patches():
    config = kimi.Kimi_K25VisionConfig(
        patch_size=14, pos_emb_height=8, pos_emb_width=8, pos_emb_time=4, num_attention_heads=2,
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, merge_kernel_size=[2, 2])
    torch.manual_seed(0)
    model = kimi.Kimi_K25VisionModel(config).eval()
    pixels = torch.randn(16, 3, 14, 14)
    inputs = [(torch.randn(16, 3, 14, 14), torch.tensor(g)) for g in GRIDS]
    check_export(model, (pixels, torch.tensor(GRIDS[0])), inputs=inputs, values=[], min_sets=4)
