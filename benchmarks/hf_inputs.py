"""Example inputs of a transformers model, chosen by its forward's parameter names and its config.

``candidates(model)`` gives the input sets (``Inputs``: tensors by name, which dims are dynamic) to
try in order. First the generic ones, by the model's main input: token ids (with an attention mask,
decoder ids, boxes, an image or a spectrogram where the forward takes them; a row per codebook
where the config has several), a square image (alone,
with decoder ids, with a text holding the image's placeholder tokens), a waveform (``[batch,
samples]``, ``[batch, channels, samples]``, frames by bins), a spectrogram (bins by frames, frames
by bins, with a channel axis; one clip with its lengths where the forward takes ``feature_lens``).
Then the sets of the families whose forward takes more (``hf_families.py``: patch grids, videos,
image pairs, time series, trajectories, SAM's parts, parts fed by another part...), and last those
of ``hf_codes.py`` (ids with a codebook axis, a VQ encoder's feature map), ``hf_patches.py``
(channels-last patches, an image tiled at scales) and ``hf_placed.py`` (an image placed in the text
by a mask or placeholders, questions marked in a prompt).

``fill(model, names, dims, fixed)`` then gives a forward's required parameters the set leaves out where a
maker of this module knows them by name (BLIP-2's ``input_ids`` beside its image, InstructBLIP's
``qformer_input_ids``; a tower's ``hidden_states`` or ``inputs_embeds`` fed by another,
``[batch, seq, hidden_size]``), at the text length.

A maker is ``maker(model, sizes, generator) -> tensor``; ``sizes`` holds the dims at the size being
made and the set's fixed sizes.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch

import hf_codes
import hf_fed
import hf_placed
import hf_parts
import hf_patches
import hf_prompts
from hf_families import _FAMILY_MAKERS, EMBEDS, _family_axes, _first, _required, _vision, embeds, family_sets, pixels

VOCAB = 1000
SIZES = {"batch": (2, 3), "seq": (7, 11), "decoder_seq": (5, 9)}  # example size, other size


def _vocab(model: torch.nn.Module) -> int:
    """The token ids' bound: the text config's vocabulary, within every sub-config's smaller one (Dia's
    byte-level encoder beside its decoder; FastSpeech 2's phonemes under its ``model_config``)."""
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    vocab = int(getattr(text, "vocab_size", None) or getattr(config, "vocab_size", None) or VOCAB)
    subs = [getattr(c, "vocab_size", None) for c in _configs(config)]
    return min([vocab] + [v for v in subs if isinstance(v, int) and v >= 16])



IDS = ("input_ids", "qformer_input_ids", "audio_input_ids", "decoder_input_ids")


def fill(model: torch.nn.Module, names: list, dims: dict, fixed: dict) -> tuple | None:
    """``(names, dims, fixed)`` with the forward's required parameters ``names`` leaves out, where a
    maker makes them (token ids at the text length ``seq``, a waveform of ``samples``,
    a spectrogram of the config's bins); None where one is left that no maker knows."""
    missing = [n for n in sorted(_required(model)) if n not in names]
    if not missing:
        return names, dims, fixed
    unknown = [n for n in missing if n not in MAKERS]
    if unknown and hf_fed.optional(model, unknown) != unknown:
        return None
    params = inspect.signature(model.forward).parameters
    names = [n for n in names if n in params]  # not the generic token ids a ``**kwargs`` would swallow
    dims = dict(dims)
    if any(n in IDS or n in EMBEDS for n in missing):
        dims.setdefault("seq", (7, 11))
    fixed = dict(fixed) | ({"none": unknown} if unknown else {})
    if "hidden_states" in missing:
        fixed |= hf_fed.input_width(model)
    if "input_values" in missing:
        dims.setdefault("samples", (3200, 4800))  # a codec's mono waveform, [batch, 1, samples]
        fixed = {"layout": "channels", "channels": 1} | fixed
    if "input_features" in missing:
        bins = mel_bins(model.config)
        fixed = {"bins": bins, "frames": 64, "bins_first": False} | fixed
    names = names + missing
    return names, dims | hf_fed.class_token(model, names, dims), fixed


