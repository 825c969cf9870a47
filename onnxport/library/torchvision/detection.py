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
* ``transform._resize_image_and_masks``: the scale of the resize, ``min(min_size / min(h, w),
  max_size / max(h, w))``, is Python's ``min`` of two sizes' quotients, a branch torch.export can
  only keep as a constraint (the aspect ratio bounded by ``max_size / min_size``); the replacement
  takes ``torch.sym_min`` / ``sym_max`` of the same numbers (the same value, kept symbolic). An
  image resized with a training target (masks, keypoints) goes through torchvision's own function.
* ``transform.resize_keypoints``: the keypoints' x and y are scaled in place in slices of a clone
  (which only the whole program's functionalization can express); the replacement stacks the
  scaled columns, as torchvision's own traced branch of the function does.
* ``GeneralizedRCNNTransform.batch_images``: the padded size, ``int(math.ceil(float(size) / stride)
  * stride)``, goes through a Python float and fixes the image size to the example's; the
  replacement rounds up in integers, ``-(-size // stride) * stride`` (the same number for every size
  a float represents exactly), and pads each image with zeros at its end (``F.pad``, as
  torchvision's own ``_onnx_batch_images``) where torchvision copies it into a zero-filled batch.
* ``roi_heads.paste_masks_in_image``: Mask R-CNN's masks are pasted into the image one by one, in
  a Python loop over the detections, each resized to its box's size (an int of a data-dependent
  box); the replacement computes every pasted pixel at once: each image pixel inside a mask's box
  is the bilinear sample ``F.interpolate(mask, size=(h, w), mode="bilinear",
  align_corners=False)`` takes there (source index ``(M + 2) / size * (i + 0.5) - 0.5`` in float32,
  clamped at 0; neighbours and weights as PyTorch's CPU kernel ``upsample_bilinear2d``), zero
  elsewhere, as torchvision's ``paste_mask_in_image`` pastes it (the boxes expanded as
  ``expand_boxes`` does, its four columns stacked instead of written into a zero tensor).
* ``roi_heads.heatmaps_to_keypoints``: Keypoint R-CNN resizes each detection's heatmaps to its
  box's size (``ceil`` of the box's width and height, ints of data-dependent boxes) in a Python
  loop; the replacement resizes all of them at once onto a grid of the largest box's size, as
  separable weight matrices of PyTorch's bicubic interpolation (``align_corners=False``, A = -0.75,
  taps clamped to the heatmap's border, as ``upsample_bicubic2d``), the cells beyond a box's own
  size at -inf; the argmax over the grid is then the argmax over that box's map (row-major order,
  first maximum).

Semantics: torchvision's ``torchvision/ops/poolers.py`` (``MultiScaleRoIAlign``),
``torchvision/models/detection/transform.py`` (``GeneralizedRCNNTransform``) and ``roi_heads.py``;
PyTorch's CPU interpolation kernels (``aten/src/ATen/native/UpSample.h``: source indices, clamping,
the cubic convolution coefficients).
"""

from __future__ import annotations

import sys

import torch

from onnxport.capture.patches import Patch, SetAttribute, SetCode, original_of, register
from onnxport.capture.tracing import translating


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


def _resize_image_and_masks(image, self_min_size, self_max_size, target=None, fixed_size=None):
    """torchvision's ``_resize_image_and_masks`` (image [C, H, W] -> [C, H', W'] and the target) with
    the scale's minimum and maximum as ``torch.sym_min`` / ``sym_max``."""
    from torchvision.models.detection import transform

    if target is not None:
        return original_of(transform._resize_image_and_masks)(image, self_min_size, self_max_size, target, fixed_size)
    h, w = image.shape[-2:]
    size, scale_factor, recompute_scale_factor = None, None, None
    if fixed_size is not None:
        size = [fixed_size[1], fixed_size[0]]
    else:
        short, long = torch.sym_min(h, w), torch.sym_max(h, w)
        scale_factor = torch.sym_min(self_min_size / short, self_max_size / long)
        recompute_scale_factor = True
    image = torch.nn.functional.interpolate(image[None], size=size, scale_factor=scale_factor, mode="bilinear",
                                            recompute_scale_factor=recompute_scale_factor, align_corners=False)[0]
    return image, target


def _resize_keypoints(keypoints, original_size, new_size):
    """torchvision's ``resize_keypoints`` (keypoints [K, P, 3] as x, y, visibility; sizes (h, w)) with
    the scaled columns stacked."""
    ratio_h, ratio_w = (torch.tensor(s, dtype=torch.float32, device=keypoints.device)
                        / torch.tensor(s_orig, dtype=torch.float32, device=keypoints.device)
                        for s, s_orig in zip(new_size, original_size))
    return torch.stack((keypoints[..., 0] * ratio_w, keypoints[..., 1] * ratio_h, keypoints[..., 2]), dim=-1)


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


