"""Input sets of the model families whose forward takes more than one main input, the same rule for
every class of a family (``hf_inputs.candidates`` tries them after the generic sets), with the makers
and the dynamic axes of the inputs they lay out:

* patch sequences with a grid (Qwen2-VL's vision tower and its kin: ``forward(hidden_states |
  pixel_values, grid_thw)``): one image of ``2 * merge`` by ``2 * merge`` patches, ``[patches,
  channels * temporal_patch_size * patch_size**2]`` (then without the temporal factor), its grid
  ``[[1, h, w]]``;
* videos (``num_frames`` in the config, or ``pixel_values_videos`` in the forward): ``[batch,
  frames, channels, side, side]``, then ``[batch, channels, frames, side, side]``, then the frames in the
  batch ``[batch * frames, channels, side, side]`` (X-CLIP's vision tower); alone, then with token ids;
* image pairs (keypoint matchers: SuperGlue, LightGlue): ``[batch, 2, channels, side, side]``;
* time series (``past_values``): ``[batch, context (+ the largest lag)]`` (or ``[..., channels]``)
  with the time features, observed mask and future values the forward takes, the lengths from the
  config;
* LXMERT's regions (``visual_feats``, ``visual_pos``) beside its text;
* Pix2Struct's ``flattened_patches`` (each patch's row, column and pixels);
* patch sequences with their shapes (SigLIP2's ``pixel_attention_mask`` and ``spatial_shapes``):
  ``[batch, patches, channels * patch_size**2]`` of a square grid; the same with each patch's (x, y)
  (Gemma 4's ``pixel_position_ids``);
* images under other names (BridgeTower's ``image``, SegGPT's prompt image and mask), a speech
  encoder-decoder's waveform ``inputs`` with decoder ids;
* trajectories (Decision Transformer's ``states``, ``actions``, ``returns_to_go``, ``timesteps``);
* log-mel frames (Gemma 3n's ``audio_mel``, ``[batch, frames, input_feat_size]``) and their mask;
* spectrogram vocoders (``spectrogram``): ``[batch, frames, model_in_dim]``;
* SAM's parts, a prompt encoder's points and a mask decoder's embeddings (``hf_prompts.py``);
* parts fed by another part: a codec decoder's latents, a decoder's encoder states, a tower's raw
  hidden states at its input width, an optional parameter the forward requires (``hf_fed.py``).

A maker is ``maker(model, sizes, generator) -> tensor`` as in ``hf_inputs``; ``sizes`` holds the dims
at the size being made and the set's fixed sizes.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

import hf_fed
import hf_prompts


def _first(config: Any, names: tuple, default: Any = None) -> Any:
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def _int(value: Any) -> Any:
    return value[0] if isinstance(value, (list, tuple)) else value


def _vision(config: Any) -> Any:
    return getattr(config, "vision_config", None) or config


# ------------------------------------------------------------------------------------ families
def _grid_sets(model: torch.nn.Module, params: dict) -> list:
    grid = next((n for n in ("grid_thw", "image_grid_thw") if n in params), None)
    if grid is None or "input_ids" in params:
        return []
    vision = _vision(model.config)
    patch = int(_int(_first(vision, ("patch_size",), 14)))
    temporal = int(_first(vision, ("temporal_patch_size", "patch_temporal"), 1))
    channels = int(_first(vision, ("in_channels", "num_channels", "in_chans"), 3))
    merge = int(_int(_first(vision, ("spatial_merge_size", "merge_size", "merge_kernel_size"), 2)))
    main = "hidden_states" if "hidden_states" in params else "pixel_values"
    names = [main, grid] + (["merge_sizes"] if "merge_sizes" in params else [])
    fixed = {"grid": 2 * max(merge, 1), "t": 1, "merge": merge, "channels": channels, "patch": patch}
    widths = dict.fromkeys((channels * temporal * patch * patch, channels * patch * patch))
    return [(names, {}, fixed | {"pixels": "patches", "width": w}) for w in widths] + [
        (names, {}, fixed | {"pixels": "patch_images"})]


def _video_sets(model: torch.nn.Module, params: dict, image: dict, fixed: dict) -> list:
    config = _vision(model.config)
    frames = _first(config, ("num_frames", "frames_per_clip", "num_frames_per_video"))
    name = next((n for n in ("pixel_values_videos", "pixel_values") if n in params), None)
    if name is None or (frames is None and name != "pixel_values_videos"):
        return []
    tubelet = _int(_first(config, ("tubelet_size",), 1))
    frames = int(frames) if isinstance(frames, int) else 2 * int(tubelet)
    out = []
    for text in ([], ["input_ids"]) if "input_ids" in params else ([],):  # a video alone, then with a caption
        names, dims = [name] + text, {"batch": (2, 3)} | image | ({"seq": (7, 11)} if text else {})
        out += [(names, dims, fixed | {"pixels": layout, "frames": frames})
                for layout in ("video", "video_cf", "frames_in_batch")]
    return out


def _pair_sets(model: torch.nn.Module, params: dict, image: dict, fixed: dict) -> list:
    """Keypoint matchers (SuperGlue, LightGlue): two images of one scene, ``[batch, 2, channels, side, side]``."""
    if "pixel_values" not in params or "input_ids" in params or not image:
        return []
    return [(["pixel_values"], {"batch": (2, 3)} | image, fixed | {"pixels": "pair"})]


def _series_sets(model: torch.nn.Module, params: dict) -> list:
    if "past_values" not in params:
        return []
    config = model.config
    context = int(_first(config, ("context_length",), 32))
    lags = _first(config, ("lags_sequence",))
    length = context + (max(lags) if isinstance(lags, (list, tuple)) and lags else 0)
    channels = _first(config, ("num_input_channels", "input_size"))
    fixed = {"length": length, "prediction": int(_first(config, ("prediction_length", "horizon_length"), 8)),
             "ts_channels": int(channels) if isinstance(channels, int) and channels > 1 else 0,
             "time_features": int(_first(config, ("num_time_features",), 0)) + int(
                 _first(config, ("num_dynamic_real_features",), 0))}
    names = ["past_values"] + [n for n in ("past_time_features", "past_observed_mask", "future_values",
                                           "future_time_features", "past_values_padding", "freq")
                               if n in params and (n in _required(model) or n in ("past_time_features",
                                                                                 "past_observed_mask"))]
    out = [(names, {"batch": (2, 3)}, fixed)]
    if fixed["ts_channels"] == 0:
        out.append((names, {"batch": (2, 3)}, fixed | {"ts_channels": 1}))
    return out


def _trajectory_sets(model: torch.nn.Module, params: dict) -> list:
    """Decision Transformer's trajectories: states, actions, returns to go and timesteps over ``seq``."""
    if "states" not in params or "actions" not in params:
        return []
    names = [n for n in ("states", "actions", "rewards", "returns_to_go", "timesteps", "attention_mask") if n in params]
    config = model.config
    return [(names, {"batch": (2, 3), "seq": (7, 11)}, {"state_dim": int(_first(config, ("state_dim",), 4)),
                                                        "act_dim": int(_first(config, ("act_dim",), 4))})]


