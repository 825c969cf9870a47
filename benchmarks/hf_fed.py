"""Example inputs of a model part fed by another part (``hf_inputs.py`` asks this module for them).

* a codec's decoder (``forward(latents)``: Mimi's, Pocket TTS's): latents ``[batch, hidden_size,
  frames]``, ``frames`` dynamic;
* a decoder attending to an encoder it is not built with (T5Gemma 2's decoder, BLIP-2's Q-Former):
  its generic input set then ``encoder_hidden_states`` ``[batch, seq, encoder width]`` (the config's
  ``encoder_hidden_size``, ``cross_attention_hidden_size``, else ``hidden_size``); tried after every
  other set, so a model that runs without them keeps its own;
* a tower's raw ``hidden_states`` (the first parameter of its forward: Granite Speech's CTC encoder,
  Phi-4's audio model) at the config's input width (``input_dim``, ``input_size``), not its
  ``hidden_size``;
* a codec's conv tower on ``hidden_states`` where its main input is ``input_values`` (VibeVoice's
  acoustic tokenizer's encoder and decoder): a waveform ``[batch, channels, samples]``, else latents
  ``[batch, hidden_size, frames]``;
* a vision tower reading its images' patches packed in a row with their grids (MiniCPM-V's:
  ``forward(pixel_values, target_sizes)``): ``[1, channels, patch_size, images * side**2 *
  patch_size]``, ``side = image_size // patch_size`` patches a side, and ``target_sizes`` ``[images,
  2]``; no dim dynamic (the images are counted in the packed row);
* a tower prepending its class token to the ``hidden_states`` it is fed (FLAVA's multimodal encoder,
  ``use_cls_token``): its ``attention_mask`` covers the class token too, one longer than the states
  (``mask_seq``, the text length plus one);
* a parameter the forward requires but annotates as optional (``mask: Tensor | None``) and no maker
  knows: ``None``.

A maker is ``maker(model, sizes, generator) -> value`` as in ``hf_inputs``.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

INPUT_WIDTHS = ("input_dim", "input_size", "input_feat_size")
ENCODER_WIDTHS = ("encoder_hidden_size", "cross_attention_hidden_size", "hidden_size", "d_model")


def _first(config: Any, names: tuple) -> Any:
    return next((getattr(config, n) for n in names if isinstance(getattr(config, n, None), int)), None)


def latent_sets(model: torch.nn.Module, params: dict) -> list:
    """``(names, dims, fixed)`` of a codec decoder's latents, else none."""
    if next(iter(params), None) != "latents":
        return []
    return [(["latents"], {"batch": (2, 3), "frames": (16, 24)}, {})]


def conv_sets(model: torch.nn.Module, params: dict) -> list:
    """``(names, dims, fixed)`` of a codec's conv tower led by ``hidden_states``, else none."""
    if next(iter(params), None) != "hidden_states" or getattr(model, "main_input_name", None) != "input_values":
        return []
    channels = int(_first(model.config, ("channels", "audio_channels")) or 1)
    return [(["hidden_states"], {"batch": (2, 3), "samples": (3200, 4800)}, {"conv": "wave", "channels": channels}),
            (["hidden_states"], {"batch": (2, 3), "frames": (16, 24)}, {"conv": "latent"})]


def conv_states(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    """A conv tower's ``hidden_states`` in the set's layout (``conv_sets``)."""
    if s["conv"] == "wave":
        return torch.randn(s["batch"], s["channels"], s["samples"], generator=g)
    return torch.randn(s["batch"], int(_first(m.config, ("hidden_size",)) or 128), s["frames"], generator=g)


def conv_axes(fixed: dict) -> dict:
    return {0: "batch", 2: "samples" if fixed["conv"] == "wave" else "frames"}


def packed_sets(model: torch.nn.Module, params: dict) -> list:
    """``(names, dims, fixed)`` of a vision tower on packed patches with their grids, else none."""
    if "target_sizes" not in params or "pixel_values" not in params:
        return []
    config = model.config
    patch, side = _first(config, ("patch_size",)), _first(config, ("image_size",))
    if not patch or not side:
        return []
    channels = _first(config, ("num_channels",)) or 3
    return [(["pixel_values", "target_sizes"], {}, {"pixels": "packed", "images": 2, "grid": side // patch,
                                                     "patch": patch, "channels": channels})]


def packed(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    """Patches of ``images`` images packed in a row (``packed_sets``)."""
    return torch.randn(1, s["channels"], s["patch"], s["images"] * s["grid"] ** 2 * s["patch"], generator=g)


def cross_sets(model: torch.nn.Module, params: dict, sets: list) -> list:
    """Each of ``sets`` (``(names, dims, fixed)``) with the encoder's hidden states added, where the
    forward takes them and the model is not itself an encoder-decoder."""
    if "encoder_hidden_states" not in params or getattr(model.config, "is_encoder_decoder", False):
        return []
    width = int(_first(model.config, ENCODER_WIDTHS) or 128)
    out = []
    for names, dims, fixed in sets:
        if "encoder_hidden_states" in names:
            continue
        out.append((names + ["encoder_hidden_states"], dims | {"seq": dims.get("seq", (7, 11))},
                    fixed | {"encoder_width": width}))
    return out


def input_width(model: torch.nn.Module) -> dict:
    """``{"embed_width": w}`` where the forward's first parameter is ``hidden_states`` and the config
    names an input width, else ``{}``."""
    params = inspect.signature(model.forward).parameters
    width = _first(model.config, INPUT_WIDTHS)
    return {"embed_width": int(width)} if next(iter(params), None) == "hidden_states" and width else {}


def class_token(model: torch.nn.Module, names: list, dims: dict) -> dict:
    """``{"mask_seq": (sizes)}``: the attention mask's length, the text length plus the class token,
    where ``model`` prepends one to its ``hidden_states`` and takes both; else ``{}``."""
    if not getattr(model, "use_cls_token", False) or not {"hidden_states", "attention_mask"} <= set(names):
        return {}
    return {"mask_seq": tuple(v + 1 for v in dims["seq"])}


def optional(model: torch.nn.Module, names: list) -> list:
    """Of ``names`` (required parameters no maker knows), those the forward annotates as optional."""
    params = inspect.signature(model.forward).parameters
    return [n for n in names if n in params and "None" in str(params[n].annotation)]


MAKERS: dict[str, Any] = {
    "target_sizes": lambda m, s, g: torch.tensor([[s["grid"], s["grid"]]] * s["images"], dtype=torch.int64),
    "latents": lambda m, s, g: torch.randn(s["batch"], int(_first(m.config, ("hidden_size",)) or 128),
                                           s.get("frames", 16), generator=g),
}
AXES = {"latents": {0: "batch", 2: "frames"}, "target_sizes": {}}


def mask_axes(sizes: dict) -> dict | None:
    """The axes of an attention mask covering a class token (``class_token``; ``sizes``: the dims and
    fixed sizes of the set), else None."""
    return {0: "batch", 1: "mask_seq"} if "mask_seq" in sizes else None
