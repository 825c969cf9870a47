"""A range torch.export reads from the strides of a map that is 1 x 1 at the example, bounded on both sides
(``capture.steps.LargerExampleForNarrowedRange``, ``ProbeAdoptedInEager``, ``verify.unneeded_constraints``).

A vision transformer's tokens, put back on their grid (channels last in memory), go through two stride-2
convolutions, which take an image of 16 (a grid of 4 patches) to a 1 x 1 map. torch.export's fake
convolution asks whether each output is dense in its input's memory format, where a side of 1 has a stride
that does not matter, and keeps the answers: the trace holds for ``image >= 12 and image <= 19`` only (grids
of 3 and 4; transformers' Step3p7 vision tower: ``42 <= image <= 69``) and computes a 1 x 1 map there. Eager
PyTorch runs on both sides of that range: the model is traced at twice the example, taken where it excludes
neither the example nor sizes above it (Step3p7's tower: ``tests/models/test_hf_square_images.py``), and the
range is run in eager PyTorch beside both of its ends (the smallest sizes it excludes are too small for the
patch convolution), then compared in onnxruntime there: lifted where they match, stated where they do not."""

import torch

import onnxport
from exportcheck import check_export


class ConvStack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.patches = torch.nn.Conv2d(3, 8, 4, 4)
        self.mix = torch.nn.Linear(8, 8)
        self.down1 = torch.nn.Conv2d(8, 16, 3, 2, 1)
        self.down2 = torch.nn.Conv2d(16, 32, 3, 2, 1)

    def forward(self, x):
        b, _, h, w = x.shape
        tokens = self.mix(self.patches(x).flatten(2).transpose(1, 2))  # a vision transformer's tokens
        grid = tokens.permute(0, 2, 1).view(b, 8, h // 4, w // 4)  # its map again: channels last in memory
        return self.down2(self.down1(grid)).flatten(2).permute(0, 2, 1)


DYNAMIC = {"x": {0: "batch", 2: "image", 3: "image"}}


def test_a_range_around_a_1_by_1_map_that_the_trace_needs_is_stated_with_where_eager_runs():
    # at 16 the trace computes a 1 x 1 map at grids 3 and 4 (12..19) and reads it as such; traced at 32, it
    # holds from 20 up, which the example breaks: the first capture is kept, and its range tried beside
    # both ends, where eager PyTorch runs (11 and 20): the ONNX model differs at 20, so it stays, saying so
    r = onnxport.to_onnx(ConvStack(), (torch.randn(2, 3, 16, 16),), dynamic_shapes=DYNAMIC)
    [guard] = [g for g in r.captured.guards if g.adopted]
    assert guard.text == "image >= 12 and image <= 19"
    assert "eager PyTorch runs at image=11; image=20" in guard.note
    assert "where the ONNX model traced under it differs" in guard.note
    assert r.validate(sizes=[{"batch": 1, "image": 12}, {"batch": 3, "image": 19}]).ok


def test_an_example_beside_the_range_exports_below_its_bound():
    # at 32 (grid 8, a 2 x 2 map) torch reads the lower side: image >= 20, where eager PyTorch runs at 19
    r = check_export(ConvStack(), (torch.randn(2, 3, 32, 32),), DYNAMIC, values=[],
                     sizes=[{"batch": 3, "image": 64}, {"batch": 2, "image": 19}, {"batch": 1, "image": 41}])
    assert not any(g.adopted and not g.holds({"image": 19}) for g in r.captured.guards), r.constraints