BINS = ("feature_projection_input_dim", "num_mel_bins", "feature_size", "input_feat_per_channel", "n_mels",
        "num_mel_bins_encoder")


def mel_bins(config: Any) -> int:
    """The feature bins a speech model's input takes: its config's, else its audio encoder's (80 where
    neither names them); Wav2Vec2-BERT's stacked frames (``feature_projection_input_dim``) first."""
    return next((getattr(c, n) for c in _configs(config) for n in BINS if isinstance(getattr(c, n, None), int)), 80)


def other_bins(model: torch.nn.Module, bins: int) -> list:
    """Feature widths to try beside ``bins``: the input width of the model's first linear layer taking a
    multiple of ``bins`` (frames stacked into one vector: Fun-ASR's 7, Granite Speech 5's 4); 128 (log-mel
    bins of Whisper v3, Gemma) where no config names its bins."""
    first = next((m.in_features for m in model.modules() if isinstance(m, torch.nn.Linear)
                  and m.in_features % bins == 0 and m.in_features > bins), None)
    named = any(isinstance(getattr(c, n, None), int) for c in _configs(model.config) for n in BINS)
    return [w for w in dict.fromkeys([first, None if named else 128]) if w]


def _configs(config: Any) -> list:
    from transformers import PretrainedConfig

    return [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]



# ------------------------------------------------------------------------------- generic sets
@dataclasses.dataclass
class Inputs:
    """Generic inputs of a model: which tensors (by forward parameter), and which of their dims
    are dynamic (``dims``: name -> example and other size; the rest of the sizes fixed)."""

    names: list
    dims: dict  # dim name -> (example size, other size)
    fixed: dict  # name -> fixed sizes used by the makers (image side, channels, audio bins...)

    def make(self, model: torch.nn.Module, which: int, seed: int = 0) -> dict:
        """The tensors at the example (``which=0``) or the other (``1``) sizes of the dynamic dims."""
        size = {d: v[which] for d, v in self.dims.items()}
        size |= {d: v for d, v in self.fixed.items() if d not in size}
        gen = torch.Generator().manual_seed(seed + which)
        return {name: MAKERS[name](model, size, gen) if name in MAKERS else None for name in self.names}

    def dynamic_shapes(self) -> dict:
        """``{input: {axis: dim name}}`` of the dynamic dims."""
        out = {}
        for name in self.names:
            axes = hf_fed.mask_axes(self.dims | self.fixed) if name == "attention_mask" else None
            axes = axes or _axes(name, self.fixed)
            if isinstance(axes, list):  # a list of tensors (SAM 2's high_resolution_features): axes of each
                out[name] = [{a: d for a, d in ax.items() if d in self.dims} or None for ax in axes]
                continue
            axes = {axis: dim for axis, dim in axes.items() if dim in self.dims}
            out[name] = axes or None
        return out


def _ids(model, size, gen, length="seq"):
    rows = size["batch"] * size.get("codebooks", 1)  # MusicGen's decoder: one row per codebook of each item
    ids = torch.randint(3, max(4, min(_vocab(model), VOCAB)), (rows, size[length]), generator=gen)
    token, count = size.get("image_token"), size.get("image_tokens", 0)
    if length == "seq" and token is not None and count:  # the image's placeholders, then the text
        ids = torch.cat([torch.full((size["batch"], count), token), torch.where(ids == token, 3, ids)], 1)
    return ids


def _image_tokens(config: Any) -> dict:
    """``{"image_token": id, "image_tokens": count}`` of a model taking a fixed count of image
    placeholders in its text (BLIP-2's query tokens), else ``{}``."""
    token = next((getattr(config, n) for n in ("image_token_id", "image_token_index")
                  if isinstance(getattr(config, n, None), int)), None)
    count = next((getattr(config, n) for n in ("num_query_tokens", "image_seq_length", "mm_tokens_per_image")
                  if isinstance(getattr(config, n, None), int)), None)
    return {"image_token": token, "image_tokens": count} if token is not None and count else {}


