"""torchvision classification models built by torchvision's own constructors (seeded random
weights), exported with dynamic batch, height and width and checked at other sizes."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from exportcheck import check_export
from third_party import VISION_PACKAGES, import_torchvision, torchvision_ops_load

torchvision = import_torchvision()
pytestmark = pytest.mark.skipif(torchvision is None, reason="torchvision is not installed")


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small"])
def test_classifier_with_dynamic_batch_and_image_size(name):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = check_export(model, (torch.randn(2, 3, 64, 64),), {"x": {0: "batch", 2: "height", 3: "width"}},
                         sizes=[{"batch": 1, "height": 40, "width": 57}, {"batch": 3, "height": 97, "width": 64},
                                {"batch": 1, "height": 1, "width": 1}, {"batch": 2, "height": 5, "width": 40},
                                {"batch": 1, "height": 33, "width": 8}],
                         expect_inputs={"x": ["batch", 3, "height", "width"]},
                         expect_outputs={"output": ["batch", 1000]})
    # in-place activations and residual adds translate as they are: the program is not traced again
    assert r.decomposed == {"local": [], "whole_program": []}
    # the conditions torch met choosing strides (after strided convolutions; mobilenet's
    # squeeze-excitation products) constrain no size: every image size PyTorch takes is exported
    assert not r.constraints, [str(c) for c in r.constraints]
    assert any(g.status == "kept" and g.method == "strides or contiguity only" for g in r.guards)


def test_compiled_ops_load_except_beside_the_cpu_build():
    # tests of nms / roi_align skip where these ops do not load: that must be the torch 2.13 set-up only
    # (torchvision outside site-packages), never an environment with a torchvision built for its torch
    beside_the_cpu_build = Path(torchvision.__file__).resolve().is_relative_to(VISION_PACKAGES.resolve())
    assert torchvision_ops_load() is not beside_the_cpu_build
    if not beside_the_cpu_build:
        boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]])
        keep = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
        assert keep.tolist() == [0, 2]
