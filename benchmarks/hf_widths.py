"""Fits of the tiny configs that tie several fields together, made after the per-field rules
(``hf_rules.py``) have narrowed the widths: the fields a config's validators or its model's code
require to agree with the new width, stride count or layer count.

* a width kept where a per-stage width list starts at it (SAM 2's Hiera) and a sub-config's feature
  map sizes scaled with its backbone's image;
* a Mamba-2 mixer's heads fitted to the width;
* a backbone's ``out_indices`` kept as many as they were (a DPT neck takes one feature map per index);
* a depthwise conv's groups kept one per channel of the width (Mimi's ``upsample_groups``);
* a codec's or VQ-VAE's base width (which its stages multiply) ``BASE_WIDTH``, less where it doubles
  five times or more (its strides, not its channel multipliers, count the doublings);
* EfficientNet's last width scaled with its width coefficient;
* a query/key head size that is the sum of its parts (LongCat-Flash's ``qk_head_dim``, ``qk_nope_head_dim +
  qk_rope_head_dim``) kept the sum of the new parts;
* a VQ-VAE's latent grid side (Janus's ``num_patches``) that of the 64-pixel image the sweep gives.
"""

from __future__ import annotations

from typing import Any

from hf_rules import _value

_STAGE_RATIOS = ("downsampling_ratios", "upsampling_ratios", "channel_multiplier", "ch_mult", "channel_mult",
                 "encoder_rates", "strides")
_BASE_WIDTHS = ("encoder_hidden_size", "num_filters", "base_channels", "n_filters", "hidden_channels", "ch",
                "base_channel")
BASE_WIDTH = 32


def _fit_stage_widths(config: Any, params: Any, out: dict) -> None:
    """A width kept where a per-stage width list starts at it (SAM 2's Hiera: ``hidden_size`` is
    ``embed_dim_per_stage[0]``); a sub-config's feature map sizes (``backbone_feature_sizes``) scaled
    with its backbone's image size."""
    width = _value(config, "hidden_size")
    if "hidden_size" in out and any(name.endswith("_per_stage") and isinstance(_value(config, name), (list, tuple))
                                    and list(_value(config, name))[:1] == [width] for name in params):
        del out["hidden_size"]
    backbone = out.get("backbone_config")
    old_side, new_side = _side(_value(_value(config, "backbone_config"), "image_size")), _side(
        _value(backbone, "image_size"))
    for name in params:
        sizes = _value(config, name)
        if name.endswith("_feature_sizes") and old_side and new_side and isinstance(sizes, (list, tuple)):
            out[name] = [[max(1, v * new_side // old_side) for v in size] for size in sizes]


def _side(value: Any) -> int | None:
    value = value[0] if isinstance(value, (list, tuple)) and value else value
    return value if isinstance(value, int) else None


def _fit_ssm_heads(config: Any, params: Any, out: dict) -> None:
    """A Mamba-2 mixer's heads, ``hidden_size * expand == heads * head_dim`` at the new width (its
    validator ties them), in one group."""
    expand, width = _value(config, "expand"), out.get("hidden_size")
    if not isinstance(expand, int) or not isinstance(width, int):
        return
    for heads, head_dim in (("num_heads", "head_dim"), ("mamba_num_heads", "mamba_head_dim")):
        size = out.get(head_dim, _value(config, head_dim))
        if heads in params and isinstance(_value(config, heads), int) and isinstance(size, int):
            out[heads] = max(1, width * expand // size)
            if isinstance(_value(config, "n_groups"), int):
                out["n_groups"] = 1


def _fit_out_indices(config: Any, params: Any, out: dict) -> None:
    """A backbone's ``out_indices`` kept as many as they were (a DPT neck takes one feature map per
    index) within its new layer count: the last layers, more layers where there are fewer than
    indices."""
    indices, layers = _value(config, "out_indices"), out.get("num_hidden_layers")
    if not isinstance(indices, (list, tuple)) or not isinstance(layers, int) \
            or all(isinstance(i, int) and i <= layers for i in indices):
        return
    count = len(indices)
    out["num_hidden_layers"] = max(layers, count)
    out["out_indices"] = list(range(out["num_hidden_layers"] - count + 1, out["num_hidden_layers"] + 1))
    if isinstance(_value(config, "out_features"), (list, tuple)):
        out["out_features"] = [f"stage{i}" for i in out["out_indices"]]


def _fit_groups(config: Any, params: Any, out: dict) -> None:
    """A depthwise conv's groups, one per channel of the width (Mimi's ``upsample_groups``)."""
    width = _value(config, "hidden_size")
    for name in params:
        if name.endswith("_groups") and isinstance(width, int) and _value(config, name) == width \
                and isinstance(out.get("hidden_size"), int):
            out[name] = out["hidden_size"]


def _fit_base_width(config: Any, out: dict) -> None:
    """A codec's or VQ-VAE's base width, which it widens stage after stage, at most ``BASE_WIDTH``
    (halved for each stride beyond four)."""
    if not any(isinstance(_value(config, n), (list, tuple)) for n in _STAGE_RATIOS):
        return
    strides = [n for n in _STAGE_RATIOS if "ratios" in n or n in ("strides", "encoder_rates")]  # not multipliers
    stages = max([len(_value(config, n)) for n in strides if isinstance(_value(config, n), (list, tuple))] or [0])
    base = BASE_WIDTH if stages <= 4 else max(4, BASE_WIDTH >> (stages - 4))  # doubled at 5 strides or more
    for name in _BASE_WIDTHS:  # a codec or VQ-VAE widens its base width stage after stage
        if isinstance(_value(config, name), int) and _value(config, name) > base:
            out[name] = base


def _fit_last_width(config: Any, out: dict) -> None:
    """EfficientNet's last width (``hidden_dim``) scaled with its width coefficient."""
    if "width_coefficient" in out and isinstance(_value(config, "hidden_dim"), int):
        out["hidden_dim"] = int(_value(config, "hidden_dim") * out["width_coefficient"] / config.width_coefficient)


def fit_sum_dims(config: Any, params: Any, out: dict) -> None:
    """A query/key head size its config's default makes the sum of its parts (``qk_head_dim ==
    qk_nope_head_dim + qk_rope_head_dim``) kept the sum at the parts' new sizes."""
    parts = ("qk_nope_head_dim", "qk_rope_head_dim")
    total, sizes = _value(config, "qk_head_dim"), [_value(config, n) for n in parts]
    if "qk_head_dim" in params and isinstance(total, int) and all(isinstance(v, int) for v in sizes) \
            and total == sum(sizes):
        out["qk_head_dim"] = sum(out.get(n, v) for n, v in zip(parts, sizes))


def fit_latent_grid(config: Any, params: Any, out: dict) -> None:
    """A VQ-VAE's latent grid side (``num_patches``, its decoder's expected token grid) that of a
    64-pixel image, halved at each resolution after the first (``len(channel_multiplier) - 1``)."""
    mult = _value(config, "channel_multiplier")
    if "num_patches" in params and isinstance(_value(config, "num_patches"), int) and "image_size" not in params \
            and isinstance(mult, (list, tuple)) and mult:
        out["num_patches"] = max(1, 64 >> (len(mult) - 1))
