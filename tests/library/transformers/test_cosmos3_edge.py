"""Cosmos 3 Edge's vision tower on packed patches (``onnxport.library.transformers.cosmos3_edge`` and
the packed attention of ``packed_vision_attention``: its pieces' attentions concatenated in one
statement): one export runs every grid of its patch count (two images, one a clip of two frames), each
compared with eager PyTorch."""

from __future__ import annotations

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")
cosmos = pytest.importorskip("transformers.models.cosmos3_edge.modeling_cosmos3_edge")

GRIDS = [[[1, 2, 4], [1, 4, 2]], [[1, 2, 2], [1, 2, 6]], [[1, 4, 2], [1, 2, 4]], [[2, 2, 2], [1, 2, 4]]]


def test_the_tower_at_every_grid_of_its_patches():
    from transformers.models.cosmos3_edge.configuration_cosmos3_edge import Cosmos3EdgeVisionConfig

    config = Cosmos3EdgeVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                     patch_size=4, num_patches=64, spatial_merge_size=2)
    torch.manual_seed(0)
    model = cosmos.Cosmos3EdgeVisionModel(config).eval()
    width = 3 * 4 * 4
    pixels = torch.randn(16, width)
    inputs = [(torch.randn(16, width), torch.tensor(g)) for g in GRIDS]
    check_export(model, (pixels, torch.tensor(GRIDS[0])), inputs=inputs, values=[], min_sets=4)
