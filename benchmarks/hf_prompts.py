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

A maker is ``maker(model, sizes, generator) -> value`` as in ``hf_inputs``.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

POINTS = 3  # points of a prompt
EMBED = 8  # side of the image embedding a mask decoder reads

_DECODER = ("image_embeddings", "image_positional_embeddings", "sparse_prompt_embeddings", "dense_prompt_embeddings")


def prompt_sets(model: torch.nn.Module) -> list:
    """``(names, dims, fixed)`` of the prompt encoder's or mask decoder's input set, else none."""
    params = inspect.signature(model.forward).parameters
    if "pixel_values" in params:  # a whole model: its image leads (hf_inputs' image sets)
        return []
    if "input_points" in params and "input_labels" in params:
        names = [n for n in ("input_points", "input_labels", "input_boxes", "input_masks") if n in params]
        return [(names, {"batch": (2, 3)}, {"prompt": "points"})]
    if all(n in params for n in _DECODER) and "multimask_output" in params:
        names = list(_DECODER) + [n for n in ("multimask_output", "hq_token_only", "high_resolution_features")
                                  if n in params]
        return [(names, {"batch": (2, 3)}, {"prompt": "decoder"})]
    return []


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
}


def axes(name: str, fixed: dict) -> Any:
    """``{axis: dim name}`` (a list of them for a list input) of an input this module makes, else None."""
    if name not in MAKERS:
        return None
    if name == "high_resolution_features":
        return [{0: "batch"}, {0: "batch"}]
    if name in ("input_boxes", "input_masks", "multimask_output", "hq_token_only"):
        return {}
    return {0: "batch"}
