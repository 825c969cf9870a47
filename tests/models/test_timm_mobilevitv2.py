"""timm's MobileViT v2 (``mobilevitv2_050``, timm's own constructor, seeded random weights) exported
with dynamic batch, height and width: each MobileViT block rounds its feature map up to whole 2x2
patches and resizes it only where the size is not whole patches (``onnxport/library/timm.py``).
Checked against eager PyTorch at the example and at sizes whose feature maps are odd (resized)."""

from __future__ import annotations

import warnings

import pytest
import torch

from exportcheck import check_export
from third_party import import_timm

timm = import_timm()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(timm is None, reason="timm is not installed")]


def test_mobilevitv2_exports_at_every_image_size():
    torch.manual_seed(0)
    model = timm.create_model("mobilevitv2_050", pretrained=False, num_classes=10).eval()
    # 161 and 200: feature maps of 21 and 25 at the first MobileViT block (odd: resized), 40 / 24 below
    sizes = [{"batch": 1, "height": 161, "width": 200}, {"batch": 3, "height": 96, "width": 136}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = check_export(model, (torch.randn(2, 3, 128, 128),), {"x": {0: "batch", 2: "height", 3: "width"}},
                         sizes=sizes, expect_inputs={"x": ["batch", 3, "height", "width"]},
                         expect_outputs={"output": ["batch", 10]})
    assert not r.constraints  # eager PyTorch ran at 161 x 200 too: no size was excluded


def test_the_resize_is_unconditional_in_both_mobilevit_blocks():
    # a timm whose blocks lost the branch this patch reads would leave the forward as it is: say so here
    from onnxport.capture.source_variants import forward_variants
    from onnxport.library.timm import resize_at_every_size

    blocks = [timm.models.mobilevit.MobileVitBlock, timm.models.mobilevit.MobileVitV2Block]
    assert len(forward_variants(blocks, resize_at_every_size)) == 2
