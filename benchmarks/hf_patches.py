"""Patches laid out channels last, the input of vision towers that take them cut by their processor
(``hf_inputs.candidates`` tries these sets after the generic ones):

* one patch of ``spatial_merge_size * patch_size`` pixels a side per language-model token, ``[tokens,
  side, side, channels]``, with the image's grid counted in tokens (Inkling 2's tower: ``pixel_values``
  and ``image_grid_thw``), one image of 2 by 2 tokens;
* cubes of ``temporal_patch_size`` frames of ``patch_size`` pixels a side, ``[patches, frames, side,
  side, channels]`` (Inkling's tower, folding time and space into depth stage after stage), 8 of them.

An image tiled at several scales into patches of ``patch_size`` pixels (Depth Pro: ``scaled_images_ratios``)
is given at the side its smallest scale cuts into one patch, ``patch_size / min(ratios)`` (``image_sets``).

Bytes grouped into patches (BLT's local encoder and decoder, fed by its patcher and global transformer):
the encoder's byte ids with each byte's patch index (``patch_ids``, 4 patches of consecutive bytes) and
their count (``num_patches``, a Python int); the decoder's byte embeddings beside the global
transformer's patch states (``patch_embeds``, ``[batch, 4, hidden_size_global]``) (``byte_patch_sets``);
alike, an encoder reading its first ``num_patches`` embeddings as an image's patches and the rest as
its queries (DeepSeek-OCR 2's vision encoder): 4 patches, then 4 (then 8) queries.

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


BYTE_PATCHES = 4


def byte_patch_sets(model: torch.nn.Module, params: Any) -> list:
    """``(names, dims, fixed)`` of a byte-patch encoder or decoder, else none."""
    dims, fixed = {"batch": (2, 3), "seq": (8, 12)}, {"byte_patches": BYTE_PATCHES}
    if {"input_ids", "patch_ids", "num_patches"} <= set(params):
        return [(["input_ids", "patch_ids", "num_patches"], dims, fixed)]
    if {"inputs_embeds", "num_patches"} <= set(params) and "patch_ids" not in params:  # DeepSeek-OCR 2's encoder
        return [(["inputs_embeds", "num_patches"], dims, fixed)]
    width = getattr(model.config, "hidden_size_global", None)
    if {"inputs_embeds", "patch_embeds"} <= set(params) and isinstance(width, int):
        return [(["inputs_embeds", "patch_embeds"], dims, fixed | {"global_width": width})]
    return []


def _patch_ids(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    ids = torch.arange(s["seq"]) * s["byte_patches"] // s["seq"]  # consecutive bytes, every patch non-empty
    return ids.expand(s["batch"], s["seq"]).contiguous()


def byte_makers(makers: dict) -> dict:
    """The makers of a byte-patch set: patch ids, their count, and ``makers``' ``patch_embeds`` wrapped
    to give a decoder's patch states where the set names the global width."""
    plain = makers.get("patch_embeds")

    def patch_embeds(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
        if "global_width" in s:
            return torch.randn(s["batch"], s["byte_patches"], s["global_width"], generator=g)
        return plain(m, s, g)

    return {"patch_ids": _patch_ids, "num_patches": lambda m, s, g: s["byte_patches"], "patch_embeds": patch_embeds}


BYTE_AXES = {"patch_ids": {0: "batch", 1: "seq"}, "num_patches": {}}


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