def _source(pixels: torch.Tensor, start: torch.Tensor, extent: torch.Tensor, size: torch.Tensor, n_source: int):
    """Per mask (rows) and image pixel (columns) along one axis: whether the pixel is pasted
    (``start <= pixel < start + extent``, torchvision's slice of the image), and the two source
    indices and their weights where bilinear interpolation from ``n_source`` samples to ``size``
    samples at ``pixel - start``."""
    d = pixels[None, :] - start[:, None]
    inside = (d >= 0) & (d < extent[:, None])
    scale = float(n_source) / size.to(torch.float32)
    src = (scale[:, None] * (d.to(torch.float32) + 0.5) - 0.5).clamp(min=0.0)
    i0 = src.floor().to(torch.int64).clamp(0, n_source - 1)
    i1 = torch.where(i0 < n_source - 1, i0 + 1, i0)
    w1 = (src - i0.to(torch.float32)).clamp(0.0, 1.0)
    return inside, i0, i1, 1.0 - w1, w1


def _paste_masks_in_image(masks, boxes, img_shape, padding: int = 1):
    """torchvision's ``paste_masks_in_image`` (masks [K, 1, M, M] in [0, 1], boxes [K, 4] in the image,
    img_shape (im_h, im_w) -> [K, 1, im_h, im_w]) for every mask at once: see the module docstring.
    A box is resized to ``max(x1 - x0 + 1, 1)`` columns and pasted over ``x0 <= x <= x1`` (nothing
    when ``x1 < x0``), rows alike, as torchvision's ``paste_mask_in_image``."""
    from torchvision.models.detection.roi_heads import expand_masks

    masks, scale = expand_masks(masks, padding=padding)
    # torchvision's expand_boxes, its four columns stacked instead of written into a zero tensor
    w_half = (boxes[:, 2] - boxes[:, 0]) * 0.5 * scale
    h_half = (boxes[:, 3] - boxes[:, 1]) * 0.5 * scale
    x_c = (boxes[:, 2] + boxes[:, 0]) * 0.5
    y_c = (boxes[:, 3] + boxes[:, 1]) * 0.5
    boxes = torch.stack([x_c - w_half, y_c - h_half, x_c + w_half, y_c + h_half], dim=1).to(dtype=torch.int64)
    im_h, im_w = img_shape
    m = masks[:, 0]  # [K, M + 2 * padding, M + 2 * padding]
    k, n = m.shape[0], m.shape[-1]
    x0, y0, x1, y1 = boxes.unbind(1)
    ys = torch.arange(im_h, device=masks.device)
    xs = torch.arange(im_w, device=masks.device)
    in_y, y_lo, y_hi, wy0, wy1 = _source(ys, y0, y1 + 1 - y0, torch.clamp(y1 - y0 + 1, min=1), n)
    in_x, x_lo, x_hi, wx0, wx1 = _source(xs, x0, x1 + 1 - x0, torch.clamp(x1 - x0 + 1, min=1), n)

    def rows(index):  # [K, im_h, n]: the mask's rows at ``index``
        return m.gather(1, index[:, :, None].expand(k, im_h, n))

    def at(r, index):  # [K, im_h, im_w]: of rows ``r``, the columns at ``index``
        return r.gather(2, index[:, None, :].expand(k, im_h, im_w))

    top, bottom = rows(y_lo), rows(y_hi)
    wx0, wx1 = wx0[:, None, :], wx1[:, None, :]
    value = wy0[:, :, None] * (wx0 * at(top, x_lo) + wx1 * at(top, x_hi)) + \
        wy1[:, :, None] * (wx0 * at(bottom, x_lo) + wx1 * at(bottom, x_hi))
    inside = in_y[:, :, None] & in_x[:, None, :]
    return torch.where(inside, value, torch.zeros((), dtype=value.dtype, device=value.device))[:, None]


