"""timm image models built by timm's own constructors (seeded random weights, nothing downloaded),
exported with dynamic batch, height and width and checked at other sizes: an attention block under
``torch.autocast(enabled=False)`` (EfficientViT), multi-scale aggregation whose sizes must agree
(DLA: torch's constraint solver gives up on them in sympy), a patchify stem (ConvNeXt)."""

from __future__ import annotations

import warnings

import pytest
import torch

from exportcheck import check_export
from third_party import import_timm

timm = import_timm()
pytestmark = pytest.mark.skipif(timm is None, reason="timm is not installed")

DYNAMIC = {"x": {0: "batch", 2: "height", 3: "width"}}


def _export(name, sizes):
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return check_export(model, (torch.randn(2, 3, 64, 64),), DYNAMIC, sizes=sizes,
                            expect_inputs={"x": ["batch", 3, "height", "width"]},
                            expect_outputs={"output": ["batch", 10]})


def test_efficientvit_with_an_autocast_region():
    r = _export("efficientvit_b0", [{"batch": 1, "height": 40, "width": 72}, {"batch": 3, "height": 96, "width": 33}])
    assert torch.ops.higher_order.wrap_with_autocast in {n.target for n in r.program.graph.nodes}
    assert not r.constraints


def test_dla_exports_with_the_sizes_its_aggregation_needs():
    # eager PyTorch itself fails where the levels' sizes disagree (65 x 65): those are the constraints
    r = _export("dla34", [{"batch": 1, "height": 32, "width": 96}, {"batch": 3, "height": 128, "width": 64}])
    assert {"height >= 17", "width >= 17"} <= {str(c) for c in r.constraints}
    model = timm.create_model("dla34", pretrained=False, num_classes=10).eval()
    with pytest.raises(RuntimeError):
        model(torch.randn(1, 3, 65, 65))
    assert not all(c.holds({"batch": 1, "height": 65, "width": 65}) for c in r.constraints)


def test_convnext_with_a_patchify_stem():
    # four stages of 2x2 stride-2 convolutions after the 4x4 patchify stem: eager PyTorch takes 32 and up
    r = _export("convnext_atto", [{"batch": 1, "height": 32, "width": 33}, {"batch": 3, "height": 57, "width": 90}])
    assert [str(c) for c in r.constraints] == ["height >= 32", "width >= 32"]
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=10).eval()
    with pytest.raises(RuntimeError):
        model(torch.randn(1, 3, 31, 64))
