"""Patches laid out channels last, the input of vision towers that take them cut by their processor
(``hf_inputs.candidates`` tries these sets after the generic ones):

* one patch of ``spatial_merge_size * patch_size`` pixels a side per language-model token, ``[tokens,
  side, side, channels]``, with the image's grid counted in tokens (Inkling 2's tower: ``pixel_values``
  and ``image_grid_thw``), one image of 2 by 2 tokens;
* cubes of ``temporal_patch_size`` frames of ``patch_size`` pixels a side, ``[patches, frames, side,
  side, channels]`` (Inkling's tower, folding time and space into depth stage after stage), 8 of them.

An image tiled at several scales into patches of ``patch_size`` pixels (Depth Pro: ``scaled_images_ratios``)
is given at the side its smallest scale cuts into one patch, ``patch_size / min(ratios)`` (``image_sets``).

``wrap_pixels`` wraps ``hf_inputs``' pixel maker so that these layouts are made here.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


def _vision(config: Any) -> Any:
    return getattr(config, "vision_config", None) or config


def _int(value: Any) -> Any:
    return value[0] if isinstance(value, (list, tuple)) else value


def patch_sets(model: torch.nn.Module, params: Any) -> list:
    """``(names, dims, fixed)`` of a tower taking channels-last patches, else none."""
    if "pixel_values" not in params or "input_ids" in params:
        return []
    vision = _vision(model.config)
    patch, channels = _int(getattr(vision, "patch_size", None)), getattr(vision, "num_channels", 3)
    if not isinstance(patch, int) or not isinstance(channels, int):
        return []
    grid = next((n for n in ("image_grid_thw", "grid_thw") if n in params), None)
    merge = getattr(vision, "spatial_merge_size", None)
    if grid is not None and isinstance(merge, int):
        fixed = {"pixels": "tokens_last", "grid": 2, "t": 1, "side": merge * patch, "channels": channels}
        return [(["pixel_values", grid], {}, fixed)]
    frames = getattr(vision, "temporal_patch_size", None)
    if grid is None and isinstance(frames, int) and len(params) <= 2:
        return [(["pixel_values"], {}, {"pixels": "cubes_last", "cubes": 8, "frames": frames, "side": patch,
                                        "channels": channels})]
    return []


def image_sets(model: torch.nn.Module, params: Any) -> list:
    """``(names, dims, fixed)``: the image of a model tiling it at scales, at its smallest side, else none."""
    config = model.config
    ratios, patch = getattr(config, "scaled_images_ratios", None), getattr(config, "patch_size", None)
    if "pixel_values" not in params or not ratios or not isinstance(patch, int):
        return []
    side = int(round(patch / min(ratios)))
    return [(["pixel_values"], {"batch": (2, 3), "image": (side, 2 * side)}, {"channels": 3})]


def wrap_pixels(plain: Callable) -> Callable:
    """``plain`` (the pixel maker), with this module's layouts made here."""
    def make(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
        layout = s.get("pixels")
        if layout == "tokens_last":
            return torch.rand(s["t"] * s["grid"] ** 2, s["side"], s["side"], s["channels"], generator=g) * 2 - 1
        if layout == "cubes_last":
            return torch.randn(s["cubes"], s["frames"], s["side"], s["side"], s["channels"], generator=g)
        return plain(m, s, g)
    return make
