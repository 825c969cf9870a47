"""transformers' detectors exported with dynamic sizes, against eager PyTorch on images of other sizes.

RT-DETR and RT-DETRv2 (transformers' classes, tiny configurations of ``detectors.py``, the ResNet backbone
built from its config) with a dynamic batch, height and width: the logits and boxes of every query match
eager on a batch of one smaller image and a batch of three larger portrait ones. The encoder's scores choose
the queries by ``topk``: they are spread so that the choice is decided by the model, not by ties (checked
first). The model's own feature pyramid concatenates the stride-32 map upsampled twice with the stride-16
map, which holds only where both have the same size (height and width % 32 in 0 or 25..31 with this
backbone): onnxport adopts exactly that range, stated with the line that needs it, and nothing narrower.

DETR with transformers' own post-processing in the forward (``post_process_object_detection``: softmax,
no-object dropped, ``scores > threshold``, boxes to corners scaled to the image): the number of detections
is data-dependent, the named output dim ``num_detections``; it differs between the images, and the
scores, labels and boxes match eager, an image with no detection included.
"""

from __future__ import annotations

import pytest
import torch

from exportcheck import check_export

pytest.importorskip("transformers")

from detectors import DetrDetections, detr, encoder_scores, image, rt_detr  # noqa: E402

QUERIES, CLASSES = 20, 5


def _check_query_selection(model, x: torch.Tensor) -> None:
    """RT-DETR's encoder scores on ``x``: the top ``QUERIES + 1`` of each image apart by more than float32
    noise, so that ``topk`` chooses and orders the queries the same in any correct implementation."""
    top = encoder_scores(model, x).topk(QUERIES + 1, dim=1).values
    gaps = top[:, :-1] - top[:, 1:]
    assert float(gaps.min()) > 1e-5 * float(top.abs().max()), f"encoder scores too close: {top.tolist()}"


def _rt_detr_eager_runs(model, height: int, width: int) -> bool:
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, height, width))
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize("version", [1, 2], ids=["rt_detr", "rt_detr_v2"])
def test_rt_detr_matches_eager_with_dynamic_batch_height_and_width(version):
    example = torch.cat([image(96, 128, 0), image(96, 128, 5)])
    model = rt_detr(version, example[:1])
    others = [image(64, 64, 1), torch.cat([image(160, 96, seed) for seed in (2, 3, 4)])]
    for x in (example, *others):
        _check_query_selection(model, x)
    logits = model(example)[0].detach()
    assert float(logits.std()) > 1.0  # class logits spread, not all alike
    result = check_export(model, (example,), {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                          inputs=[(x,) for x in others], sizes=[], values=[], output_names=["logits", "pred_boxes"],
                          expect_inputs={"pixel_values": ["batch", 3, "height", "width"]},
                          expect_outputs={"logits": ["batch", QUERIES, CLASSES], "pred_boxes": ["batch", QUERIES, 4]})
    # the range is the model's own: the sizes where its feature pyramid's concatenation holds, stated with
    # that line; the position embedding and the anchors (computed from the feature map sizes) narrow nothing
    assert result.constraints, "the model needs its feature maps to fit: the range must be stated"
    for c in result.constraints:
        assert "torch.concat([top_fpn_feature_map, backbone_feature_map]" in (c.where or ""), c.describe()
    if version == 1:
        for size in range(1, 65):
            holds = all(c.holds({"height": size, "width": 64}) for c in result.constraints)
            assert holds == _rt_detr_eager_runs(model, size, 64), f"height {size}: constraints {holds}"


def test_detr_with_post_processing_exports_a_data_dependent_count():
    example = image(96, 128, 0)
    model = DetrDetections(detr(example), threshold=0.5).eval()
    # 10 of the 20 queries above the threshold on the example, 5 and 18 on the others, none on the last
    others = [image(64, 64, 1), image(160, 96, 2), image(128, 96, 3)]
    counts = []
    for x in (example, *others):
        with torch.no_grad():
            logits = model.detector(pixel_values=x).logits
        scores = logits.softmax(-1)[0, :, :-1].max(-1).values
        assert float((scores - model.threshold).abs().min()) > 1e-3, "a score at the threshold"
        assert float((scores.sort().values.diff()).min()) > 1e-5, "scores too close"
        counts.append(int((scores > model.threshold).sum()))
    assert counts == [10, 5, 18, 0], counts
    result = check_export(model, (example,), {"pixel_values": {2: "height", 3: "width"}},
                          inputs=[(x,) for x in others], sizes=[], values=[],
                          output_names=["scores", "labels", "boxes"],
                          output_dims={name: {0: "num_detections"} for name in ("scores", "labels", "boxes")},
                          expect_outputs={"scores": ["num_detections"], "labels": ["num_detections"],
                                          "boxes": ["num_detections", 4]})
    import onnxruntime as ort

    session = ort.InferenceSession(result.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for x, count in zip((example, *others), counts):
        scores, labels, boxes = session.run(None, {"pixel_values": x.numpy()})
        assert scores.shape == (count,) and labels.shape == (count,) and boxes.shape == (count, 4)


def test_deformable_detr_matches_eager_with_dynamic_batch_height_and_width():
    """Deformable DETR (transformers' ``DeformableDetrModel``, a basic-block ResNet from its config, two
    feature levels, width 32): its feature-map sizes go into ``torch.as_tensor`` and its reference points
    into ``torch.linspace`` to each map's size, both kept dynamic; the decoder's outputs match eager on a
    batch of one smaller image and a batch of three larger portrait ones."""
    model = _deformable_detr()
    example = torch.cat([image(96, 128, 0), image(96, 128, 5)])
    others = [image(64, 64, 1), torch.cat([image(160, 96, seed) for seed in (2, 3, 4)])]
    check_export(model, (example,), {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                 inputs=[(x,) for x in others], sizes=[], values=[])


def test_deformable_detr_from_an_image_whose_smallest_feature_map_is_one_by_one():
    """From a 32 x 32 example the stride-32 feature map is 1 x 1 and torch.export keeps it so, narrowing the
    image range; onnxport traces again at twice the example and adopts no image range: the model matches
    eager on larger images."""
    model = _deformable_detr()
    example = torch.cat([image(32, 32, 0), image(32, 32, 5)])
    larger = torch.cat([image(64, 64, 1), image(64, 64, 2)])
    result = check_export(model, (example,), {"pixel_values": {0: "batch", 2: "image", 3: "image"}},
                          inputs=[(larger,)], sizes=[{"batch": 3, "image": 96}], values=[])
    # no image range; eager itself refuses one 32 x 32 image (a group norm of one value per group), so a
    # batch >= 2 may be adopted there
    assert not [c for c in result.constraints if "image" in c.names], [c.describe() for c in result.constraints]


def _deformable_detr():
    import transformers

    from detectors import _resnet_config

    torch.manual_seed(0)
    config = transformers.DeformableDetrConfig(
        backbone_config=_resnet_config(transformers.ResNetConfig, out_features=["stage3", "stage4"]),
        use_timm_backbone=False, use_pretrained_backbone=False, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=2, decoder_attention_heads=2,
        num_feature_levels=2, encoder_n_points=2, decoder_n_points=2, num_queries=QUERIES)
    return transformers.DeformableDetrModel(config).eval()
