"""The name a person would give a dynamic axis, from its role: the input's name, the axis's position,
the tensor's rank, an image's layout, the tensor's place in a cache, and the model's config.

Each axis proposes ``(name, rank)``: the lower the rank, the surer the role (a cache's length axis,
``input_ids``' token axis); a group of axes of one size takes the surest name among its axes
(``onnxport.observation.axes``). Conventions read here: the argument names of Hugging Face transformers'
``forward`` (``input_ids``, ``attention_mask``, ``pixel_values``, ``input_features``,
``input_values``...) and its config attributes (``num_channels``, ``num_mel_bins``,
``feature_size``); images ``N, C, H, W`` (PyTorch's layout) unless the last axis is the constant
one of 1, 3 or 4 channels; cache tensors ``[batch, kv_heads, past, head_dim]``
(``onnxport.capture.caches``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from onnxport.capture.caches import is_cache_leaf

SURE, LIKELY, GUESS, FALLBACK = 0, 1, 2, 9  # ranks of a proposed name

TOKENS = ("input_ids", "inputs_embeds", "token_type_ids", "labels", "position_ids", "attention_mask",
          "special_tokens_mask", "head_mask", "input_mask", "tokens", "token_ids", "ids")
HIDDEN = ("hidden_states", "encoder_hidden_states", "embeddings", "embeds", "encoder_outputs")
AUDIO = ("input_values", "waveform", "waveforms", "wav", "wavs", "audio", "speech", "signal", "samples")
FEATURES = ("input_features", "features", "feats", "fbank", "fbanks", "mel", "mels", "spectrogram", "spec",
            "log_mel", "spectrograms")
VIDEO = ("pixel_values_videos", "video", "videos", "clip", "clips")
LENGTHS = ("lengths", "lens", "length", "wav_lens", "input_lengths", "seq_lens", "sequence_lengths")
FEATURE_CONFIG = ("num_mel_bins", "feature_size", "input_feat_per_channel", "n_mels", "num_mel_channels")
IMAGE_CHANNELS = (1, 3, 4)


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One tensor of the observed inputs: its flat input name (``past_key_values.0.key``,
    ``pixel_values``), its own key (the last part of its path: ``input_ids`` inside a dict input),
    its rank, and per axis the sizes the calls gave it (``None`` where a call had no such tensor)."""

    flat: str
    key: str
    rank: int
    sizes: tuple[tuple[int | None, ...], ...]  # [axis][call]

    def constant(self, axis: int) -> int | None:
        """The axis's one size over the calls that gave it, or None when it varied."""
        seen = {s for s in self.sizes[axis] if s is not None}
        return next(iter(seen)) if len(seen) == 1 else None


def config_sizes(model: Any) -> dict[str, int]:
    """The integer attributes of the model's config (transformers' ``model.config``) naming a
    channel or feature count: ``{"num_channels": 3}``; empty without a config."""
    config = getattr(model, "config", None)
    out = {}
    for name in ("num_channels", *FEATURE_CONFIG):
        value = getattr(config, name, None) if config is not None else None
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    return out


def propose(leaf: Leaf, axis: int, config: dict[str, int]) -> tuple[str, int]:
    """``(name, rank)`` for ``axis`` of ``leaf``: the role it plays, named as a person would
    (``batch``, ``seq``, ``past``, ``height``, ``width``, ``time``, ``channels``...), or
    ``<input>_dim<axis>`` at rank ``FALLBACK`` where no role is known."""
    key = leaf.key.lower()
    if is_cache_leaf(leaf.flat):
        return _cache(leaf, axis)
    decoder = key.startswith("decoder_")
    base = key.removeprefix("decoder_")
    if base in TOKENS or base == "cache_position":
        return _tokens(base, leaf.rank, axis, "decoder_seq" if decoder else "seq")
    if base in LENGTHS and leaf.rank == 1:
        return "batch", LIKELY
    if leaf.rank in (4, 5):
        return _image(leaf, axis, config, video=base in VIDEO)
    if leaf.rank == 3:
        return _sequence(leaf, axis, base, config)
    if leaf.rank == 2:
        if axis == 0:
            return "batch", LIKELY
        return ("time", LIKELY) if base in AUDIO else ("seq", LIKELY) if base in HIDDEN else ("length", GUESS)
    if leaf.rank == 1:
        return ("time", LIKELY) if base in AUDIO else ("length", GUESS)
    return f"{leaf.flat}_dim{axis}", FALLBACK