def _navit_sets(model: torch.nn.Module, params: dict) -> list:
    if "spatial_shapes" not in params or "pixel_attention_mask" not in params:
        return []
    vision = _vision(model.config)
    patch = int(_int(_first(vision, ("patch_size",), 16)))
    channels = int(_first(vision, ("num_channels",), 3))
    side = int(int(_first(vision, ("num_patches",), 16)) ** 0.5)
    names = ["pixel_values", "pixel_attention_mask", "spatial_shapes"]
    names += [n for n in ("input_ids",) if n in params]
    dims = {"batch": (2, 3)} | ({"seq": (7, 11)} if "input_ids" in names else {})
    return [(names, dims, {"pixels": "navit", "grid": side, "width": channels * patch * patch})]


def _positioned_sets(model: torch.nn.Module, params: dict) -> list:
    """Patches with their (x, y) positions (Gemma 4's vision tower): ``pixel_values`` ``[batch,
    patches, channels * patch_size**2]`` of a square grid of ``2 * pooling_kernel_size`` patches a
    side, ``pixel_position_ids`` ``[batch, patches, 2]``."""
    if "pixel_position_ids" not in params or "pixel_values" not in params:
        return []
    vision = _vision(model.config)
    patch = int(_int(_first(vision, ("patch_size",), 16)))
    channels = int(_first(vision, ("num_channels",), 3))
    side = 2 * int(_first(vision, ("pooling_kernel_size",), 2))
    return [(["pixel_values", "pixel_position_ids"], {"batch": (2, 3)},
             {"pixels": "navit", "grid": side, "width": channels * patch * patch})]


