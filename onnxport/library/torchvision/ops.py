"""torchvision's ``batched_nms`` while torch.export traces: one form at every count of boxes.

``torchvision.ops.batched_nms`` chooses between two equivalent implementations by the number of boxes
(``boxes.numel() > 4000`` on the CPU: a loop over the classes, else one nms of boxes offset per class)
and returns early on an empty input; on a data-dependent count both branches stop torch.export. While a
model is traced, ``batched_nms`` is the offset form for every count, empty included (``ONE_BATCHED_NMS``,
a registered capture patch); its nms is translated in ``translate/ops/detection.py``.

Semantics: torchvision's ``torchvision/ops/boxes.py`` (``batched_nms``, ``_batched_nms_coordinate_trick``).
"""

from __future__ import annotations

import sys

import torch

from onnxport.capture.patches import Patch, SetAttribute, register
from onnxport.capture.tracing import translating


def _batched_nms_by_offsets(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor,
                            iou_threshold: float) -> torch.Tensor:
    """torchvision's ``_batched_nms_coordinate_trick`` without its ``numel() == 0`` branch: the largest
    coordinate is taken over the boxes and -inf, which is the boxes' maximum when there are any and
    leaves an empty input empty (torchvision returns an empty int64 tensor there too)."""
    import torchvision

    floor = torch.full((1,), float("-inf"), dtype=boxes.dtype, device=boxes.device)
    max_coordinate = torch.cat([boxes.reshape(-1), floor]).max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    return torchvision.ops.nms(boxes + offsets[:, None], scores, iou_threshold)


def _one_batched_nms_changes() -> list:
    ops = sys.modules.get("torchvision.ops")
    boxes = sys.modules.get("torchvision.ops.boxes")
    if ops is None or boxes is None:
        return []
    return [SetAttribute(owner, "batched_nms", lambda original: _batched_nms_by_offsets) for owner in (boxes, ops)]


ONE_BATCHED_NMS = register(Patch(
    "one batched_nms", _one_batched_nms_changes,
    "torchvision.ops.batched_nms (and torchvision.ops.boxes.batched_nms, which torchvision's detection models "
    "call): while torch.export traces, _batched_nms_by_offsets, one of the two implementations torchvision itself "
    "switches between for speed (torchvision/ops/boxes.py), for every count of boxes. Nothing happens where "
    "torchvision is not imported; eager execution outside the trace is unchanged", when=translating, order=20))
