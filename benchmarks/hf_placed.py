"""Inputs of an image-text model that places its image embeddings in its text by a position mask
(Kosmos-2: ``image_embeds_position_mask``, ``[batch, seq]``, true at the ``latent_query_num``
positions after the first token, where its processor puts the image's placeholders): an image, token
ids long enough to hold the image's positions and a few text tokens, and the mask.
``hf_inputs.candidates`` tries these sets after the generic ones.
"""

from __future__ import annotations

from typing import Any

import torch

MASK = "image_embeds_position_mask"


def placed_sets(model: torch.nn.Module, params: Any, image: dict, fixed: dict) -> list:
    """``(names, dims, fixed)``: the image, ids of ``latent_query_num + 3`` (then ``+ 7``) tokens and
    the position mask; none where the forward takes no such mask or the config names no count."""
    count = getattr(model.config, "latent_query_num", None)
    if MASK not in params or "pixel_values" not in params or not isinstance(count, int) or not image:
        return []
    dims = {"batch": (2, 3), "seq": (count + 3, count + 7)} | image
    return [(["pixel_values", "input_ids", MASK], dims, fixed | {"placed": count})]


def _mask(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    mask = torch.zeros(s["batch"], s["seq"], dtype=torch.bool)
    mask[:, 1:1 + s["placed"]] = True
    return mask


MAKERS = {MASK: _mask}
AXES = {MASK: {0: "batch", 1: "seq"}}
