"""torchvision's detection models (``torchvision.models.detection``) while torch.export traces them.

Their post-processing works on counts known only when the model runs (the boxes above a score
threshold, the boxes NMS keeps), and a few lines of torchvision's Python code turn such a count
into a Python int or branch on it, which stops torch.export. Each change below replaces one
function of torchvision, while a model is traced only, by one that computes the same values for
every count without asking for the count as a Python value (``TORCHVISION_DETECTION``, a registered
capture patch; nothing happens where torchvision is not imported):

* ``torchvision.ops.poolers._multiscale_roi_align``: ``num_rois = len(rois)`` sizes the result
  buffer (a Python int of a data-dependent count); the replacement sizes it with ``rois.shape[0]``
  (the same count, kept symbolic). Everything else is torchvision's code as it is.
* ``GeneralizedRCNNTransform.batch_images``: the padded size, ``int(math.ceil(float(size) / stride)
  * stride)``, goes through a Python float and fixes the image size to the example's; the
  replacement rounds up in integers, ``-(-size // stride) * stride`` (the same number for every size
  a float represents exactly), and pads each image with zeros at its end (``F.pad``, as
  torchvision's own ``_onnx_batch_images``) where torchvision copies it into a zero-filled batch.

Semantics: torchvision's ``torchvision/ops/poolers.py`` (``MultiScaleRoIAlign``),
``torchvision/models/detection/transform.py`` (``GeneralizedRCNNTransform``).
"""

from __future__ import annotations

import sys

import torch

from onnxport.capture.patches import Patch, SetAttribute, register
from onnxport.translate.registry import during_capture


def _multiscale_roi_align(x_filtered, boxes, output_size, sampling_ratio, scales, mapper):
    """torchvision's ``_multiscale_roi_align`` (x_filtered: feature maps [N, C, H_l, W_l] per level,
    boxes: [K_i, 4] per image -> [sum K_i, C, *output_size]), the result's rows counted with
    ``rois.shape[0]`` instead of ``len(rois)``.

    Raises ``ValueError`` as torchvision does when ``scales`` or ``mapper`` is None."""
    from torchvision.ops import roi_align
    from torchvision.ops.poolers import _convert_to_roi_format

    if scales is None or mapper is None:
        raise ValueError("scales and mapper should not be None")
    rois = _convert_to_roi_format(boxes)
    if len(x_filtered) == 1:
        return roi_align(x_filtered[0], rois, output_size=output_size, spatial_scale=scales[0],
                         sampling_ratio=sampling_ratio)
    levels = mapper(boxes)
    first = x_filtered[0]
    result = torch.zeros((rois.shape[0], first.shape[1]) + tuple(output_size), dtype=first.dtype, device=first.device)
    for level, (feature, scale) in enumerate(zip(x_filtered, scales)):
        idx_in_level = torch.where(levels == level)[0]
        pooled = roi_align(feature, rois[idx_in_level], output_size=output_size, spatial_scale=scale,
                           sampling_ratio=sampling_ratio)
        result[idx_in_level] = pooled.to(result.dtype)
    return result


def _batch_images(self, images, size_divisible: int = 32):
    """``GeneralizedRCNNTransform.batch_images`` (images: [C, H_i, W_i] each -> [N, C, H, W], ``H``, ``W`` the
    largest sizes rounded up to a multiple of ``size_divisible``, zeros after each image), rounded in
    integers."""
    max_size = self.max_by_axis([list(img.shape) for img in images])
    stride = int(size_divisible)
    max_size[1] = -(-max_size[1] // stride) * stride
    max_size[2] = -(-max_size[2] // stride) * stride
    padded = [torch.nn.functional.pad(img, (0, max_size[2] - img.shape[2], 0, max_size[1] - img.shape[1],
                                            0, max_size[0] - img.shape[0])) for img in images]
    return torch.stack(padded)


def _changes() -> list:
    changes = []
    transform = sys.modules.get("torchvision.models.detection.transform")
    if transform is not None:
        changes.append(SetAttribute(transform.GeneralizedRCNNTransform, "batch_images", lambda original: _batch_images))
    poolers = sys.modules.get("torchvision.ops.poolers")
    if poolers is not None:
        changes.append(SetAttribute(poolers, "_multiscale_roi_align", lambda original: _multiscale_roi_align))
    return changes


TORCHVISION_DETECTION = during_capture(register(Patch(
    "torchvision detection counts", _changes,
    "torchvision.ops.poolers._multiscale_roi_align and GeneralizedRCNNTransform.batch_images: while torch.export "
    "traces, the same computations with the data-dependent count of boxes and the padded image size kept symbolic (see onnxport/translate/ops/detection_models.py). Nothing "
    "happens where torchvision is not imported; eager execution outside the trace is unchanged")))