def _cache(leaf: Leaf, axis: int) -> tuple[str, int]:
    """A cache tensor: ``[batch, kv_heads, past, head_dim]`` (``encoder_seq`` for cross-attention),
    a recurrent state ``[batch, ...]``."""
    parts = leaf.flat.split(".")
    if parts[-1] in ("key", "value") and leaf.rank == 4:
        length = "encoder_seq" if "encoder" in parts else "past"
        return ("batch", "kv_heads", length, "head_dim")[axis], SURE
    return ("batch", SURE) if axis == 0 else (f"state_dim{axis}", GUESS)


def _tokens(base: str, rank: int, axis: int, seq: str) -> tuple[str, int]:
    """Token inputs: ``[batch, seq]`` (``inputs_embeds`` ``[batch, seq, hidden]``); the mask's
    axis 1 ranks below the tokens' (it also covers the cached tokens when there is a cache), a
    1-D ``cache_position`` is ``seq`` long."""
    if rank == 1:
        return seq, LIKELY
    if axis == 0:
        return "batch", SURE
    if axis == 1:
        return seq, SURE if base in ("input_ids", "inputs_embeds", "tokens", "token_ids", "ids") else LIKELY
    return ("hidden", LIKELY) if base == "inputs_embeds" and axis == 2 else (f"{base}_dim{axis}", FALLBACK)


def _image(leaf: Leaf, axis: int, config: dict[str, int], video: bool) -> tuple[str, int]:
    """An image batch ``[batch, channels, height, width]`` (channels last when the last axis is the
    constant channel count and the second is not), a video or volume ``[batch, channels, frames or
    depth, height, width]``."""
    last = leaf.rank - 1
    channels = config.get("num_channels")
    first_const, last_const = leaf.constant(1), leaf.constant(last)
    if channels is not None and last_const == channels and first_const != channels:
        channels_last = True
    else:
        channels_last = first_const not in IMAGE_CHANNELS and last_const in IMAGE_CHANNELS
    if leaf.rank == 4:
        names = ("batch", "height", "width", "channels") if channels_last else ("batch", "channels", "height", "width")
    else:
        deep = "frames" if video else "depth"
        names = (("batch", deep, "height", "width", "channels") if channels_last
                 else ("batch", "channels", deep, "height", "width"))
    return names[axis], LIKELY


def _sequence(leaf: Leaf, axis: int, base: str, config: dict[str, int]) -> tuple[str, int]:
    """A rank-3 input: hidden states ``[batch, seq, hidden]``; audio features ``[batch, features,
    time]`` or ``[batch, time, features]`` (the features axis the constant one, or the one of the
    config's feature count); otherwise ``[batch, channels, time]``, ``time`` the axis that varies
    when only one does."""
    if axis == 0:
        return "batch", LIKELY
    if base in HIDDEN:
        return ("seq", "hidden")[axis - 1], LIKELY
    counts = {v for k, v in config.items() if k in FEATURE_CONFIG}
    one, two = leaf.constant(1), leaf.constant(2)
    if base in FEATURES or counts & {one, two}:
        if one in counts or (one is not None and two is None):
            features = 1
        elif two in counts or (two is not None and one is None):
            features = 2
        else:  # Whisper's [batch, num_mel_bins, frames]
            features = 1
        return ("features" if axis == features else "time"), LIKELY
    if (one is None) != (two is None):  # only one varies: that one is the time axis
        return ("time" if leaf.constant(axis) is None else "channels"), GUESS
    return ("channels", "time")[axis - 1], GUESS