def _mel_sets(model: torch.nn.Module, params: dict) -> list:
    """Gemma 3n's audio tower: ``audio_mel`` ``[batch, frames, input_feat_size]`` and its padding mask."""
    if "audio_mel" not in params:
        return []
    bins = int(_first(model.config, ("input_feat_size", "num_mel_bins"), 128))
    names = ["audio_mel"] + (["audio_mel_mask"] if "audio_mel_mask" in params else [])
    return [(names, {"batch": (2, 3)}, {"bins": bins, "frames": 64})]


def _image_sets(model: torch.nn.Module, params: dict, image: dict, fixed: dict) -> list:
    """Images under other names: BridgeTower's vision tower's ``image``; SegGPT's prompt image and mask
    beside its image."""
    required = _required(model)
    if "image" in required:
        image, fixed = image or {"image": (64, 96)}, fixed or {"channels": 3}
        return [(["image"], {"batch": (2, 3)} | image, fixed)]
    if "prompt_pixel_values" in required and image:
        names = ["pixel_values", "prompt_pixel_values"] + (["prompt_masks"] if "prompt_masks" in params else [])
        return [(names, {"batch": (2, 3)} | image, fixed)]
    return []


def _speech_sets(model: torch.nn.Module, params: dict) -> list:
    """A speech encoder-decoder led by ``inputs`` (SpeechEncoderDecoder): a waveform and decoder ids."""
    if getattr(model, "main_input_name", None) != "inputs" or "decoder_input_ids" not in params:
        return []
    dims = {"batch": (2, 3), "samples": (3200, 4800), "decoder_seq": (5, 9)}
    return [(["inputs", "decoder_input_ids"], dims, {"layout": "samples"})]


