"""torchvision's detectors with seeded weights that spread their scores, for export tests and benchmarks.

Random weights as torchvision initializes them give detectors whose scores hardly differ: the heads
start at a standard deviation of 0.01 (and a prior bias), BatchNorm at its initial statistics, so
many candidates score the same and non-maximum suppression has nothing to decide; the order of
equal scores is then arbitrary. Here every BatchNorm layer takes the statistics of example images
(one forward pass with the layers in training mode and ``momentum=None``: the batch's mean and
variance exactly) and random affine parameters; the convolutions of the heads' towers start at He's
initialization; the layers computing score logits are drawn at random and scaled so that their
logits spread by a chosen standard deviation on the example, around random biases. The box
regression layers keep torchvision's small weights (large deltas would send the boxes to the
image's border, where they coincide). Images are small (``min_size`` / ``max_size`` of torchvision's
transform) and at most 20 detections are kept per image (the top scores, far above the score
thresholds, so that no detection hangs on float32 rounding at a threshold).

Each detector is wrapped in ``FirstImage``: ``images (1, 3, H, W)`` -> ``(boxes [K, 4], scores [K],
labels [K] int64[, masks [K, 1, H', W'] | keypoints [K, P, 3]])`` of the first image, ``K`` the
number of detections. Nothing is downloaded: ``weights=None, weights_backbone=None``.
"""

from __future__ import annotations

import torch
from torch import nn

from third_party import import_torchvision

NUM_CLASSES = 5


class FirstImage(nn.Module):
    """A torchvision detector on a batch of one image, returning a tuple of its first image's outputs."""

    def __init__(self, detector: nn.Module, extra: tuple[str, ...] = ()):
        super().__init__()
        self.detector, self.extra = detector, extra

    def forward(self, images: torch.Tensor):
        out = self.detector([images[0]])[0]
        return (out["boxes"], out["scores"], out["labels"]) + tuple(out[k] for k in self.extra)


def image(height: int, width: int, seed: int) -> torch.Tensor:
    """A (1, 3, height, width) image in [0, 1]: smooth random blobs over noise, so that regions differ."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, max(height // 8, 2), max(width // 8, 2), generator=g)
    smooth = nn.functional.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
    return (0.7 * smooth + 0.3 * torch.rand(1, 3, height, width, generator=g)).clamp(0, 1)


_SCORING = ("cls_logits", "cls_score", "bbox_ctrness", "mask_fcn_logits", "kps_score_lowres")


def _scoring_layers(detector: nn.Module) -> list[nn.Module]:
    """The layers whose outputs are the logits of scores: torchvision's names for them, and the last
    convolution of each of SSD's classification blocks."""
    out = [m for name, m in detector.named_modules() if name.rsplit(".", 1)[-1] in _SCORING]
    for name, m in detector.named_modules():
        if name.endswith("classification_head.module_list"):
            for block in m:
                convs = [c for c in block.modules() if isinstance(c, nn.Conv2d)]
                out.append(convs[-1])
    return out


@torch.no_grad()
def spread_scores(detector: nn.Module, example: torch.Tensor, seed: int, spread: float = 2.0,
                  offset: float = -1.5) -> nn.Module:
    """``detector`` (in eval mode) with BatchNorm calibrated on ``example`` (the statistics of a batch
    of four: ``example`` and three other images of its size; a batch of one leaves a 1x1 feature map
    of SSD's extra layers without variance) and random affine parameters; the convolutions of the heads' towers at He's initialization; then the layers computing
    score logits drawn at random and scaled so that, on ``example``, their logits spread (at the level where they spread most) with a
    standard deviation of ``spread`` around biases ``offset + 0.5 * N(0, 1)`` per channel."""
    gen = torch.Generator().manual_seed(seed)
    detector.eval()
    batch = [example[0]] + [image(*example.shape[-2:], seed=seed + i)[0] for i in range(1, 4)]
    norms = [m for m in detector.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
        m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=gen))
        m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=gen))
        m.train()
    detector(batch)
    for m in norms:
        m.eval()
    for name, m in detector.named_modules():  # RetinaNet's towers (no normalization) start at std 0.01
        if isinstance(m, nn.Conv2d) and (".conv." in name or name.endswith(".conv")) and "_head" in name:
            m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * (2 / m.weight[0].numel()) ** 0.5)
    layers = _scoring_layers(detector)
    spreads: dict[nn.Module, list] = {m: [] for m in layers}
    hooks = [m.register_forward_hook(lambda m, i, o: spreads[m].append((o - m.bias.view(1, -1, *[1] * (o.dim() - 2))).std()))
             for m in layers]
    for m in layers:
        m.weight.copy_(torch.randn(m.weight.shape, generator=gen))
        m.bias.copy_(offset + 0.5 * torch.randn(m.bias.shape, generator=gen))
    try:
        detector([example[0]])
    finally:
        for h in hooks:
            h.remove()
    for m in layers:
        if spreads[m]:
            m.weight.mul_(spread / max(float(torch.stack(spreads[m]).max()), 1e-6))
    return detector