def _image_channels(model) -> int:
    config = model.config
    vision = getattr(config, "vision_config", None) or config
    return int(getattr(vision, "num_channels", None) or getattr(config, "num_channels", 3) or 3)


def _values_shape(s: dict) -> tuple:
    """A waveform ``[samples]``, ``[channels, samples]``, or a spectrogram ``[frames, bins]``."""
    layout = s.get("layout", "samples")
    if layout == "channels":
        return s["channels"], s["samples"]
    if layout == "frames":
        return s["frames"], s["bins"]
    return (s["samples"],)


MAKERS = {
    "input_ids": lambda m, s, g: _ids(m, s, g),
    "attention_mask": lambda m, s, g: torch.ones(s["batch"], s.get("mask_seq", s["seq"]), dtype=torch.int64),
    "decoder_input_ids": lambda m, s, g: _ids(m, s, g, "decoder_seq"),
    "pixel_values": pixels,
    "input_values": lambda m, s, g: torch.randn(s["batch"], *_values_shape(s), generator=g),
    "input_features": lambda m, s, g: torch.randn(*(() if s.get("unbatched") else (s["batch"],)), *(
        (1,) if s.get("channel") else ()), *(
        (s["bins"], s["frames"]) if s["bins_first"] else (s["frames"], s["bins"])), generator=g),
    "noise": lambda m, s, g: torch.rand(s["batch"], _patches(m, s["image"]), generator=g),
    "bbox": lambda m, s, g: torch.sort(torch.randint(0, 1000, (s["batch"], s["seq"], 4), generator=g), -1)[0][
        ..., [0, 1, 2, 3]],
    "qformer_input_ids": lambda m, s, g: _ids(m, s, g),
    "audio_input_ids": lambda m, s, g: _ids(m, s, g),
    "image_sizes": lambda m, s, g: torch.tensor([[s["image"], s["image"]]] * s["batch"]),  # Emu3's VQ-VAE
    "task_inputs": lambda m, s, g: torch.randint(3, max(4, min(_vocab(m), VOCAB)), (  # OneFormer's task prompt
        s["batch"], int(_first(m.config, ("task_seq_len",), 8))), generator=g),
} | {n: f for n, f in _FAMILY_MAKERS.items() if n != "pixel_values"} | hf_prompts.MAKERS | hf_fed.MAKERS | {
    "encoder_hidden_states": lambda m, s, g: torch.randn(s["batch"], s["seq"], s["encoder_width"], generator=g)
    if "encoder_width" in s else hf_prompts.flat(m, s, g) if s.get("prompt") else embeds(m, s, g),
    "hidden_states": lambda m, s, g: hf_fed.conv_states(m, s, g) if "conv" in s else torch.randn(
        s["batch"], s["seq"], s["embed_width"], generator=g) if "embed_width" in s else embeds(m, s, g),
} | hf_parts.MAKERS | {"pixel_values": lambda m, s, g: hf_parts.tiles(m, s, g) if s.get("pixels") in hf_parts.LAYOUTS
                       else pixels(m, s, g)}
MAKERS |= hf_codes.coded_makers(MAKERS)  # ids with a codebook axis where a set names them
MAKERS |= hf_placed.MAKERS | {"pixel_values": hf_patches.wrap_pixels(MAKERS["pixel_values"])}
MAKERS |= hf_patches.byte_makers(MAKERS)
AXES = {
    "input_ids": {0: "batch", 1: "seq"},
    "attention_mask": {0: "batch", 1: "seq"},
    "decoder_input_ids": {0: "batch", 1: "decoder_seq"},
    "pixel_values": {0: "batch", 2: "image", 3: "image"},  # square images: one dim
    "input_values": {0: "batch", 1: "samples"},
    "input_features": {0: "batch"},
    "bbox": {0: "batch", 1: "seq"},
    "noise": {0: "batch"},
    "image_sizes": {0: "batch"},
} | hf_fed.AXES | hf_placed.AXES | hf_patches.BYTE_AXES