def _cubic_weights(size: torch.Tensor, n_out: torch.Tensor, n_in: int) -> torch.Tensor:
    """[K, n_out, n_in]: row ``j`` of box ``k`` holds the weights bicubic interpolation from ``n_in``
    samples to ``size[k]`` samples gives the input samples at output ``j`` (PyTorch's
    ``upsample_bicubic2d``, ``align_corners=False``: source ``n_in / size * (j + 0.5) - 0.5``,
    coefficients of A = -0.75, the four taps clamped to ``[0, n_in - 1]``)."""
    a = -0.75
    j = torch.arange(n_out, device=size.device).to(torch.float32)
    scale = float(n_in) / size.to(torch.float32)
    src = scale[:, None] * (j[None, :] + 0.5) - 0.5
    floor = src.floor()
    t = src - floor
    x1 = t + 1.0  # distances to the four taps
    x2 = 1.0 - t
    x3 = 2.0 - t
    coefficients = [((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,
                    ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1, ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a]
    samples = torch.arange(n_in, device=size.device)
    weights = None
    for tap, c in enumerate(coefficients):
        index = (floor.to(torch.int64) - 1 + tap).clamp(0, n_in - 1)
        w = (index[:, :, None] == samples).to(torch.float32) * c[:, :, None]
        weights = w if weights is None else weights + w
    return weights


def _heatmaps_to_keypoints(maps, rois):
    """torchvision's ``heatmaps_to_keypoints`` (maps [K, P, H, W] heatmaps, rois [K, 4] boxes ->
    (keypoints [K, P, 3] as x, y, 1; scores [K, P])) for every box at once: see the module docstring."""
    widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
    heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
    widths_ceil, heights_ceil = widths.ceil(), heights.ceil()
    k, p, h, w = maps.shape
    one = torch.ones(1, dtype=widths.dtype, device=widths.device)
    grid_w = torch.cat([widths_ceil, one]).max().to(torch.int64).item()
    grid_h = torch.cat([heights_ceil, one]).max().to(torch.int64).item()
    torch._check(grid_w >= 1)
    torch._check(grid_h >= 1)
    wy = _cubic_weights(heights_ceil, grid_h, h)  # [K, grid_h, H]
    wx = _cubic_weights(widths_ceil, grid_w, w)  # [K, grid_w, W]
    resized = wy[:, None] @ maps.to(torch.float32) @ wx[:, None].transpose(-1, -2)  # [K, P, grid_h, grid_w]
    rows = torch.arange(grid_h, device=maps.device)[None, :] < heights_ceil[:, None]
    cols = torch.arange(grid_w, device=maps.device)[None, :] < widths_ceil[:, None]
    valid = (rows[:, :, None] & cols[:, None, :])[:, None]
    resized = torch.where(valid, resized, torch.full((), float("-inf"), device=maps.device))
    flat = resized.reshape(k, p, grid_h * grid_w)
    pos = flat.argmax(dim=2)
    x_int = pos % grid_w
    y_int = torch.div(pos - x_int, grid_w, rounding_mode="floor")
    x = (x_int.float() + 0.5) * (widths / widths_ceil)[:, None] + rois[:, 0:1]
    y = (y_int.float() + 0.5) * (heights / heights_ceil)[:, None] + rois[:, 1:2]
    scores = flat.gather(2, pos[:, :, None])[:, :, 0]
    return torch.stack([x, y, torch.ones_like(x)], dim=2), scores


def _changes() -> list:
    changes = []
    transform = sys.modules.get("torchvision.models.detection.transform")
    if transform is not None:
        changes.append(SetAttribute(transform, "_resize_image_and_masks", lambda original: _resize_image_and_masks))
        changes.append(SetAttribute(transform, "resize_keypoints", lambda original: _resize_keypoints))
        changes.append(SetAttribute(transform.GeneralizedRCNNTransform, "batch_images", lambda original: _batch_images))
    roi_heads = sys.modules.get("torchvision.models.detection.roi_heads")
    if roi_heads is not None:
        changes.append(SetCode(roi_heads.paste_masks_in_image, _paste_masks_in_image))
        changes.append(SetCode(roi_heads.heatmaps_to_keypoints, _heatmaps_to_keypoints))
    poolers = sys.modules.get("torchvision.ops.poolers")
    if poolers is not None:
        changes.append(SetAttribute(poolers, "_multiscale_roi_align", lambda original: _multiscale_roi_align))
    return changes


TORCHVISION_DETECTION = register(Patch(
    "torchvision detection counts", _changes,
    "torchvision.ops.poolers._multiscale_roi_align, torchvision.models.detection.transform's "
    "_resize_image_and_masks, resize_keypoints and GeneralizedRCNNTransform.batch_images, and (their code) "
    "roi_heads.paste_masks_in_image and heatmaps_to_keypoints: while torch.export traces, the same computations "
    "with the data-dependent count of boxes and the image sizes kept symbolic, the masks pasted and the keypoints "
    "found for every detection at once (see onnxport/library/torchvision/detection.py). Nothing happens where "
    "torchvision is not imported; eager execution outside the trace is unchanged", when=translating, order=21))