def _detection():
    torchvision = import_torchvision()
    if torchvision is None:
        raise ImportError("torchvision is not installed")
    return torchvision.models.detection


def _resnet18_fpn(returned_layers=(1, 2, 3, 4), extra_blocks=None):
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

    kwargs = {"extra_blocks": extra_blocks} if extra_blocks is not None else {}
    return resnet_fpn_backbone(backbone_name="resnet18", weights=None, norm_layer=nn.BatchNorm2d,
                               trainable_layers=5, returned_layers=list(returned_layers), **kwargs)


SMALL = {"min_size": 128, "max_size": 192}
RCNN = {**SMALL, "rpn_pre_nms_top_n_test": 200, "rpn_post_nms_top_n_test": 50, "box_score_thresh": 0.2,
        "box_detections_per_img": 20}


def fasterrcnn_resnet18_fpn() -> nn.Module:
    """Faster R-CNN (torchvision's class) on a resnet18 FPN backbone."""
    d = _detection()
    return d.FasterRCNN(_resnet18_fpn(), num_classes=NUM_CLASSES, **RCNN)


def fasterrcnn_mobilenet_v3_large_320_fpn() -> nn.Module:
    d = _detection()
    return d.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=NUM_CLASSES,
                                                   **RCNN)


def maskrcnn_resnet18_fpn() -> nn.Module:
    """Mask R-CNN (torchvision's class) on a resnet18 FPN backbone; masks pasted into the image."""
    d = _detection()
    return d.MaskRCNN(_resnet18_fpn(), num_classes=NUM_CLASSES, **RCNN)


def keypointrcnn_resnet18_fpn() -> nn.Module:
    """Keypoint R-CNN (torchvision's class) on a resnet18 FPN backbone, 5 keypoints."""
    d = _detection()
    return d.KeypointRCNN(_resnet18_fpn(), num_classes=2, num_keypoints=5, **RCNN)


def _last_level_p6p7(in_channels: int):
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7

    return LastLevelP6P7(in_channels, 256)


# the short side resized to 160: P7, the smallest level of RetinaNet and FCOS, is then at least 2x2
# (at 128 it is one row or column on the short side; tests/models/test_detection_models.py exports that too)
DENSE = {"min_size": 160, "max_size": 240, "score_thresh": 0.3, "topk_candidates": 100, "detections_per_img": 20}


def retinanet_resnet18_fpn(**options) -> nn.Module:
    """RetinaNet (torchvision's class) on a resnet18 FPN backbone with P6, P7 (as retinanet_resnet50_fpn);
    ``options`` override ``DENSE``."""
    d = _detection()
    backbone = _resnet18_fpn((2, 3, 4), _last_level_p6p7(256))
    return d.RetinaNet(backbone, num_classes=NUM_CLASSES, **{**DENSE, **options})


def fcos_resnet18_fpn() -> nn.Module:
    """FCOS (torchvision's class) on a resnet18 FPN backbone with P6, P7 (as fcos_resnet50_fpn)."""
    d = _detection()
    backbone = _resnet18_fpn((2, 3, 4), _last_level_p6p7(256))
    return d.FCOS(backbone, num_classes=NUM_CLASSES, **DENSE)


def ssdlite320_mobilenet_v3_large() -> nn.Module:
    """torchvision's ssdlite320_mobilenet_v3_large (its transform resizes every image to 320x320)."""
    d = _detection()
    model = d.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=NUM_CLASSES)
    model.score_thresh, model.topk_candidates, model.detections_per_img = 0.3, 100, 20
    return model


# name -> (builder, the outputs after boxes, scores and labels, the spread of the score logits): SSD
# (a softmax over few classes) and
# the one-stage detectors score thousands of candidates, whose top ones crowd near 1 (and
# differ by less than float32 resolves) unless the logits spread less
DETECTORS = {
    "ssdlite320_mobilenet_v3_large": (ssdlite320_mobilenet_v3_large, (), 0.5),
    "fasterrcnn_mobilenet_v3_large_320_fpn": (fasterrcnn_mobilenet_v3_large_320_fpn, (), 2.0),
    "fasterrcnn_resnet18_fpn": (fasterrcnn_resnet18_fpn, (), 2.0),
    "retinanet_resnet18_fpn": (retinanet_resnet18_fpn, (), 0.7),
    "fcos_resnet18_fpn": (fcos_resnet18_fpn, (), 1.0),
    "maskrcnn_resnet18_fpn": (maskrcnn_resnet18_fpn, ("masks",), 2.0),
    "keypointrcnn_resnet18_fpn": (keypointrcnn_resnet18_fpn, ("keypoints",), 2.0),
}


def detector(name: str, example: torch.Tensor, seed: int = 0, **options) -> FirstImage:
    """``DETECTORS[name]`` (built with ``options``) with seeded weights spread on ``example``, wrapped
    in ``FirstImage``."""
    build, extra, spread = DETECTORS[name]
    torch.manual_seed(seed)
    return FirstImage(spread_scores(build(**options), example, seed, spread), extra).eval()
