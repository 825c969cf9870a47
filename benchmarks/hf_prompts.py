"""Example inputs of SAM's family split into parts (``hf_inputs.py`` asks this module for them).

* a prompt encoder (``forward(input_points, input_labels, input_boxes, input_masks)``: SAM 2's,
  EdgeTAM's, SAM 3 tracker's): ``POINTS`` points a prompt, one prompt an image, ``[batch, 1, points,
  2]`` pixel coordinates within the config's ``image_size`` and their labels (1 foreground, 0
  background) ``[batch, 1, points]``; no boxes, no mask (``None``: the forward requires the
  parameters and takes ``None`` for a prompt not given);
* a mask decoder (``forward(image_embeddings, image_positional_embeddings, sparse_prompt_embeddings,
  dense_prompt_embeddings, multimask_output, ...)``): the image embedding and its positions ``[batch,
  hidden_size, EMBED, EMBED]``, one prompt of ``POINTS + 1`` sparse embeddings ``[batch, 1, POINTS + 1,
  hidden_size]`` and its dense embedding, every mask (``multimask_output=True``); SAM-HQ's decoder also
  ``hq_token_only=False``; a decoder taking ``high_resolution_features`` (SAM 2's) the backbone's two
  finer maps as its own projections give them, ``[batch, hidden_size // 8, 4 * EMBED, 4 * EMBED]`` and
  ``[batch, hidden_size // 4, 2 * EMBED, 2 * EMBED]``.

* SAM 3's parts on the image's ``EMBED`` by ``EMBED`` feature map (width ``hidden_size``) and a text of
  ``TEXT`` tokens: the DETR encoder (``vision_features`` a list of one map ``[batch, hidden, EMBED,
  EMBED]``, its positions, ``text_features`` ``[batch, TEXT, hidden]``), the DETR decoder (the map
  flattened ``[batch, EMBED**2, hidden]``, its positions, ``spatial_shapes`` ``[[EMBED, EMBED]]``), the
  mask decoder (``QUERIES`` queries ``[batch, QUERIES, hidden]``, the backbone's maps at 4, 2 and 1
  times ``EMBED``, the encoder's states ``[batch, EMBED**2, hidden]``), the geometry encoder (``POINTS``
  boxes ``[batch, POINTS, 4]`` (cx, cy, w, h in [0, 1]), all valid, positive, and the map).

A maker is ``maker(model, sizes, generator) -> value`` as in ``hf_inputs``.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

POINTS = 3  # points of a prompt
EMBED = 8  # side of the image embedding a mask decoder reads

TEXT = 5  # tokens of a text prompt (SAM 3)
QUERIES = 4  # object queries of SAM 3's mask decoder
_DECODER = ("image_embeddings", "image_positional_embeddings", "sparse_prompt_embeddings", "dense_prompt_embeddings")


def prompt_sets(model: torch.nn.Module) -> list:
    """``(names, dims, fixed)`` of the prompt encoder's or mask decoder's input set, else none."""
    params = inspect.signature(model.forward).parameters
    if "pixel_values" in params:  # a whole model: its image leads (hf_inputs' image sets)
        return []
    if "input_points" in params and "input_labels" in params:
        names = [n for n in ("input_points", "input_labels", "input_boxes", "input_masks") if n in params]
        return [(names, {"batch": (2, 3)}, {"prompt": "points"})]
    sam3 = _sam3_set(params)
    if sam3:
        return [(sam3, {"batch": (2, 3)}, {"prompt": "sam3", "listed": "vision_pos_embeds" in sam3})]
    if all(n in params for n in _DECODER) and "multimask_output" in params:
        names = list(_DECODER) + [n for n in ("multimask_output", "hq_token_only", "high_resolution_features")
                                  if n in params]
        return [(names, {"batch": (2, 3)}, {"prompt": "decoder"})]
    return []


def _sam3_set(params: dict) -> list:
    """The inputs of a SAM 3 part by its forward's parameters, else none."""
    if "vision_features" in params and "text_features" in params:
        listed = "list" in str(params["vision_features"].annotation)
        positions = "vision_pos_embeds" if listed else "vision_pos_encoding"
        return ["vision_features", "text_features", positions] + ([] if listed else ["spatial_shapes"])
    if "decoder_queries" in params and "backbone_features" in params:
        return ["decoder_queries", "backbone_features", "encoder_hidden_states"]
    if "box_embeddings" in params and "img_feats" in params:
        return ["box_embeddings", "box_mask", "box_labels", "img_feats"]
    return []


