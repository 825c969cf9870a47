"""The replacements onnxport traces in place of torchvision's detection code
(``onnxport/library/torchvision/detection.py``) compute what torchvision's functions compute, run
eagerly side by side on random inputs: empty inputs, boxes outside the image and degenerate boxes
included. The export of whole detectors is ``tests/models/test_detection_models.py``."""

from __future__ import annotations

import pytest
import torch

from third_party import import_torchvision

torchvision = import_torchvision()
if torchvision is None:
    pytest.skip("torchvision is not installed", allow_module_level=True)

from torchvision.models.detection import roi_heads, transform  # noqa: E402

from onnxport.library.torchvision import detection as ours  # noqa: E402


def _boxes(k: int, height: int, width: int, gen: torch.Generator, spread: float = 40.0) -> torch.Tensor:
    """Boxes clipped to the image, as the detectors give them (torchvision's paste fails on a box
    wholly outside the image); some cut by its border."""
    xy = torch.rand(k, 2, generator=gen) * torch.tensor([width, height]) * 1.1 - 5
    wh = torch.rand(k, 2, generator=gen) * spread + 0.3
    return torchvision.ops.clip_boxes_to_image(torch.cat([xy, xy + wh], 1), (height, width))


@pytest.mark.parametrize("k, height, width", [(7, 50, 61), (0, 20, 20), (30, 96, 128)])
def test_masks_pasted_at_once_as_torchvision_pastes_them(k, height, width):
    gen = torch.Generator().manual_seed(k)
    masks = torch.rand(k, 1, 28, 28, generator=gen)
    boxes = _boxes(k, height, width, gen)
    if k:
        boxes[0] = torch.tensor([10.0, 10.0, 9.4, 30.0])  # narrower than a pixel: nothing pasted
    want = roi_heads.paste_masks_in_image(masks, boxes, (height, width))
    got = ours._paste_masks_in_image(masks, boxes, (height, width))
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("k", [0, 1, 20])
def test_keypoints_found_at_once_as_torchvision_finds_them(k):
    gen = torch.Generator().manual_seed(k)
    maps = torch.nn.functional.avg_pool2d(torch.randn(k, 5, 56, 56, generator=gen), 5, 1, 2)  # smooth peaks
    rois = _boxes(k, 120, 120, gen, spread=90.0)
    want_xy, want_scores = roi_heads.heatmaps_to_keypoints(maps, rois)
    got_xy, got_scores = ours._heatmaps_to_keypoints(maps, rois)
    assert got_xy.shape == want_xy.shape and got_scores.shape == want_scores.shape
    torch.testing.assert_close(got_xy, want_xy, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(got_scores, want_scores, atol=1e-5, rtol=1e-5)


def test_keypoints_resized_as_torchvision_resizes_them():
    keypoints = torch.rand(6, 5, 3, generator=torch.Generator().manual_seed(0)) * 100
    want = transform.resize_keypoints(keypoints, [96, 128], [128, 170])
    torch.testing.assert_close(ours._resize_keypoints(keypoints, [96, 128], [128, 170]), want, atol=0, rtol=0)


@pytest.mark.parametrize("height, width", [(96, 128), (128, 96), (48, 128), (300, 20), (1, 1)])
def test_image_resized_as_torchvision_resizes_it(height, width):
    image = torch.rand(3, height, width, generator=torch.Generator().manual_seed(height))
    want, _ = transform._resize_image_and_masks(image, 128, 192)
    got, _ = ours._resize_image_and_masks(image, 128, 192)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("sizes", [[(3, 128, 170)], [(3, 100, 64), (3, 97, 130)], [(3, 32, 64)]])
def test_images_batched_as_torchvision_batches_them(sizes):
    gen = torch.Generator().manual_seed(len(sizes))
    images = [torch.rand(s, generator=gen) for s in sizes]
    t = transform.GeneralizedRCNNTransform(128, 192, [0.5] * 3, [0.5] * 3)
    want = t.batch_images(images, size_divisible=32)
    torch.testing.assert_close(ours._batch_images(t, images, size_divisible=32), want, atol=0, rtol=0)
