"""transformers' MobileViT (tiny config, seeded, weights spread) with dynamic batch, height and width:
its feature maps cut into 2x2 patches after rounding the sizes up to whole patches (``int(math.ceil
(...))``) and resizing only where they are not whole (a branch on the sizes), captured at every image
size (``onnxport.library.transformers.mobilevit``), and matching eager PyTorch at sizes that are and
are not whole patches. torch.export's specialization of a patch grid of one row or one column (``!= 1`` of a
count) is stated: as constraints that exclude small images only, or as no constraint where onnxruntime
matches eager PyTorch at those small sizes too."""

import pytest
import torch

from exportcheck import check_export
from hf_recurrent import spread

transformers = pytest.importorskip("transformers")


class Classifier(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).logits


def test_mobilevit_exports_with_dynamic_image_size():
    import transformers.models.mobilevit.modeling_mobilevit as mobilevit

    torch.manual_seed(0)
    model = Classifier(spread(transformers.MobileViTForImageClassification(transformers.MobileViTConfig(
        image_size=64, patch_size=2, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
        num_attention_heads=2, num_labels=5))))
    unfolding = mobilevit.MobileViTLayer.unfolding
    # each specialization of a one-row or one-column grid is stated: adopted, or found no constraint after all
    with pytest.warns(UserWarning, match="adopted this constraint|is not a constraint of the export after all"):
        r = check_export(model, (torch.randn(2, 3, 128, 96),), {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                         sizes=[{"batch": 1, "height": 160, "width": 128}, {"batch": 1, "height": 130, "width": 100},
                                {"batch": 3, "height": 97, "width": 131}, {"batch": 1, "height": 256, "width": 256}],
                         values=[], expect_inputs={"pixel_values": ["batch", 3, "height", "width"]})
    adopted = [g for g in r.guards if g.adopted]
    big = [{"height": h, "width": w} for h, w in ((65, 65), (97, 131), (128, 96), (300, 200))]
    assert all(g.holds(s) for g in adopted for s in big)  # only small images are left out
    assert mobilevit.MobileViTLayer.unfolding is unfolding  # restored after capture


def test_mobilevitv2_traced_where_its_last_stage_is_one_patch_keeps_larger_images():
    """MobileViTv2 at image 64: its last stage is one 2x2 patch, where torch decides a memory layout
    on the patch count (``is_contiguous``) and bounds the image to ``<= 96``; traced so, torch reads
    the count as the constant 1 and the model fails at larger images. Capture traces again at a
    larger example: only the model's own minimum (``image >= 33``: eager's ``unfold`` raises below)
    is adopted, and larger images match eager PyTorch."""
    torch.manual_seed(0)
    model = Classifier(spread(transformers.MobileViTV2ForImageClassification(transformers.MobileViTV2Config(
        image_size=64, width_multiplier=0.25, num_labels=5))))
    with pytest.warns(UserWarning, match="onnxport adopted this constraint"):
        r = check_export(model, (torch.randn(2, 3, 64, 64),), {"pixel_values": {0: "batch", 2: "image", 3: "image"}},
                         sizes=[{"batch": 1, "image": 64}, {"batch": 3, "image": 97}, {"batch": 1, "image": 133},
                                {"batch": 2, "image": 256}],
                         values=[], expect_inputs={"pixel_values": ["batch", 3, "image", "image"]})
    adopted = [g for g in r.guards if g.adopted]
    assert [g.text for g in adopted] == ["image >= 33"], adopted
