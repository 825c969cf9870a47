"""torchvision's and transformers' detectors with seeded weights that spread their scores, for export
tests and benchmarks.

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

transformers' RT-DETR, RT-DETRv2 and DETR come from tiny configurations, their ResNet backbones built
from configs too; their batch normalizations take the statistics of the example (``calibrate_norms``)
and the layers computing the scores that decide (RT-DETR's query selection, the class logits) are
spread (``spread_logits``). ``Predictions`` returns RT-DETR's logits and boxes; ``DetrDetections`` runs
DETR and transformers' own ``post_process_object_detection`` in its forward.
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
def spread_logits(layers: list[nn.Module], run, gen: torch.Generator, spread: float, offset: float) -> None:
    """Draw the weights of ``layers`` (convolutions or linear layers computing logits) at random, their
    biases as ``offset + 0.5 * N(0, 1)`` per channel, then scale the weights so that, in ``run()`` (a
    forward pass on the example), each layer's logits less its bias spread with a standard deviation of
    ``spread`` (at the call where they spread most)."""
    spreads: dict[nn.Module, list] = {m: [] for m in layers}

    def bias(m: nn.Module, o: torch.Tensor) -> torch.Tensor:
        return m.bias if isinstance(m, nn.Linear) else m.bias.view(1, -1, *[1] * (o.dim() - 2))

    hooks = [m.register_forward_hook(lambda m, i, o: spreads[m].append((o - bias(m, o)).std())) for m in layers]
    for m in layers:
        m.weight.copy_(torch.randn(m.weight.shape, generator=gen))
        m.bias.copy_(offset + 0.5 * torch.randn(m.bias.shape, generator=gen))
    try:
        run()
    finally:
        for h in hooks:
            h.remove()
    for m in layers:
        if spreads[m]:
            m.weight.mul_(spread / max(float(torch.stack(spreads[m]).max()), 1e-6))


@torch.no_grad()
def spread_scores(detector: nn.Module, example: torch.Tensor, seed: int, spread: float = 2.0,
                  offset: float = -1.5) -> nn.Module:
    """``detector`` (in eval mode) with BatchNorm calibrated on ``example`` (the statistics of a
    batch of four: ``example`` and three other images of its size; a batch of one leaves a 1x1
    feature map of SSD's extra layers without variance) and random affine parameters; the
    convolutions of the heads' towers at He's initialization; then the layers computing score logits
    drawn at random and scaled so that, on ``example``, their logits spread (at the level where they
    spread most) with a standard deviation of ``spread`` around biases ``offset + 0.5 * N(0, 1)``
    per channel."""
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
    spread_logits(_scoring_layers(detector), lambda: detector([example[0]]), gen, spread, offset)
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


# ------------------------------------------------------------------------------------ transformers' detectors
# tiny configurations, every part built from its config (the ResNet backbones too), nothing downloaded
def _resnet_config(config_class, **kwargs):
    return config_class(layer_type="basic", depths=[1, 1, 1, 1], hidden_sizes=[16, 32, 64, 128], embedding_size=16,
                        **kwargs)


def rt_detr_config(version: int = 1):
    """A tiny ``RTDetrConfig`` (``version=2``: ``RTDetrV2Config``): a basic-block ResNet of 16..128 channels
    from its config (``RTDetrResNetConfig``), feature maps at strides 8, 16, 32, width 32, 20 queries,
    two decoder layers, ``NUM_CLASSES`` classes."""
    import transformers

    config_class = transformers.RTDetrConfig if version == 1 else transformers.RTDetrV2Config
    return config_class(backbone_config=_resnet_config(transformers.RTDetrResNetConfig, out_indices=[2, 3, 4]),
                        encoder_in_channels=[32, 64, 128], encoder_hidden_dim=32, d_model=32, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, decoder_in_channels=[32, 32, 32], encoder_attention_heads=2,
                        decoder_attention_heads=2, num_queries=20, decoder_layers=2, num_labels=NUM_CLASSES)


@torch.no_grad()
def calibrate_norms(model: nn.Module, run, gen: torch.Generator) -> None:
    """Give every batch normalization of ``model`` (``nn.BatchNorm2d`` and transformers' frozen ones: modules
    with ``running_mean`` and ``running_var``) the per-channel mean and variance of its input in ``run()`` (a
    forward pass on the example; each layer sees the outputs of the layers calibrated before it) and random
    affine parameters ``1 + 0.2 N(0, 1)``, ``0.2 N(0, 1)``. At their initial statistics the features of a
    randomly initialized backbone hardly vary across the image, so every position and query would score alike."""
    norms = [m for m in model.modules() if isinstance(getattr(m, "running_mean", None), torch.Tensor)
             and isinstance(getattr(m, "running_var", None), torch.Tensor)]

    def calibrate(m: nn.Module, inputs: tuple) -> None:
        x = inputs[0].transpose(0, 1).flatten(1)
        m.running_mean.copy_(x.mean(1))
        m.running_var.copy_(x.var(1))
        m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=gen))
        m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=gen))

    hooks = [m.register_forward_pre_hook(calibrate) for m in norms]
    try:
        run()
    finally:
        for h in hooks:
            h.remove()


class Predictions(nn.Module):
    """A transformers detector on ``pixel_values (B, 3, H, W)`` -> ``(logits [B, Q, C], pred_boxes [B, Q, 4])``
    (boxes as center x, center y, width, height relative to the image)."""

    def __init__(self, detector: nn.Module):
        super().__init__()
        self.detector = detector

    def forward(self, pixel_values: torch.Tensor):
        out = self.detector(pixel_values=pixel_values)
        return out.logits, out.pred_boxes


def rt_detr(version: int, example: torch.Tensor, seed: int = 0, spread: float = 3.0) -> Predictions:
    """RT-DETR (``version=1``, ``RTDetrForObjectDetection``) or RT-DETRv2 (``RTDetrV2ForObjectDetection``) of
    ``rt_detr_config``, seeded, with the logits of the encoder's query selection and of the decoder's classes
    spread on ``example`` (``spread_logits``): the encoder's scores choose the queries by ``topk``, so ties
    there would make the choice arbitrary."""
    import transformers

    torch.manual_seed(seed)
    build = transformers.RTDetrForObjectDetection if version == 1 else transformers.RTDetrV2ForObjectDetection
    model = build(rt_detr_config(version)).eval()
    gen = torch.Generator().manual_seed(seed)
    calibrate_norms(model, lambda: model(pixel_values=example), gen)
    layers = [model.model.enc_score_head, *model.model.decoder.class_embed]
    spread_logits(layers, lambda: model(pixel_values=example), gen, spread, -1.0)
    return Predictions(model).eval()


def encoder_scores(model: Predictions, x: torch.Tensor) -> torch.Tensor:
    """The scores RT-DETR's encoder ranks its positions by for the query selection (B, positions): the
    largest class logit of ``enc_score_head``."""
    seen = []
    hook = model.detector.model.enc_score_head.register_forward_hook(lambda m, i, o: seen.append(o))
    try:
        with torch.no_grad():
            model(x)
    finally:
        hook.remove()
    return seen[0].max(-1).values


def detr(example: torch.Tensor, seed: int = 0, spread: float = 2.0):
    """A tiny ``DetrForObjectDetection`` (a basic-block ResNet from its ``ResNetConfig``, width 32, one
    encoder and one decoder layer, 20 queries, ``NUM_CLASSES`` classes and no-object), seeded, its linear layers
    drawn with a standard deviation of 0.2 (at DETR's 0.02 every query attends to the image alike); the query
    embeddings drawn from N(0, 1) (their initial values make every query alike) and the class logits
    spread on ``example`` (``spread_logits``)."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.DetrConfig(
        backbone_config=_resnet_config(transformers.ResNetConfig, out_features=["stage4"]), d_model=32,
        encoder_layers=1, decoder_layers=1, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=2,
        decoder_attention_heads=2, num_queries=20, num_labels=NUM_CLASSES, init_std=0.2)
    model = transformers.DetrForObjectDetection(config).eval()
    gen = torch.Generator().manual_seed(seed)
    calibrate_norms(model, lambda: model(pixel_values=example), gen)
    with torch.no_grad():
        model.model.query_position_embeddings.weight.copy_(
            torch.randn(model.model.query_position_embeddings.weight.shape, generator=gen))
    spread_logits([model.class_labels_classifier], lambda: model(pixel_values=example), gen, spread, 0.0)
    return model


class DetrDetections(nn.Module):
    """DETR and transformers' own post-processing (``DetrImageProcessorPil.post_process_object_detection``:
    softmax, the no-object class dropped, ``scores > threshold``, boxes from center/size to corners scaled to
    the image): ``pixel_values (1, 3, H, W)`` -> ``(scores [K], labels [K] int64, boxes [K, 4])`` of the
    ``K`` detections scoring above ``threshold``, boxes as x0, y0, x1, y1 in pixels."""

    def __init__(self, detector: nn.Module, threshold: float):
        super().__init__()
        from transformers.models.detr.image_processing_pil_detr import DetrImageProcessorPil

        self.detector, self.threshold, self.processor = detector, threshold, DetrImageProcessorPil()

    def forward(self, pixel_values: torch.Tensor):
        out = self.detector(pixel_values=pixel_values)
        sizes = torch.tensor([[pixel_values.shape[2], pixel_values.shape[3]]])
        found = self.processor.post_process_object_detection(out, threshold=self.threshold, target_sizes=sizes)[0]
        return found["scores"], found["labels"], found["boxes"]
