"""grid_sample and affine_grid with dynamic sizes (tests ops/sampling.py)."""

import pytest
import torch
import torch.nn.functional as F

import onnxport
from exportcheck import check_export


class Warp(torch.nn.Module):
    def __init__(self, mode="bilinear", padding_mode="zeros", align_corners=False):
        super().__init__()
        self.kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)

    def forward(self, x, theta):
        size = [x.shape[0], x.shape[1], *x.shape[2:]]
        grid = F.affine_grid(theta, size, align_corners=self.kw["align_corners"])
        return F.grid_sample(x, grid, **self.kw), grid


DYN = {"x": {0: "n", 2: "h", 3: "w"}, "theta": {0: "n"}}


@pytest.mark.slow
@pytest.mark.parametrize("mode,padding_mode,align_corners", [
    ("bilinear", "zeros", False), ("bilinear", "border", True), ("nearest", "reflection", False),
    ("bicubic", "zeros", True), ("bicubic", "reflection", False)])
def test_affine_warp_with_dynamic_sizes(mode, padding_mode, align_corners):
    check_export(Warp(mode, padding_mode, align_corners), (torch.randn(2, 3, 6, 7), torch.randn(2, 2, 3)), DYN)


def test_warp_at_opset_18():
    check_export(Warp("bilinear", "border", True), (torch.randn(2, 3, 6, 7), torch.randn(2, 2, 3)), DYN, opset=18)


@pytest.mark.slow
def test_grid_sample_of_a_given_grid_at_opset_18():
    class M(torch.nn.Module):
        def forward(self, x, grid):
            return F.grid_sample(x, grid, mode="bicubic", align_corners=False)

    check_export(M(), (torch.randn(2, 3, 6, 7), torch.rand(2, 4, 5, 2) * 2.4 - 1.2),
                 {"x": {0: "n", 2: "h", 3: "w"}, "grid": {0: "n", 1: "gh", 2: "gw"}}, opset=18)


def test_volumetric_warp():
    check_export(Warp("bilinear", "border"), (torch.randn(2, 2, 4, 5, 6), torch.randn(2, 3, 4)),
                 {"x": {0: "n", 2: "d", 3: "h", 4: "w"}, "theta": {0: "n"}})


def test_volumetric_grid_sample_below_opset_20_is_refused():
    with pytest.raises(onnxport.UnsupportedOpError, match="opset 20"):
        onnxport.to_onnx(Warp(), (torch.randn(2, 2, 4, 5, 6), torch.randn(2, 3, 4)), opset=19)