def _flattened_sets(model: torch.nn.Module, params: dict) -> list:
    """Pix2Struct's and Kosmos-2.5's ``flattened_patches``: ``[batch, patches, 2 + patch_embed_hidden_size]``,
    each patch's row and column (1-based) then its pixels; with decoder ids where the model decodes."""
    if "flattened_patches" not in params:
        return []
    vision = _vision(model.config)
    names = ["flattened_patches"]
    dims = {"batch": (2, 3)}
    if getattr(model.config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        names.append("decoder_input_ids")
        dims["decoder_seq"] = (5, 9)
    return [(names, dims, {"grid": 4, "width": int(_first(vision, ("patch_embed_hidden_size",), 768))})]


def _flattened(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    side = s["grid"]
    rows = torch.arange(1, side + 1).repeat_interleave(side).float()
    cols = torch.arange(1, side + 1).repeat(side).float()
    place = torch.stack([rows, cols], -1).expand(s["batch"], side * side, 2)
    return torch.cat([place, torch.randn(s["batch"], side * side, s["width"], generator=g)], -1)


def _region_sets(model: torch.nn.Module, params: dict) -> list:
    """LXMERT's detected regions beside its text: ``visual_feats`` ``[batch, regions, visual_feat_dim]``
    and their boxes ``visual_pos`` ``[batch, regions, 4]``."""
    if "visual_feats" not in params or "visual_pos" not in params:
        return []
    config = model.config
    fixed = {"regions": 6, "feat": int(_first(config, ("visual_feat_dim",), 2048)),
             "pos": int(_first(config, ("visual_pos_dim",), 4))}
    return [(["input_ids", "visual_feats", "visual_pos"], {"batch": (2, 3), "seq": (7, 11)}, fixed)]


def _vocoder_sets(model: torch.nn.Module, params: dict) -> list:
    """A vocoder's spectrogram: ``spectrogram`` ``[batch, frames, bins]`` (SpeechT5's HiFi-GAN),
    ``mel_spectrogram`` ``[batch, bins, frames]`` (BigVGAN)."""
    bins = int(_first(model.config, ("model_in_dim", "num_mel_bins", "mel_dim"), 80))
    dims = {"batch": (2, 3), "frames": (16, 24)}
    return [([n], dims, {"bins": bins}) for n in ("spectrogram", "mel_spectrogram") if n in params]


def family_sets(model: torch.nn.Module, image: dict, fixed: dict) -> list:
    """``(names, dims, fixed)`` of the input sets of the families ``model``'s forward belongs to."""
    params = inspect.signature(model.forward).parameters
    return (_grid_sets(model, params) + _video_sets(model, params, image, fixed) + _series_sets(model, params)
            + _pair_sets(model, params, image, fixed) + _trajectory_sets(model, params)
            + _image_sets(model, params, image, fixed) + _speech_sets(model, params) + _flattened_sets(model, params)
            + _navit_sets(model, params) + _positioned_sets(model, params) + _mel_sets(model, params)
            + _vocoder_sets(model, params) + _region_sets(model, params) + hf_fed.latent_sets(model, params)
            + hf_fed.conv_sets(model, params) + hf_fed.packed_sets(model, params))


def _required(model: torch.nn.Module) -> set:
    params = inspect.signature(model.forward).parameters
    return {n for n, p in params.items() if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

# ------------------------------------------------------------------------------------ makers
def _grid(s: dict) -> torch.Tensor:
    return torch.tensor([[s.get("t", 1), s.get("grid", 4), s.get("grid", 4)]], dtype=torch.int64)


def pixels(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    """Pixels in the set's layout: a square image ``[batch, channels, side, side]``, a video, patches."""
    layout = s.get("pixels", "image")
    if layout == "patches":
        return torch.randn(s["t"] * s["grid"] ** 2, s["width"], generator=g)
    if layout == "packed":
        return hf_fed.packed(m, s, g)
    if layout == "patch_images":
        return torch.randn(s["t"] * s["grid"] ** 2, s["channels"], s["patch"], s["patch"], generator=g)
    if layout == "pair":
        return torch.randn(s["batch"], 2, s["channels"], s["image"], s["image"], generator=g)
    if layout == "navit":
        return torch.randn(s["batch"], s["grid"] ** 2, s["width"], generator=g)
    if layout == "video":
        return torch.randn(s["batch"], s["frames"], s["channels"], s["image"], s["image"], generator=g)
    if layout == "frames_in_batch":  # X-CLIP's vision tower: the frames of each video one after another
        return torch.randn(s["batch"] * s["frames"], s["channels"], s["image"], s["image"], generator=g)
    if layout == "video_cf":
        return torch.randn(s["batch"], s["channels"], s["frames"], s["image"], s["image"], generator=g)
    return torch.randn(s["batch"], s["channels"], s["image"], s["image"], generator=g)


def _series(s: dict, length: str, g: torch.Generator) -> torch.Tensor:
    shape = (s["batch"], s[length]) + ((s["ts_channels"],) if s["ts_channels"] else ())
    return torch.randn(*shape, generator=g)


def _width(m: torch.nn.Module) -> int:
    config = m.config
    return int(_first(config, ("hidden_size", "d_model", "embed_dim", "dim"), 128))


def embeds(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    """Hidden states ``[batch, seq, hidden_size]`` (a tower fed by another: a multimodal encoder's
    ``hidden_states``, a Q-Former's ``query_embeds``), or the set's pixels or waveform where it lays
    them out."""
    if s.get("pixels") in ("patches", "patch_images", "image"):  # an image under hidden_states (Florence-2's DaViT)
        return pixels(m, s, g)
    if s.get("layout") == "samples":
        return torch.randn(s["batch"], s["samples"], generator=g)
    return torch.randn(s["batch"], s["seq"], _width(m), generator=g)


EMBEDS = ("hidden_states", "inputs_embeds", "query_embeds", "context", "encoder_hidden_states", "action_embeds",
          "inputs")

_FAMILY_MAKERS = {n: embeds for n in EMBEDS} | {n: pixels for n in ("image", "prompt_pixel_values", "prompt_masks")} | {
    "pixel_values_videos": pixels,
    "grid_thw": lambda m, s, g: _grid(s),
    "image_grid_thw": lambda m, s, g: _grid(s),
    "merge_sizes": lambda m, s, g: torch.tensor([s["merge"]], dtype=torch.int64),
    "pixel_attention_mask": lambda m, s, g: torch.ones(s["batch"], s["grid"] ** 2, dtype=torch.int64),
    "pixel_position_ids": lambda m, s, g: torch.stack(torch.meshgrid(
        torch.arange(s["grid"]), torch.arange(s["grid"]), indexing="xy"), -1).reshape(1, -1, 2).expand(
        s["batch"], -1, -1).contiguous(),
    "spatial_shapes": lambda m, s, g: hf_prompts.spatial_shapes(m, s, g) if s.get("prompt") else torch.tensor(
        [[s["grid"], s["grid"]]] * s["batch"], dtype=torch.int64),
    "flattened_patches": _flattened,
    "visual_feats": lambda m, s, g: torch.randn(s["batch"], s["regions"], s["feat"], generator=g),
    "visual_pos": lambda m, s, g: torch.rand(s["batch"], s["regions"], s["pos"], generator=g),
    "input_features_mask": lambda m, s, g: torch.ones(s["batch"], s["frames"], dtype=torch.int64),
    "feature_lens": lambda m, s, g: torch.tensor([s["frames"]], dtype=torch.int64),
    "aftercnn_lens": lambda m, s, g: torch.tensor([(s["frames"] - 1) // 2 + 1], dtype=torch.int64),  # stride 2
    "audio_mel": lambda m, s, g: torch.randn(s["batch"], s["frames"], s["bins"], generator=g),
    "audio_mel_mask": lambda m, s, g: torch.zeros(s["batch"], s["frames"], dtype=torch.bool),  # nothing padded
    "past_values": lambda m, s, g: _series(s, "length", g),
    "past_observed_mask": lambda m, s, g: torch.ones_like(_series(s, "length", g)),
    "future_values": lambda m, s, g: _series(s, "prediction", g),
    "past_time_features": lambda m, s, g: torch.randn(s["batch"], s["length"], s["time_features"], generator=g),
    "future_time_features": lambda m, s, g: torch.randn(s["batch"], s["prediction"], s["time_features"],
                                                        generator=g),
    "past_values_padding": lambda m, s, g: torch.zeros(s["batch"], s["length"]),
    "freq": lambda m, s, g: torch.zeros(s["batch"], 1, dtype=torch.int64),
    "spectrogram": lambda m, s, g: torch.randn(s["batch"], s["frames"], s["bins"], generator=g),
    "mel_spectrogram": lambda m, s, g: torch.randn(s["batch"], s["bins"], s["frames"], generator=g),
    "states": lambda m, s, g: torch.randn(s["batch"], s["seq"], s["state_dim"], generator=g),
    "actions": lambda m, s, g: torch.randn(s["batch"], s["seq"], s["act_dim"], generator=g),
    "rewards": lambda m, s, g: torch.randn(s["batch"], s["seq"], 1, generator=g),
    "returns_to_go": lambda m, s, g: torch.randn(s["batch"], s["seq"], 1, generator=g),
    "timesteps": lambda m, s, g: torch.arange(s["seq"]).expand(s["batch"], s["seq"]).contiguous(),
}


def _family_axes(name: str, fixed: dict) -> dict | None:
    """``{axis: dim name}`` of an input this module lays out, else None."""
    layout = fixed.get("pixels")
    if name in ("image", "prompt_pixel_values", "prompt_masks"):
        return {0: "batch", 2: "image", 3: "image"}
    if name == "inputs" and fixed.get("layout") == "samples":
        return {0: "batch", 1: "samples"}
    if name in ("pixel_values", "pixel_values_videos", "hidden_states") and layout:
        return {"video": {0: "batch", 3: "image", 4: "image"}, "video_cf": {0: "batch", 3: "image", 4: "image"},
                "pair": {0: "batch", 3: "image", 4: "image"}, "navit": {0: "batch"}, "packed": {},
                "frames_in_batch": {0: "batch", 2: "image", 3: "image"},
                "image": {0: "batch", 2: "image", 3: "image"}}.get(layout, {})
    if name == "spatial_shapes" and fixed.get("prompt"):  # SAM 3's one feature map size
        return {}
    if name in ("pixel_attention_mask", "spatial_shapes", "pixel_position_ids", "input_features_mask", "past_values",
                "past_observed_mask", "future_values", "past_time_features", "future_time_features",
                "past_values_padding", "freq"):
        return {0: "batch"}
    if name == "spectrogram":
        return {0: "batch", 1: "frames"}
    if name == "mel_spectrogram":
        return {0: "batch", 2: "frames"}
    if name == "task_inputs":
        return {0: "batch"}
    if name in ("qformer_input_ids", "audio_input_ids", "states", "actions", "rewards", "returns_to_go",
                "timesteps") or name in EMBEDS:
        return {0: "batch", 1: "seq"}
    if name in ("audio_mel", "audio_mel_mask", "flattened_patches", "visual_feats", "visual_pos"):
        return {0: "batch"}
    if name in ("grid_thw", "image_grid_thw", "merge_sizes", "feature_lens", "aftercnn_lens"):
        return {}
    return None
