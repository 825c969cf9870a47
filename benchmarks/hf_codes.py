"""Token ids with one column per codebook, ``[batch, seq, codebooks]``: the input of a model that embeds
several codebooks' tokens at once through one table, each codebook's tokens shifted by its offset (a
buffer named ``*offsets``: Dia's decoder, Kyutai's speech-to-text model with its text column first,
Inkling's audio tower). ``code_sets`` gives their input sets (``hf_inputs.candidates`` tries them
after the generic ones); ``coded_makers`` wraps the id makers of ``hf_inputs`` so that the input the
set names (``fixed["coded"]``) gets the codebook axis.

``latent_map_sets``: a VQ-VAE encoder fed another tower's feature map (GLM-Image's: ``hidden_states``
``[batch, latent_channels, side, side]``, quantized to codebook indices), a 4 (then 6) patch square.

The codebook count is the offsets' length; every id is below the smallest step between two offsets
(a codebook's size) and the model's vocabulary, so that no codebook's tokens reach the next one's.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch


def offsets(model: torch.nn.Module) -> torch.Tensor | None:
    """The first 1-D integer buffer named ``*offsets`` of ``model`` with more than one entry, else None."""
    for name, buffer in model.named_buffers():
        if name.endswith("offsets") and buffer.dim() == 1 and buffer.numel() > 1 and not buffer.is_floating_point():
            return buffer
    return None


def code_sets(model: torch.nn.Module, params: Any, vocab: int) -> list:
    """``(names, dims, fixed)`` of a codebook model: its (decoder's, where it has an encoder) ids with a
    codebook axis; none where it has no offsets buffer."""
    shifts = offsets(model)
    if shifts is None:
        return []
    steps = [int(b - a) for a, b in zip(shifts.tolist(), shifts.tolist()[1:]) if b > a]
    fixed = {"code_axis": shifts.numel(), "code_vocab": max(4, min(steps + [vocab]))}
    batch, seq = {"batch": (2, 3)}, {"seq": (7, 11)}
    if getattr(model.config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        names = ["input_ids"] + (["attention_mask"] if "attention_mask" in params else []) + ["decoder_input_ids"]
        return [(names, batch | seq | {"decoder_seq": (5, 9)}, fixed | {"coded": "decoder_input_ids"})]
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    name = "audio_input_ids" if "audio_input_ids" in required else "input_ids"
    if name not in params:
        return []
    out = [([name], batch | seq, fixed | {"coded": name})]
    if "encoder_hidden_states" in params:  # a decoder alone (Dia's): its encoder's states beside its codes
        width = next((getattr(model.config, n) for n in ("cross_hidden_size", "encoder_hidden_size", "hidden_size")
                      if isinstance(getattr(model.config, n, None), int)), 128)
        out.append(([name, "encoder_hidden_states"], batch | seq, fixed | {"coded": name, "encoder_width": width}))
    return out


def latent_map_sets(model: torch.nn.Module, params: Any) -> list:
    """``(names, dims, fixed)`` of a quantizing encoder led by a feature map, else none."""
    channels = getattr(model.config, "latent_channels", None)
    if next(iter(params), None) != "hidden_states" or not isinstance(channels, int) \
            or not hasattr(model, "quantize"):
        return []
    return [(["hidden_states"], {"batch": (2, 3), "image": (4, 6)}, {"pixels": "image", "channels": channels})]


def coded_makers(makers: dict) -> dict:
    """``makers``' id makers wrapped: the input a set names ``coded`` made ``[batch, length, codebooks]``."""
    def wrap(name: str, plain: Callable) -> Callable:
        def make(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
            if s.get("coded") != name:
                return plain(m, s, g)
            length = s["decoder_seq"] if name == "decoder_input_ids" else s["seq"]
            return torch.randint(0, s["code_vocab"], (s["batch"], length, s["code_axis"]), generator=g)
        return make

    return {n: wrap(n, makers[n]) for n in ("input_ids", "decoder_input_ids", "audio_input_ids") if n in makers}
