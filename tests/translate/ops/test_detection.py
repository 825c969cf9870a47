"""torchvision's nms, batched_nms, roi_align and roi_pool against torchvision's own kernels, with a
dynamic number of boxes (the kept count a named output dim) and dynamic image sizes."""

from __future__ import annotations

import pytest
import torch

from exportcheck import check_export
from third_party import require_torchvision_ops

torchvision = require_torchvision_ops()


def _boxes(n: int, size: float = 40.0, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` boxes (x1, y1, x2, y2) in a ``size`` square, many overlapping, and distinct scores."""
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * size
    wh = torch.rand(n, 2, generator=g) * size / 3 + 1
    return torch.cat([xy, xy + wh], 1), torch.randperm(n * 7, generator=g)[:n].float() / (n * 7)


class Nms(torch.nn.Module):
    def __init__(self, iou: float):
        super().__init__()
        self.iou = iou

    def forward(self, boxes, scores):
        return torchvision.ops.nms(boxes, scores, self.iou)


class NmsAfterThreshold(torch.nn.Module):
    def forward(self, boxes, scores):  # the boxes nms sees are a data-dependent count
        keep = scores > 0.3
        boxes, scores = boxes[keep], scores[keep]
        kept = torchvision.ops.nms(boxes, scores, 0.5)
        return boxes[kept], scores[kept]


def _sizes(*counts: int) -> list[dict]:
    return [{"n": c} for c in counts]


@pytest.mark.parametrize("iou", [0.0, 0.3, 0.7])
def test_nms_keeps_the_boxes_torchvision_keeps(iou):
    boxes, scores = _boxes(30)
    extra = [_boxes(n, seed=n) for n in (1, 7, 200)]
    check_export(Nms(iou), (boxes, scores), {"boxes": {0: "n"}, "scores": {0: "n"}},
                 inputs=[(b, s) for b, s in extra], sizes=[], values=[])


def test_nms_after_a_score_threshold():
    boxes, scores = _boxes(40)
    check_export(NmsAfterThreshold(), (boxes, scores), {"boxes": {0: "n"}, "scores": {0: "n"}},
                 inputs=[_boxes(n, seed=n) for n in (3, 90)], sizes=[], values=[])


class RoiAlign(torch.nn.Module):
    def __init__(self, aligned: bool, sampling_ratio: int, scale: float = 0.5):
        super().__init__()
        self.aligned, self.sampling_ratio, self.scale = aligned, sampling_ratio, scale

    def forward(self, x, rois):
        return torchvision.ops.roi_align(x, rois, (3, 4), spatial_scale=self.scale,
                                         sampling_ratio=self.sampling_ratio, aligned=self.aligned)


class RoiPool(torch.nn.Module):
    def forward(self, x, rois):
        return torchvision.ops.roi_pool(x, rois, (3, 2), spatial_scale=0.5)


def _rois(k: int, batch: int, size: float, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(k, 2, generator=g) * size * 0.7
    wh = torch.rand(k, 2, generator=g) * size * 0.5 + 0.2
    index = torch.randint(0, batch, (k, 1), generator=g).float()
    return torch.cat([index, xy, xy + wh], 1)


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("sampling_ratio", [0, 2, -1])
def test_roi_align_matches_torchvision(aligned, sampling_ratio):
    x, rois = torch.randn(2, 3, 16, 20), _rois(5, 2, 32)
    check_export(RoiAlign(aligned, sampling_ratio), (x, rois),
                 {"x": {0: "batch", 2: "height", 3: "width"}, "rois": {0: "k"}},
                 inputs=[(torch.randn(3, 3, 9, 31), _rois(11, 3, 50, seed=1)),
                         (torch.randn(1, 3, 24, 12), _rois(1, 1, 20, seed=2))],
                 sizes=[], expect_outputs={"output": ["k", 3, 3, 4]})


def test_roi_pool_matches_torchvision():
    x, rois = torch.randn(2, 3, 16, 20), _rois(5, 2, 32)
    check_export(RoiPool(), (x, rois), {"x": {0: "batch", 2: "height", 3: "width"}, "rois": {0: "k"}},
                 inputs=[(torch.randn(3, 3, 9, 31), _rois(11, 3, 50, seed=1))], sizes=[])


class BatchedNms(torch.nn.Module):
    def forward(self, boxes, scores, idxs):
        return torchvision.ops.batched_nms(boxes, scores, idxs, 0.5)


class BatchedNmsAfterThreshold(torch.nn.Module):
    def forward(self, boxes, scores, idxs):  # torchvision's branches now see a data-dependent count
        keep = scores > 0.6
        boxes, scores, idxs = boxes[keep], scores[keep], idxs[keep]
        kept = torchvision.ops.boxes.batched_nms(boxes, scores, idxs, 0.4)
        return boxes[kept], scores[kept], idxs[kept]


def _classed(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    boxes, scores = _boxes(n, seed=seed)
    return boxes, scores, torch.randint(0, 4, (n,), generator=torch.Generator().manual_seed(seed + 1))


@pytest.mark.parametrize("model", [BatchedNms(), BatchedNmsAfterThreshold()], ids=["dynamic", "data-dependent"])
def test_batched_nms_at_every_count(model):
    # torchvision loops over the classes above 1000 boxes and returns early on none: the export holds for both
    spec = {0: "n"}
    result = check_export(model, _classed(30), {"boxes": spec, "scores": spec, "idxs": spec},
                          inputs=[_classed(n, seed=n) for n in (0, 1, 2, 1500)], sizes=[], values=[])
    assert not result.constraints, [str(c) for c in result.constraints]
