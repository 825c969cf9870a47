"""torchvision's detectors exported with a dynamic image height and width, against eager PyTorch on
the example image and three others (smaller, portrait, wide): the same number of detections, the same
labels, boxes and scores within the float64-based tolerance of ``validate``. The detection count is
the named output dim ``num_detections``.

The detectors (``detectors.py``) have seeded weights that spread their scores: the scores of each
image's detections differ by more than float32 noise (checked here first), so the order NMS and the
top-k choices give is decided by the model, not by ties.
"""

from __future__ import annotations

import pytest
import torch

from exportcheck import check_export
from third_party import require_torchvision_ops

require_torchvision_ops()

from detectors import DETECTORS, detector, image  # noqa: E402  (after the skip: imports torchvision)

DIMS = {"images": {2: "height", 3: "width"}}
EXAMPLE = (96, 128, 0)  # height, width, seed
# smaller, portrait, and wider than the transform's max_size / min_size (where the resize is bounded by
# max_size, the other side of torchvision's min(...))
OTHERS = [(64, 80, 1), (128, 96, 2), (48, 128, 4)]
COUNT = ["num_detections"]


def _check_spread(model: torch.nn.Module, x: torch.Tensor) -> None:
    """The eager detections of ``x``: several, with scores apart by more than float32 noise."""
    with torch.no_grad():
        scores = model(x)[1]
    assert scores.numel() >= 5, f"only {scores.numel()} detections"
    gaps = scores[:-1] - scores[1:]
    assert float(gaps.min()) > 1e-5 * float(scores.max()), f"scores too close: {scores.tolist()}"


def _outputs(extra: tuple[str, ...]) -> dict[str, list]:
    dims = {"boxes": COUNT + [4], "scores": COUNT, "labels": COUNT}
    if "masks" in extra:
        dims["masks"] = COUNT + [1, "height", "width"]
    if "keypoints" in extra:
        dims["keypoints"] = COUNT + [5, 3]
    return dims


@pytest.mark.parametrize("name", list(DETECTORS))
def test_detector_matches_eager_on_images_of_other_sizes(name):
    example = image(*EXAMPLE)
    model = detector(name, example)
    others = [image(*o) for o in OTHERS]
    for x in (example, *others):
        _check_spread(model, x)
    extra = DETECTORS[name][1]
    check_export(model, (example,), DIMS, inputs=[(x,) for x in others], sizes=[], values=[],
                 output_names=["boxes", "scores", "labels", *extra],
                 output_dims={"boxes": {0: "num_detections"}}, expect_outputs=_outputs(extra))


def test_a_feature_map_one_row_high_in_the_example_keeps_every_image_size():
    """Resized to a short side of 128, the example's P7 is one row high: torch's trace broadcasts it
    as such unless it reasons size-obliviously, which capture retries; no constraint is left, and
    a portrait image (P7 one column wide) matches eager."""
    example = image(*EXAMPLE)
    model = detector("retinanet_resnet18_fpn", example, min_size=128, max_size=192)
    others = [image(*o) for o in OTHERS]
    for x in (example, *others):
        _check_spread(model, x)
    r = check_export(model, (example,), DIMS, inputs=[(x,) for x in others], sizes=[], values=[],
                     output_names=["boxes", "scores", "labels"], output_dims={"boxes": {0: "num_detections"}},
                     expect_outputs=_outputs(()))
    assert r.constraints == []
