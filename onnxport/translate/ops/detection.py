"""Detection ops of torchvision: nms -> NonMaxSuppression, roi_align -> RoiAlign, roi_pool -> MaxRoiPool.

Registered under their qualified names (``"torchvision::nms.default"``): onnxport does not import
torchvision; the translations apply where the model's program calls its compiled ops.

Semantics: torchvision's ops (``torchvision/ops/{boxes,roi_align,roi_pool}.py`` and their CPU kernels
``torchvision/csrc/ops/cpu``) and the ONNX ``NonMaxSuppression`` (opset 11+), ``RoiAlign`` (opset
16+, ``coordinate_transformation_mode``) and ``MaxRoiPool`` operator specs. Both sides suppress a box
whose IoU with a kept box is strictly greater than the threshold, and order the kept boxes by
decreasing score (boxes of equal score may come in another order).

While a model is traced, ``torchvision.ops.batched_nms`` calls this nms in one form at every count of
boxes (``onnxport/library/torchvision/ops.py``).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.translate.registry import translates

_F32 = ir.DataType.FLOAT
_I64 = ir.DataType.INT64


def _i64(ctx, values) -> ir.Value:
    return ctx.const(np.array(values, dtype=np.int64))


@translates("torchvision::nms.default")
def nms(ctx, boxes, scores, iou_threshold):
    """nms(Tensor dets [N, 4] (x1, y1, x2, y2), Tensor scores [N], float iou_threshold) -> int64 [K]:
    indices of the boxes kept, by decreasing score; ``K`` is data-dependent.

    ONNX ``NonMaxSuppression`` over one batch and one class, at most ``N`` boxes kept, no score
    threshold (``center_point_box=0``: corners in any diagonal order, so torchvision's x1, y1, x2, y2
    serve as ONNX's y1, x1, y2, x2: IoU does not depend on which axis is which). onnxruntime's kernel
    takes float32: float16 and float64 boxes are compared in float32.
    """
    boxes3 = ctx.op.Unsqueeze(ctx.cast(boxes, _F32), _i64(ctx, [0]))         # [1, N, 4]
    scores3 = ctx.op.Unsqueeze(ctx.cast(scores, _F32), _i64(ctx, [0, 1]))    # [1, 1, N]
    count = ctx.op.Slice(ctx.shape(boxes), _i64(ctx, [0]), _i64(ctx, [1]))  # [1]: keep up to N
    iou = ctx.const(np.array([iou_threshold], dtype=np.float32))
    selected = ctx.op.NonMaxSuppression(boxes3, scores3, count, iou, center_point_box=0)  # [K, 3]
    return ctx.op.Reshape(ctx.op.Slice(selected, _i64(ctx, [2]), _i64(ctx, [3]), _i64(ctx, [1])), _i64(ctx, [-1]))


def _rois(ctx, rois) -> tuple[ir.Value, ir.Value]:
    """(boxes [K, 4], batch indices [K] int64) of torchvision's rois [K, 5] (batch index, x1, y1, x2, y2)."""
    boxes = ctx.op.Slice(rois, _i64(ctx, [1]), _i64(ctx, [5]), _i64(ctx, [1]))
    index = ctx.op.Reshape(ctx.op.Slice(rois, _i64(ctx, [0]), _i64(ctx, [1]), _i64(ctx, [1])), _i64(ctx, [-1]))
    return boxes, ctx.op.Cast(index, to=_I64)


@translates("torchvision::roi_align.default", opset=(16, None))
def roi_align(ctx, x, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    """roi_align(Tensor input [N, C, H, W], Tensor rois [K, 5], float spatial_scale, SymInt
    pooled_height, SymInt pooled_width, int sampling_ratio, bool aligned) -> [K, C, pooled_height,
    pooled_width]: average of bilinear samples per bin.

    ONNX ``RoiAlign`` (mode ``avg``): ``aligned=True`` is ``coordinate_transformation_mode="half_pixel"``
    (coordinates shifted by half a pixel), ``aligned=False`` is ``"output_half_pixel"`` (no shift, RoIs
    at least one pixel wide, as torchvision). ``sampling_ratio <= 0`` is the adaptive count
    ``ceil(roi_size / pooled_size)`` on both sides (ONNX's 0).
    """
    boxes, index = _rois(ctx, rois)
    return ctx.op.RoiAlign(x, ctx.cast(boxes, x.dtype), index, mode="avg",
                           coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
                           output_height=int(pooled_height), output_width=int(pooled_width),
                           sampling_ratio=max(int(sampling_ratio), 0), spatial_scale=float(spatial_scale))


@translates("torchvision::roi_pool.default")
def roi_pool(ctx, x, rois, spatial_scale, pooled_height, pooled_width):
    """roi_pool(Tensor input [N, C, H, W], Tensor rois [K, 5], float spatial_scale, SymInt pooled_height,
    SymInt pooled_width) -> (Tensor output [K, C, pooled_height, pooled_width], Tensor argmax): the
    maximum per bin of RoIs rounded to whole pixels. ONNX ``MaxRoiPool`` (rois with their batch index
    as torchvision gives them); the argmax output, used only by torchvision's backward, is not computed.
    """
    pooled = ctx.op.MaxRoiPool(x, ctx.cast(rois, x.dtype), pooled_shape=[int(pooled_height), int(pooled_width)],
                               spatial_scale=float(spatial_scale))
    return pooled, None
