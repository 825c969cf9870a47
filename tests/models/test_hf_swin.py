"""transformers' Swin family (Swin, Swin v2, DonutSwin, MaskFormer's Swin; tiny configs, seeded, weights
spread) with dynamic batch, height and width: the image padded to whole patches, each feature map to
whole windows and to an even size before patch merging, and cut back where it was padded, all at
every size (onnxport's rewrite of those branches); Swin's and DonutSwin's layers clamp their window to
the feature map per call (``onnxport.library.transformers.swin``). Each matches eager PyTorch at sizes
that need padding and sizes that do not. Swin and DonutSwin state the model's own minimum (a feature
map at least one window at every stage: eager fails below), and at a last stage of exactly one window
their shifted layer does not shift, as eager's."""

import copy

import pytest
import torch

from exportcheck import check_export
from hf_recurrent import spread

transformers = pytest.importorskip("transformers")

DIMS = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
# no padding (the example, 64x64: feature maps 16 and 8); padded windows (96x80); padded patches,
# windows and merges (61x90, 72x100)
SIZES = [{"batch": 1, "height": 96, "width": 80}, {"batch": 1, "height": 61, "width": 90},
         {"batch": 3, "height": 72, "width": 100}]
# the last stage 4x5: one window high (Swin's and DonutSwin's shifted layer does not shift there). Last:
# transformers' layer keeps the shift 0 it sets there for every later call in eager PyTorch
ONE_WINDOW = {"batch": 1, "height": 28, "width": 40}


class Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        out = self.model(pixel_values=pixel_values)
        return out.last_hidden_state, out.pooler_output


def _model(kind: str) -> torch.nn.Module:
    # window 4 over patches of 4: a stage's map of side s pads to whole windows where s % 4 != 0;
    # depths [1, 2]: the last stage holds a shifted layer (shift 2)
    config = dict(image_size=64, patch_size=4, window_size=4, depths=[1, 2], num_heads=[1, 2], embed_dim=16)
    torch.manual_seed(0)
    model = {"swin": lambda: transformers.SwinModel(transformers.SwinConfig(**config)),
             "swinv2": lambda: transformers.Swinv2Model(transformers.Swinv2Config(**config)),
             "donut-swin": lambda: transformers.DonutSwinModel(transformers.DonutSwinConfig(**config)),
             "maskformer-swin": lambda: transformers.MaskFormerSwinModel(transformers.MaskFormerSwinConfig(**config)),
             }[kind]()
    return Encoder(spread(model))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["swin", "donut-swin"])
def test_swin_clamping_its_window_exports_with_dynamic_image_size(kind):
    model = _model(kind)
    with pytest.raises(RuntimeError):  # a last stage of 3x8 (below one window): eager's own refusal
        copy.deepcopy(model)(torch.randn(1, 3, 24, 64))
    with pytest.warns(UserWarning, match="onnxport adopted this constraint"):
        r = check_export(model, (torch.randn(2, 3, 64, 64),), DIMS, sizes=SIZES + [ONE_WINDOW], values=[],
                         expect_inputs={"pixel_values": ["batch", 3, "height", "width"]})
    adopted = [g for g in r.guards if g.adopted]
    assert all(g.holds(s) for g in adopted for s in SIZES + [ONE_WINDOW, {"height": 25, "width": 25}])
    assert any(not g.holds({"height": 24, "width": 64}) for g in adopted)
    assert any(not g.holds({"height": 64, "width": 24}) for g in adopted)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["swinv2", "maskformer-swin"])
def test_swin_with_a_fixed_window_exports_with_dynamic_image_size(kind):
    r = check_export(_model(kind), (torch.randn(2, 3, 64, 64),), DIMS, sizes=SIZES + [ONE_WINDOW], values=[],
                     expect_inputs={"pixel_values": ["batch", 3, "height", "width"]})
    assert not r.constraints
