"""Inputs of image-text models that place their image's embeddings at given positions of their text
(``hf_inputs.candidates`` tries these sets after the generic ones):

* by a position mask (Kosmos-2: ``image_embeds_position_mask``, ``[batch, seq]``, true at the
  ``latent_query_num`` positions after the first token, where its processor puts the image's
  placeholders): an image, token ids long enough to hold the image's positions and a few text tokens,
  and the mask;
* by placeholder tokens of a video (InstructBLIP-Video: ``num_query_tokens`` Q-Former outputs per frame
  placed at its ``video_token_id`` tokens): a video ``[batch, frames, channels, side, side]``, the
  Q-Former's ids, and ids holding one placeholder per query of each frame;
* by a text-to-image attention mask (IDEFICS: ``image_attention_mask``, ``[batch, seq, images]``, its
  gated cross-attention layers reading the images' perceiver latents): images ``[batch, images,
  channels, side, side]`` (one each), every token attending its image;
* questions marked in a prompt (Jev's decision head: ``marks``, the 1-based positions of the tokens
  scoring each question's options; ``num_options``; ``question_type_ids``, which picks each question's
  rows of verbalizers): one prompt (its forward reads the first alone) with a two-option question of
  the first type and a three-option one of the last, marked at its third and sixth tokens.

Beside them, a maker ``fill`` uses where a forward requires it: the waveform samples each clip of a
spectrogram holds (dots.ocr 3's audio tower: ``chunk_sample_lengths``), every frame's ``hop_length``
samples, whole clips.
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


FRAMES = 2


def video_sets(model: torch.nn.Module, params: Any, image: dict, fixed: dict) -> list:
    """``(names, dims, fixed)`` of a video Q-Former model whose text holds its video's placeholders."""
    config = model.config
    token, queries = getattr(config, "video_token_id", None), getattr(config, "num_query_tokens", None)
    if not isinstance(token, int) or not isinstance(queries, int) or "qformer_input_ids" not in params or not image:
        return []
    dims = {"batch": (2, 3), "seq": (7, 11)} | image
    placed = {"pixels": "video", "frames": FRAMES, "image_token": token, "image_tokens": queries * FRAMES}
    return [(["pixel_values", "qformer_input_ids", "input_ids"], dims, fixed | placed)]


def images_sets(model: torch.nn.Module, params: Any, image: dict, fixed: dict) -> list:
    """``(names, dims, fixed)`` of a model cross-attending images its text tokens are masked to."""
    if "image_attention_mask" not in params or "perceiver_embeddings" not in params or not image:
        return []
    dims = {"batch": (2, 3), "seq": (7, 11)} | image
    names = ["input_ids", "attention_mask", "pixel_values", "image_attention_mask"]
    return [(names, dims, fixed | {"pixels": "video", "frames": 1})]


def question_sets(model: torch.nn.Module, params: Any) -> list:
    """``(names, dims, fixed)`` of a model scoring the options of questions marked in one prompt."""
    if not {"marks", "num_options", "question_type_ids"} <= set(params):
        return []
    return [(["input_ids", "marks", "num_options", "question_type_ids"], {"seq": (7, 11)}, {"batch": 1})]


def _last_type(m: torch.nn.Module) -> int:
    return max(0, len(getattr(m.config, "offsets", None) or {"": 0}) - 1)


def _mask(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    mask = torch.zeros(s["batch"], s["seq"], dtype=torch.bool)
    mask[:, 1:1 + s["placed"]] = True
    return mask


MAKERS = {
    "marks": lambda m, s, g: torch.tensor([[3, 6]]),
    "num_options": lambda m, s, g: torch.tensor([[2, 3]]),
    "question_type_ids": lambda m, s, g: torch.tensor([[0, _last_type(m)]]),
    MASK: _mask,
    "chunk_sample_lengths": lambda m, s, g: torch.full((s["batch"],), s["frames"] * int(
        getattr(m.config, "hop_length", 160)), dtype=torch.int64),
    "image_attention_mask": lambda m, s, g: torch.ones(s["batch"], s["seq"], s["frames"], dtype=torch.int64),
}
AXES = {"chunk_sample_lengths": {0: "batch"}, "marks": {}, "num_options": {}, "question_type_ids": {},
        MASK: {0: "batch", 1: "seq"},
        "image_attention_mask": {0: "batch", 1: "seq"}}
