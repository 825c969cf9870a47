"""torchvision classification models built by torchvision's own constructors (seeded random
weights), exported with dynamic batch, height and width and checked at other sizes."""

from __future__ import annotations

import warnings

import pytest
import torch

from exportcheck import check_export
from third_party import import_torchvision

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
                         expect_inputs={"x": ["batch", 3, "height", "width"]}, expect_outputs={"output": ["batch", 1000]})
    # in-place activations and residual adds translate as they are: the program is not traced again
    assert r.decomposed == {"local": [], "whole_program": []}
    # the conditions torch met choosing strides (after strided convolutions; mobilenet's
    # squeeze-excitation products) constrain no size: every image size PyTorch takes is exported
    assert not r.constraints, [str(c) for c in r.constraints]
    assert any(g.status == "kept" and g.method == "strides or contiguity only" for g in r.guards)