def flat(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    """A feature map flattened, ``[batch, EMBED**2, hidden_size]``."""
    return torch.randn(s["batch"], EMBED * EMBED, _hidden(m), generator=g)


def spatial_shapes(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    """The one feature map's size ``[[EMBED, EMBED]]`` (SAM 3's DETR decoder)."""
    return torch.tensor([[EMBED, EMBED]], dtype=torch.int64)


def _hidden(m: torch.nn.Module) -> int:
    return int(getattr(m.config, "hidden_size", 256))


def _points(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    side = float(getattr(m.config, "image_size", 1024))
    return torch.rand(s["batch"], 1, POINTS, 2, generator=g) * side


def _high_resolution(m: torch.nn.Module, s: dict, g: torch.Generator) -> list:
    hidden = _hidden(m)
    return [torch.randn(s["batch"], hidden // 8, 4 * EMBED, 4 * EMBED, generator=g),
            torch.randn(s["batch"], hidden // 4, 2 * EMBED, 2 * EMBED, generator=g)]


def _map(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    return torch.randn(s["batch"], _hidden(m), EMBED, EMBED, generator=g)


MAKERS: dict[str, Any] = {
    "input_points": _points,
    "input_labels": lambda m, s, g: torch.randint(0, 2, (s["batch"], 1, POINTS), generator=g),
    "input_boxes": lambda m, s, g: None,
    "input_masks": lambda m, s, g: None,
    "image_embeddings": _map,
    "image_positional_embeddings": _map,
    "dense_prompt_embeddings": _map,
    "sparse_prompt_embeddings": lambda m, s, g: torch.randn(s["batch"], 1, POINTS + 1, _hidden(m), generator=g),
    "multimask_output": lambda m, s, g: True,
    "hq_token_only": lambda m, s, g: False,
    "high_resolution_features": _high_resolution,
    "vision_features": lambda m, s, g: [_map(m, s, g)] if s.get("listed", True) else flat(m, s, g),
    "vision_pos_embeds": lambda m, s, g: [_map(m, s, g)],
    "vision_pos_encoding": flat,
    "text_features": lambda m, s, g: torch.randn(s["batch"], TEXT, _hidden(m), generator=g),
    "decoder_queries": lambda m, s, g: torch.randn(s["batch"], QUERIES, _hidden(m), generator=g),
    "backbone_features": lambda m, s, g: [torch.randn(s["batch"], _hidden(m), k * EMBED, k * EMBED, generator=g)
                                          for k in (4, 2, 1)],
    "box_embeddings": lambda m, s, g: torch.cat([0.25 + 0.5 * torch.rand(s["batch"], POINTS, 2, generator=g),
                                                 0.1 + 0.2 * torch.rand(s["batch"], POINTS, 2, generator=g)], -1),
    "box_mask": lambda m, s, g: torch.ones(s["batch"], POINTS, dtype=torch.bool),
    "box_labels": lambda m, s, g: torch.ones(s["batch"], POINTS, dtype=torch.int64),
    "img_feats": lambda m, s, g: [_map(m, s, g)],
}


def axes(name: str, fixed: dict) -> Any:
    """``{axis: dim name}`` (a list of them for a list input) of an input this module makes, else None."""
    if name not in MAKERS:
        return None
    if name in ("high_resolution_features", "vision_features", "vision_pos_embeds", "backbone_features",
                "img_feats") and (name != "vision_features" or fixed.get("listed", True)):
        return [{0: "batch"}] * (3 if name == "backbone_features" else 2 if name == "high_resolution_features" else 1)
    if name in ("input_boxes", "input_masks", "multimask_output", "hq_token_only"):
        return {}
    return {0: "batch"}