def _patches(model: torch.nn.Module, side: int) -> int:
    """The patch count of a square image of ``side`` pixels (ViTMAE's ``noise``: one value per patch)."""
    patch = getattr(_vision(model.config), "patch_size", 16)
    patch = patch[0] if isinstance(patch, (list, tuple)) else patch
    return (side // patch) ** 2


def _axes(name: str, fixed: dict) -> dict:
    """``{axis: dim name}`` of an input, by the layout of a waveform (``[batch, channels, samples]``:
    samples is axis 2)."""
    if name == "input_features" and fixed.get("unbatched"):
        return {}
    if name == "input_values" and fixed.get("layout") == "channels":
        return {0: "batch", 2: "samples"}
    if name in fixed.get("none", ()):
        return {}
    if name == "hidden_states" and fixed.get("conv"):
        return hf_fed.conv_axes(fixed)
    if hf_parts.axes(name, fixed) is not None:
        return hf_parts.axes(name, fixed)
    family = _family_axes(name, fixed)
    if family is None:
        family = hf_prompts.axes(name, fixed)
    return AXES[name] if family is None else family


def _image_dims(model: torch.nn.Module) -> tuple[dict, dict]:
    """``(dims, fixed)`` of square images of the vision config's size; the other size two patches
    (or 32 pixels) more."""
    vision = _vision(model.config)
    side = getattr(vision, "image_size", None)
    side = side[0] if isinstance(side, (list, tuple)) else side
    side = int(side) if isinstance(side, int) else 64
    patch = getattr(vision, "patch_size", None)
    patch = patch[0] if isinstance(patch, (list, tuple)) else patch
    step = 2 * patch if isinstance(patch, int) and patch > 0 else 32
    return {"image": (side, side + step)}, {"channels": _image_channels(model)}


def candidates(model: torch.nn.Module) -> list[Inputs]:
    """Input sets to try, in order, for ``model`` (by its main input and ``forward``'s parameters)."""
    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    config = model.config
    batch = {"batch": SIZES["batch"]}
    out = [Inputs(*s) for s in hf_prompts.prompt_sets(model)]  # a part of SAM: its prompts lead
    out += [Inputs(*s) for s in hf_parts.part_sets(model, params)]  # a part fed by another: its inputs lead
    if main == "pixel_values" or ("pixel_values" in params and "input_ids" not in params):
        dims, fixed = _image_dims(model)
        out.append(Inputs(["pixel_values"], batch | dims, fixed))
        if "pixel_values" not in params and "hidden_states" in _required(model):  # its image named hidden_states
            out.append(Inputs(["hidden_states"], batch | dims, fixed | {"pixels": "image"}))
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:  # an image to text
            decoder = {"decoder_seq": SIZES["decoder_seq"]}
            out.append(Inputs(["pixel_values", "decoder_input_ids"], batch | dims | decoder, fixed))
        if "input_ids" in params:  # an image-text model led by its image (InstructBLIP): with a text
            out.append(Inputs(["pixel_values", "input_ids"], batch | dims | {"seq": SIZES["seq"]},
                              fixed | _image_tokens(config)))
    elif main == "input_values":
        audio = {"samples": (3200, 4800)}
        out.append(Inputs(["input_values"], batch | audio, {"layout": "samples"}))
        channels = getattr(config, "audio_channels", None) or 1
        out.append(Inputs(["input_values"], batch | audio, {"layout": "channels", "channels": channels}))
        bins = next((getattr(config, n) for n in ("num_mel_bins", "feature_size") if
                     isinstance(getattr(config, n, None), int)), 128)
        frames = getattr(config, "max_length", None)
        out.append(Inputs(["input_values"], batch, {"layout": "frames", "bins": bins,
                                                    "frames": frames if isinstance(frames, int) else 1024}))
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:  # Moonshine
            decoder = batch | audio | {"decoder_seq": SIZES["decoder_seq"]}
            out.append(Inputs(["input_values", "decoder_input_ids"], decoder, {"layout": "samples"}))
    elif main == "input_features":
        bins = mel_bins(config)  # the model's or its audio encoder's
        source = getattr(config, "max_source_positions", None)
        frames = 2 * source if isinstance(source, int) else 64
        window = getattr(config, "n_window", None)
        if isinstance(window, int) and window > 0:  # an encoder reading its frames in windows of 2 * n_window
            frames = 2 * window
        names = ["input_features"] + (["decoder_input_ids"] if getattr(config, "is_encoder_decoder", False)
                                      and "decoder_input_ids" in params else [])
        dims = batch | ({"decoder_seq": SIZES["decoder_seq"]} if len(names) > 1 else {})
        for first in (True, False):
            out.append(Inputs(names, dims, {"bins": bins, "frames": frames, "bins_first": first}))
        out.append(Inputs(names, dims, {"bins": bins, "frames": frames, "bins_first": False, "channel": True}))
        for wide in other_bins(model, bins):  # stacked frames (Fun-ASR's), 128 bins where the config names none
            out.append(Inputs(names, dims, {"bins": wide, "frames": frames, "bins_first": False}))
        if "input_features_mask" in params and "input_features_mask" not in names:  # AudioFlamingo3's encoder
            out += [Inputs(names + ["input_features_mask"], dims, {"bins": bins, "frames": frames, "bins_first": f})
                    for f in (True, False)]
        if "feature_lens" in params:  # Qwen2.5-Omni's audio tower: one clip's bins by frames, and its length
            lens = ["feature_lens"] + (["aftercnn_lens"] if "aftercnn_lens" in params else [])
            out.append(Inputs(["input_features"] + lens, {}, {"bins": bins, "frames": frames,
                                                                       "bins_first": True, "unbatched": True}))
    else:
        names = ["input_ids"] + (["attention_mask"] if "attention_mask" in params else [])
        dims = batch | {"seq": SIZES["seq"]}
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            names.append("decoder_input_ids")
            dims["decoder_seq"] = SIZES["decoder_seq"]
        out.append(Inputs(names, dims, {}))
        if "bbox" in params:
            out.append(Inputs(names + ["bbox"], dims, {}))
        if "pixel_values" in params:
            image, fixed = _image_dims(model)
            out.append(Inputs(names + ["pixel_values"], dims | image, fixed))
        if "input_features" in params:  # a text-audio model (CLAP): a spectrogram [batch, 1, frames, bins]
            audio = {"bins": mel_bins(config), "frames": 64, "bins_first": False}
            out += [Inputs(names + ["input_features"], dims, audio | {"channel": c}) for c in (True, False)]
            out.append(Inputs(names + ["input_features"], dims, audio | {"bins_first": True}))  # CLVP's
        if "attention_mask" in names:
            out.append(Inputs([n for n in names if n != "attention_mask"], dims, {}))
        codebooks = getattr(config, "num_codebooks", None)
        if isinstance(codebooks, int) and codebooks > 1:  # token ids of every codebook, item by item
            out.append(Inputs(["input_ids"], dims, {"codebooks": codebooks}))
    image, fixed = _image_dims(model) if "pixel_values" in params or "pixel_values_videos" in params else ({}, {})
    out += [Inputs(*s) for s in family_sets(model, image, fixed)]
    # sets of the families laid out by hf_codes, hf_patches, hf_placed: after every other family's
    out += [Inputs(*s) for s in hf_codes.code_sets(model, params, _vocab(model))]
    out += [Inputs(*s) for s in hf_codes.latent_map_sets(model, params)]
    out += [Inputs(*s) for s in hf_patches.patch_sets(model, params)]
    out += [Inputs(*s) for s in hf_patches.image_sets(model, params)]
    out += [Inputs(*s) for s in hf_patches.byte_patch_sets(model, params)]
    out += [Inputs(*s) for s in hf_placed.placed_sets(model, params, image, fixed)]
    out += [Inputs(*s) for s in hf_placed.video_sets(model, params, image, fixed)]
    out += [Inputs(*s) for s in hf_placed.images_sets(model, params, image, fixed)]
    out += [Inputs(*s) for s in hf_placed.question_sets(model, params)]
    out += [Inputs(*s) for s in hf_fed.cross_sets(model, params, [(i.names, i.dims, i.fixed) for i in out])]
    out += [Inputs(*s) for s in hf_parts.late_sets(model, params)]
    return out
