"""diffusers' ``UNet2DConditionModel`` (a tiny configuration, seeded random weights) exported with the
latent batch, height, width and the text length dynamic.

Its up blocks make the upsampling contiguous past a batch of 64 (a layout-only side: no guard,
``onnxport/capture/layout_branches.py``), and its ``forward`` reads ``for dim in sample.shape[-2:]: if dim
% default_overall_up_factor != 0: forward_upsample_size = True; break``, which the control-flow rewrite
leaves as Python: adopted on trial at the first capture, the model captured as given. Traced at an even
latent, the upsampling doubles the size, which is the skip's size only where the latent is even
(onnxruntime differs from eager PyTorch at odd sizes, which eager runs). The residue classes where the
height or the width is odd are traced (``onnxport/remainder_sides.py``: both odd first, then, where that
trace does not hold on it, the height even and the width odd, the same graph): they ask the upsampling
for the skip's size, a graph other than the example's, and the two are joined under ONNX If on the sizes'
remainders, no constraint left."""

import re
import time

import pytest
import torch
from torch.export import Dim

import onnxport
from third_party import import_diffusers

diffusers = import_diffusers()

pytestmark = pytest.mark.slow


class Denoiser(torch.nn.Module):
    """The UNet's noise prediction as one tensor."""

    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def forward(self, sample, timestep, encoder_hidden_states):
        return self.unet(sample, timestep, encoder_hidden_states, return_dict=False)[0]


def _tiny_unet():
    torch.manual_seed(0)
    return diffusers.UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, block_out_channels=(32, 64), layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=8).eval()


def test_tiny_conditional_unet_exports_with_every_size_dynamic():
    model = Denoiser(_tiny_unet()).eval()
    args = (torch.randn(2, 4, 32, 32), torch.tensor([10.0, 500.0]), torch.randn(2, 7, 32))
    batch, height, width, text = Dim("batch"), Dim("height"), Dim("width"), Dim("text")
    spec = {"sample": {0: batch, 2: height, 3: width}, "timestep": {0: batch},
            "encoder_hidden_states": {0: batch, 1: text}}
    start = time.perf_counter()
    with pytest.warns(UserWarning, match=r"joined them under ONNX If") as caught:
        result = onnxport.to_onnx(model, args, dynamic_shapes=spec)
    seconds = time.perf_counter() - start
    assert seconds < 240, f"the export took {seconds:.0f} s"
    dims = {i.name: [d if isinstance(d, int) else str(d) for d in i.shape] for i in result.model.graph.inputs}
    assert dims == {"sample": ["batch", 4, "height", "width"], "timestep": ["batch"],
                    "encoder_hidden_states": ["batch", "text", 32]}
    assert not result.constraints
    assert sum(n.op_type == "If" for n in result.model_proto.graph.node) == 1
    assert result.captured.strategy == "non-strict" and not result.rewrite_notes  # no capture failed first
    said = [str(w.message) for w in caught if "joined them under ONNX If" in str(w.message)]
    traced = [dict(re.findall(r"(height|width)=(\d+)", at))
              for at in said[0].split("traced at ")[1].split(", on the residue")[0].split("; ")]
    # the odd classes, the height and the width odd first. Traced there, torch 2.13 holds where the height is
    # odd, so the height even and the width odd is traced too (the same graph); torch 2.15 keeps its
    # `height % 2 != 0` as one of equivalent traces, validated on both sides, so that one trace covers them
    classes = [sorted((k, int(v) % 2) for k, v in t.items()) for t in traced]
    assert classes[0] == [("height", 1), ("width", 1)], said[0]
    assert classes[1:] in ([], [[("height", 0), ("width", 1)]]), said[0]
    assert "2 graphs" in said[0], said[0]
    assert result.example[0][0] is args[0] or torch.equal(result.example[0][0], args[0])  # the user's example
    with torch.no_grad():  # eager PyTorch runs an odd latent
        assert model(torch.randn(1, 4, 33, 40), torch.tensor([3.0]), torch.randn(1, 5, 32)).shape == (1, 4, 33, 40)
    report = result.validate(sizes=[{"batch": 2, "height": 32, "width": 32, "text": 7},
                                    {"batch": 1, "height": 40, "width": 48, "text": 5},
                                    {"batch": 1, "height": 33, "width": 40, "text": 5},
                                    {"batch": 1, "height": 40, "width": 33, "text": 5},
                                    {"batch": 65, "height": 8, "width": 8, "text": 3}], values=[])
    assert report.ok, str(report)
    assert len({c.inputs for c in report.checks}) >= 6
    # the contiguous() past a batch of 64 left no condition on the batch
    assert not [g for g in result.guards if "batch" in g.names and g.status != "proved" and "64" in g.text]
