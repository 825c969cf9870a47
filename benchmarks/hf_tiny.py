"""Tiny configs of every architecture transformers ships, derived generically, and the probe that
finds the first one that runs in eager on generic inputs (``hf_inputs.py``).

``attempts(model_type)`` yields configs of one model type, smallest first, each made from the config
class's defaults by rules on its constructor's parameter names (the same rules for every class,
applied to sub-configs too):

* ``tiny``: widths 128, 2 heads (1 key/value head where the default groups them), head sizes 64,
  feed-forward 256, 2 layers, vocabulary 1000, 4 experts (2 per token), images of 4 patches
  and at least 64 pixels, stage depths 1, stage widths an eighth, positions 256, object queries
  ``QUERIES``, a codec's or VQ-VAE's base width (which its stages multiply) ``BASE_WIDTH`` (less
  where it doubles five times or more), a backbone's ``out_indices`` as many as they were (a DPT neck
  takes one feature map per index), a list of layer indices kept as indices (Llama 4's
  ``moe_layers``), layers given by their types alone cut (Nemotron-H's ``layers_block_type``), a
  Mamba-2 mixer's heads fitted to the width, a width a per-stage width list starts at kept (SAM 2's
  Hiera) and feature map sizes scaled with the image, a timm ViT left at its defaults given a tiny
  ``model_args``;
* ``shallow``: only layers, stage depths, vocabulary and experts reduced, widths and images as the
  defaults;
* ``narrow``: ``tiny`` with the default number of layers and stage depths (a config class whose
  validators tie per-layer patterns to the layer count: GPT-Neo's ``attention_types``);
* a config with more than ``MAX_PARAMETERS`` parameters (counted on the meta device) is not built;
* what a config leaves unset and its model requires is set: a forecaster's ``prediction_length``
  (``PREDICTION``), a routed MoE's experts per token, the window of a config naming sliding
  attention (``SLIDING_WINDOW``), BLIP-2's image token, X-MOD's default language;
* where a config's validators refuse the changes: a field the message states must equal a value set
  to it, key/value heads tied to the heads made the heads, else the changes the message names left
  at their defaults (``construct``);
* an attribute the model reads that its config lacks (a sub-config split from its parent) set: from
  a sub-config holding it, else by its name (dropout 0, ``rope_theta``...: ``instantiate``).

``build(model_type, attempt)`` makes the base model (``AutoModel``'s class for the type, else a part
built from its config alone: SAM's mask decoder; a VQ-VAE without a forward run as its encoder; seeded; weight
matrices the model's own initialization leaves all zero, a mixture-of-experts router's gate for one,
drawn from N(0, 0.02) so that the router's scores do not tie and which experts eager PyTorch picks is
defined; batch norms' scales the initialization draws near zero set to one, and a batch-normed conv's
weights it draws far below a variance-keeping scale scaled up, else the features of a detector's
stacked conv blocks vanish and its top-k queries are picked among tied scores);
``probe`` finds the first attempt whose model runs in eager on one of its input sets
(``hf_inputs.candidates``, the forward's required parameters filled where a maker knows them) and
which dims eager also runs at another size: batch always tried, the text length, the decoder's
length, the image size, the audio length each kept dynamic only where eager runs at another size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
from typing import Any

import torch

import hf_inputs
from hf_inputs import Inputs, candidates

MAX_PARAMETERS = 40_000_000
WIDTH, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS, VOCAB, EXPERTS, POSITIONS = 128, 2, 1, 64, 256, 2, 1000, 4, 256
QUERIES = 16  # object queries of a detector (top-k over the anchors of a 64-pixel image)
SLIDING_WINDOW = 4  # tokens a sliding-window layer attends, where the config leaves it unset
PREDICTION = 8  # time steps a forecaster predicts where its config names none

_LAYERS = re.compile(r"^(num_(hidden_|encoder_|decoder_|text_|vision_|audio_|transformer_|)layers|n_layers?|"
                     r"num_self_attends_per_block|"
                     r"(encoder|decoder|text|vision|audio)_layers|depth|num_hidden_blocks|num_blocks)$")
_WIDTH = re.compile(r"^(hidden_size|d_model|n_embd|n_embed|embed_dim|dim|hidden_dim|d_embed|model_dim|emb_dim|"
                    r"word_embed_proj_dim|projection_dim|proj_dim|text_embed_dim|vision_embed_dim|"
                    r"(encoder|decoder|text|vision|audio|backbone|fpn)_hidden_size|d_hidden|d_latents)$")
_HEADS = re.compile(r"^(num_attention_heads|n_heads?|num_heads|(encoder|decoder)_attention_heads|attention_heads|"
                    r"num_(encoder|decoder)_attention_heads)$")
_KV = re.compile(r"^(num_key_value_heads|num_kv_heads|n_kv_heads|multi_query_group_num)$")
_HEAD_DIM = re.compile(r"^(head_dim|d_kv|attention_head_dim|kv_channels|(qk|v|qk_nope|qk_rope)_head_dim|"
                       r"attention_head_size)$")
_FFN = re.compile(r"(intermediate_size|ffn_dim|^d_ff$|^n_inner$|^mlp_dim$|^dim_feedforward$|^ffn_hidden_size$|"
                  r"^intermediate_dim$|^encoder_ffn_dim$|^decoder_ffn_dim$)")
_EXPERTS = re.compile(r"^(num_experts|num_local_experts|n_routed_experts|moe_num_experts|num_routed_experts)$")
_PER_TOKEN = re.compile(r"^(num_experts_per_tok|num_experts_per_token|moe_topk|top_k|moe_k)$")
_POSITIONS = re.compile(r"^(max_position_embeddings|n_positions|max_seq_len|max_sequence_length|"
                        r"max_target_positions|n_ctx)$")
_IDS = re.compile(r"(_token_id|_token_index|_token_ids)$")


@dataclasses.dataclass
class Rules:
    """What an attempt changes."""

    name: str
    widths: bool
    layers: bool = True


ATTEMPTS = (Rules("tiny", widths=True), Rules("shallow", widths=False), Rules("narrow", widths=True, layers=False))


def _scaled(values: list, factor: int) -> list:
    return [max(8, (v // factor + 7) // 8 * 8) if isinstance(v, int) and v > 8 else v for v in values]


def _trim_layers(values: list, count: int) -> list:
    """A per-layer list cut to ``count`` entries, keeping one of each distinct entry."""
    keep = []
    for i, v in enumerate(values):
        if v not in [values[j] for j in keep]:
            keep.append(i)
    for i in range(len(values)):
        if len(keep) >= count:
            break
        if i not in keep:
            keep.append(i)
    return [values[i] for i in sorted(keep)]


_PER_LAYER_NAME = re.compile(r"(layer|block|pattern|types|attn|attention|mlp|moe|window|sparse|dense)")


def _value(config: Any, name: str) -> Any:
    """``config.<name>``, or None where reading it raises (attributes that differ per layer)."""
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001
        return None


def overrides(config: Any, rules: Rules) -> dict:
    """Constructor arguments of ``type(config)`` that make ``config`` small (see the module
    docstring); sub-configs (attributes holding configs) shrunk the same way, from their current
    values."""
    from transformers import PretrainedConfig

    params = inspect.signature(type(config).__init__).parameters
    out: dict[str, Any] = {}
    old_layers = None
    for name in params:
        if name in ("self", "kwargs"):
            continue
        value = _value(config, name)
        if value is None:
            if name == "vocab_size":
                out[name] = VOCAB
            elif rules.widths and name == "head_dim":  # left to the model, which reads it as it is
                out[name] = HEAD_DIM
            elif rules.widths and _KV.match(name):
                out[name] = HEADS
            elif name == "prediction_length":  # time series: a horizon the config requires
                out[name] = PREDICTION
            elif _PER_TOKEN.match(name) and isinstance(_value(config, "n_routed_experts"), int):
                out[name] = 2  # experts the router picks, which the model's code requires
            elif name == "sliding_window" and _uses_sliding(config):
                out[name] = SLIDING_WINDOW  # a window the config's sliding layers require
            elif name == "image_token_index" and isinstance(_value(config, "num_query_tokens"), int):
                out[name] = VOCAB - 1  # BLIP-2's query outputs placed at these tokens of the text
            elif name == "model_args" and rules.widths and str(_value(config, "architecture")).startswith("vit"):
                out[name] = {"embed_dim": WIDTH, "depth": LAYERS, "num_heads": HEADS, "img_size": 64,  # a timm ViT (PE)
                             "patch_size": 16}
            elif name == "default_language" and _value(config, "languages"):
                out[name] = list(_value(config, "languages"))[0]  # X-MOD's adapter to run
            continue
        if isinstance(value, PretrainedConfig):
            out[name] = construct(type(value), _current(value), overrides(value, rules))
            continue
        if isinstance(value, bool):
            if name == "use_timm_backbone" and value:  # a backbone the installed transformers ships
                out[name] = False
            continue
        if isinstance(value, int):
            new = _int_rule(name, value, rules, config)
            if new is not None and new != value:
                if name in ("num_hidden_layers", "num_layers", "n_layer"):
                    old_layers = value
                out[name] = new
        elif isinstance(value, float) and name.endswith("_coefficient") and value > 1.0 and rules.widths:
            out[name] = 1.0
        elif isinstance(value, dict) and rules.widths:
            new = _dict_rule(value, config)
            if new != value:
                out[name] = new
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool)
                                                                 for v in value):
            new = _list_rule(name, list(value), rules)
            if new is not None:
                out[name] = type(value)(new) if isinstance(value, tuple) else new
    for name in ("image_size", "input_size"):
        if name in params and _value(config, name) is not None and rules.widths:
            out[name] = _image(_value(config, name), _value(config, "patch_size"))
    _fit_stage_widths(config, params, out)
    if old_layers is not None:
        count = next(out[n] for n in ("num_hidden_layers", "num_layers", "n_layer") if n in out)
        for name in params:
            value = _value(config, name)
            if name in out or not _PER_LAYER_NAME.search(name):
                continue
            if isinstance(value, (list, tuple)) and list(value) == list(range(old_layers)):
                trimmed = list(range(count))  # indices of layers (Llama 4's moe_layers), not one entry per layer
            elif isinstance(value, (list, tuple)) and len(value) == old_layers:
                trimmed = _trim_layers(list(value), count)
            elif isinstance(value, str) and len(value) == old_layers and "pattern" in name:
                trimmed = "".join(_trim_layers(list(value), count))
            else:
                continue
            out[name] = trimmed
            if len(trimmed) > count:
                for n in ("num_hidden_layers", "num_layers", "n_layer"):
                    if n in out:
                        out[n] = len(trimmed)
    if old_layers is None and rules.layers:  # layers given by their types alone (Nemotron-H's layers_block_type)
        for name in params:
            value = _value(config, name)
            if name in _LAYER_TYPES and isinstance(value, (list, tuple)) and len(value) > LAYERS:
                out[name] = _trim_layers(list(value), LAYERS)
    _fit_ssm_heads(config, params, out)
    _fit_out_indices(config, params, out)
    width = _value(config, "hidden_size")
    for name in params:  # a depthwise conv's groups, one per channel of the width (Mimi's upsample_groups)
        if name.endswith("_groups") and isinstance(width, int) and _value(config, name) == width \
                and isinstance(out.get("hidden_size"), int):
            out[name] = out["hidden_size"]
    if rules.widths and any(isinstance(_value(config, n), (list, tuple)) for n in _STAGE_RATIOS):
        strides = [n for n in _STAGE_RATIOS if "ratios" in n or n in ("strides", "encoder_rates")]  # not multipliers
        stages = max([len(_value(config, n)) for n in strides if isinstance(_value(config, n), (list, tuple))] or [0])
        base = BASE_WIDTH if stages <= 4 else max(4, BASE_WIDTH >> (stages - 4))  # doubled at 5 strides or more
        for name in _BASE_WIDTHS:  # a codec or VQ-VAE widens its base width stage after stage
            if isinstance(_value(config, name), int) and _value(config, name) > base:
                out[name] = base
    if "width_coefficient" in out and isinstance(_value(config, "hidden_dim"), int):  # EfficientNet's last width
        out["hidden_dim"] = int(_value(config, "hidden_dim") * out["width_coefficient"] / config.width_coefficient)
    _fix_ids(config, params, out)
    return out


_STAGE_RATIOS = ("downsampling_ratios", "upsampling_ratios", "channel_multiplier", "ch_mult", "channel_mult",
                 "encoder_rates", "strides")
_BASE_WIDTHS = ("encoder_hidden_size", "num_filters", "base_channels", "n_filters", "hidden_channels", "ch",
                "base_channel")
BASE_WIDTH = 32


def _uses_sliding(config: Any) -> bool:
    """Whether a config names sliding-window attention beside its ``sliding_window`` (a layer type, a
    head count of its sliding layers)."""
    return any("sliding" in str(v) for v in vars(config).values() if isinstance(v, (list, tuple))) or any(
        "sliding" in k and k != "sliding_window" for k in vars(config))


_LAYER_TYPES = ("layers_block_type", "block_types", "hybrid_layer_types")


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


def _current(config: Any) -> dict:
    """The constructor arguments that rebuild ``config`` as it is."""
    params = inspect.signature(type(config).__init__).parameters
    out = {}
    for name in params:
        if name not in ("self", "kwargs") and name in vars(config):
            out[name] = vars(config)[name]
    if "_out_indices" in vars(config):  # a backbone's stages out, kept private (RT-DETR's ResNet: 2, 3, 4)
        out["out_indices"] = vars(config)["_out_indices"]
    return out


def _dict_rule(value: dict, config: Any) -> dict:
    """Rope parameters: multimodal rope sections scaled to the new head size (stated where the
    class takes them but its default leaves them to the model's code), the original context within
    the new positions."""
    out = dict(value)
    section = value.get("mrope_section")
    if section is None and "rope_type" in value and "mrope_section" in getattr(config, "ignore_keys_at_rope_validation",
                                                                              ()):
        section = [2, 3, 3]
    if isinstance(section, (list, tuple)) and section and all(isinstance(v, int) for v in section):
        factor = value.get("partial_rotary_factor") or _value(config, "partial_rotary_factor") or 1.0
        half, total = int(HEAD_DIM * factor) // 2, sum(section)  # the rotated half of the head
        scaled = [max(1, v * half // total) for v in section]
        scaled[0] += half - sum(scaled)
        out["mrope_section"] = scaled
    original = value.get("original_max_position_embeddings")
    if isinstance(original, int) and original > POSITIONS:
        out["original_max_position_embeddings"] = POSITIONS // 2
    return out


def _int_rule(name: str, value: int, rules: Rules, config: Any) -> int | None:
    if _LAYERS.match(name):
        return min(value, LAYERS) if rules.layers else None
    if ("vocab_size" in name or name.endswith("_vocab")) and value > VOCAB:  # BLT's hash byte-group vocabulary
        return VOCAB
    if _EXPERTS.match(name):
        return min(value, EXPERTS)
    if _PER_TOKEN.match(name):
        return min(value, 2)
    if name in ("n_group", "topk_group", "n_shared_experts", "first_k_dense_replace"):
        return min(value, 1)
    if name.endswith("_layer_period") or name.endswith("_layers_block_period"):
        return min(value, 2)
    if name.endswith("_layer_offset"):
        return min(value, 1)
    if not rules.widths:
        return None
    if _WIDTH.match(name):
        # a final width scaled with the width coefficient (EfficientNet): see overrides
        return None if name == "hidden_dim" and hasattr(config, "width_coefficient") else WIDTH
    if _HEADS.match(name):
        return min(value, HEADS)
    if _KV.match(name):
        heads = next((getattr(config, n) for n in ("num_attention_heads", "n_head", "num_heads")
                      if isinstance(getattr(config, n, None), int)), None)
        return KV_HEADS if heads and value < heads else min(value, HEADS)
    if _HEAD_DIM.match(name):
        return min(value, HEAD_DIM)
    if name in ("kv_lora_rank", "q_lora_rank"):
        return min(value, 32)
    if name in ("rotary_dim", "rotary_emb_dim"):
        return min(value, HEAD_DIM)
    if name in ("codebook_dim", "out_hidden_size"):
        return WIDTH
    if _FFN.search(name):
        return min(value, FFN)
    if _POSITIONS.match(name):
        return min(value, POSITIONS)
    if name == "num_queries":  # a detector's queries, picked among the anchors of a small image
        return min(value, QUERIES)
    if name == "max_source_positions":
        return min(value, 32)
    if name == "upsample_initial_channel":  # a HiFi-GAN vocoder's first width, halved at each upsampling
        return min(value, WIDTH)
    if name in ("embedding_size", "hidden_channels", "num_features"):
        return min(value, 32)
    return None


def _list_rule(name: str, values: list, rules: Rules) -> list | None:
    if name in ("depths", "num_layers", "block_repeats", "num_blocks", "layers", "stage_depths", "depth",
                "blocks_per_stage"):
        return [min(v, 1) for v in values] if rules.layers else None
    if not rules.widths:
        return None
    if name in ("hidden_sizes", "embed_dims", "embed_dim", "hidden_dims", "channels", "widths", "dims",
                "num_channels_per_stage", "neck_hidden_sizes", "backbone_hidden_sizes", "encoder_in_channels",
                "stage_in_channels", "stage_mid_channels", "stage_out_channels", "stem_channels"):
        return _scaled(values, 8)
    if name in ("num_heads", "num_attention_heads", "heads"):
        return [min(v, 2) for v in values]
    return None


def _image(value: Any, patch: Any) -> Any:
    p = patch[0] if isinstance(patch, (list, tuple)) else patch
    side = max(4 * p, 64) if isinstance(p, int) and p > 0 else 64
    if isinstance(value, (list, tuple)):
        return type(value)([side] * len(value))
    return side if isinstance(value, int) else value


def _fix_ids(config: Any, params: Any, out: dict) -> None:
    """Token ids beyond the new vocabulary moved to its end (the same old id, the same new id)."""
    vocab = out.get("vocab_size", getattr(config, "vocab_size", None))
    if not isinstance(vocab, int):
        vocab = VOCAB
    moved: dict[int, int] = {}

    def move(i: Any) -> Any:
        if isinstance(i, int) and not isinstance(i, bool) and i >= vocab:
            moved.setdefault(i, vocab - 1 - len(moved))
            return moved[i]
        return i

    for name in params:
        if _IDS.search(name) and hasattr(config, name):
            value = getattr(config, name)
            new = [move(v) for v in value] if isinstance(value, (list, tuple)) else move(value)
            if new != value:
                out[name] = new


def make_config(model_type: str, rules: Rules) -> Any:
    """The config of ``model_type`` under ``rules``."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    return construct(cls, {}, overrides(cls(), rules))


def construct(cls: type, base: dict, changes: dict, tries: int = 8) -> Any:
    """``cls(**base, **changes)``; where the config's validators refuse it: a field the message states
    must equal a value (```adaptor_config.intermediate_size` (256) must equal `text_config.hidden_size
    // 4` (32)``) set to it, key/value heads it ties to the heads (``num_key_value_heads must match
    num_attention_heads``) made the heads; else the changes the message names (``hidden_size_per_layer_input
    must be 0``) left at their defaults; again, until it builds or no change is named."""
    for _ in range(tries):
        try:
            return cls(**(base | changes))
        except Exception as e:  # noqa: BLE001 - a validator's refusal names the fields it ties
            text = str(e)
            if _set_stated(changes, text):
                continue
            named = [n for n in changes if re.search(rf"(?<![A-Za-z_]){re.escape(n)}(?![A-Za-z_])", text)]
            if not named:
                raise
            heads = next((changes[n] for n in changes if _HEADS.match(n) and isinstance(changes[n], int)), None)
            tied = [n for n in named if _KV.match(n) and heads is not None and changes[n] != heads]
            if tied and all(_KV.match(n) or _HEADS.match(n) for n in named):
                changes = changes | dict.fromkeys(tied, heads)
                continue
            changes = {n: v for n, v in changes.items() if n not in named}
    return cls(**(base | changes))


_STATED = re.compile(r"`([\w.]+)` \((\d+)\) must (?:equal|be equal to|match) [^(]*\((\d+)\)")


def _set_stated(changes: dict, text: str) -> bool:
    """Whether a refusal stating a changed field's required value (``` `a.b` (256) must equal ... (32)```)
    was met by setting it (in ``changes`` or in a sub-config of them)."""
    found = _STATED.search(text)
    if not found:
        return False
    *path, name = found[1].split(".")
    target: Any = changes
    for part in path:
        target = target.get(part) if isinstance(target, dict) else getattr(target, part, None)
    want = int(found[3])
    if isinstance(target, dict) and name in target and target[name] != want:
        target[name] = want
        return True
    if target is not None and not isinstance(target, dict) and getattr(target, name, None) not in (None, want):
        setattr(target, name, want)
        return True
    return False


def model_class(model_type: str) -> type:
    """The base model class (``AutoModel``) of ``model_type``, else its first head class, else (a
    sub-model's config: ``clip_text_model``) the model class of its modeling module whose
    ``config_class`` is the config class, a base model (no head) first."""
    import importlib

    from transformers import PreTrainedModel
    from transformers.models.auto import modeling_auto as ma
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_cls = CONFIG_MAPPING[model_type]
    for mapping in (ma.MODEL_MAPPING, ma.MODEL_FOR_CAUSAL_LM_MAPPING, ma.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING,
                    ma.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING, ma.MODEL_FOR_CTC_MAPPING, ma.MODEL_FOR_BACKBONE_MAPPING):
        if config_cls in mapping:
            cls = mapping[config_cls]
            return cls[0] if isinstance(cls, (list, tuple)) else cls
    module = importlib.import_module(config_cls.__module__.replace(".configuration_", ".modeling_"))
    found = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, PreTrainedModel)
             and c.__dict__.get("config_class", getattr(c, "config_class", None)) is config_cls
             and not c.__name__.endswith("PreTrainedModel")]
    found.sort(key=lambda c: ("For" in c.__name__, len(c.__name__)))
    if not found:  # a part built from its config alone (SAM 2's mask decoder: Sam2MaskDecoderConfig)
        stem = config_cls.__name__.removesuffix("Config")
        found = sorted((c for c in vars(module).values() if isinstance(c, type) and issubclass(c, torch.nn.Module)
                        and c.__name__.startswith(stem) and _takes_config(c, config_cls)),
                       key=lambda c: (c.__name__ != stem, not c.__name__.endswith(("Transformer", "Model")),
                                      len(c.__name__)))
    if not found:
        raise LookupError(f"no model class for {model_type}")
    return found[0]


def _takes_config(cls: type, config_cls: type) -> bool:
    """Whether ``cls.__init__``'s first parameter is annotated as ``config_cls`` and it needs no other."""
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(params) > 1 and params[1].annotation in (config_cls, config_cls.__name__) and all(
        p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params[2:])


_MISSING = re.compile(r"^'(\w+)' object has no attribute '(\w+)'$")


def _unset_default(config: Any, name: str) -> Any:
    """A value for an attribute a model reads that its config class does not define (a sub-config
    split from its parent, the parent's field left behind: MusicGen's ``dropout``, DBRX's attention
    ``rope_theta``), by its name or as one of its sub-configs holds it; None where no rule names it."""
    held = next((_value(c, name) for c in _configs(config)[1:] if _value(c, name) is not None), None)
    if held is not None:  # a field of one of its sub-configs (Qwen3-Omni's talker: its vision's spatial_merge_size)
        return held
    if "dropout" in name or name == "layerdrop":
        return 0.0
    if name == "initializer_range":
        return 0.02
    if name == "rope_theta":
        return 10000.0
    if name == "num_key_value_heads":
        return _value(config, "num_attention_heads")
    if name.endswith("intermediate_size"):
        return _value(config, "moe_intermediate_size") or _value(config, "intermediate_size")
    return None


def instantiate(cls: type, config: Any, tries: int = 20) -> torch.nn.Module:
    """``cls(config)``; where the model reads an attribute no config under ``config`` defines, the
    attribute set (``_unset_default``) on the configs of the class named, again."""
    for _ in range(tries):
        try:
            return cls(config)
        except AttributeError as e:
            found = _MISSING.match(str(e))
            if not found:
                raise
            fixed = False
            for c in _configs(config):
                if type(c).__name__ == found[1] and not hasattr(c, found[2]):
                    value = _unset_default(c, found[2])
                    if value is None:
                        raise
                    setattr(c, found[2], value)
                    fixed = True
            if not fixed:
                raise
    return cls(config)


def parameters_on_meta(cls: type, config: Any) -> int:
    with torch.device("meta"):
        model = instantiate(cls, config)
    return sum(p.numel() for p in model.parameters())


def build(model_type: str, attempt: str) -> torch.nn.Module:
    """The seeded base model of ``model_type`` under the attempt named ``attempt``, eval, float32,
    its cache off."""
    rules = next(r for r in ATTEMPTS if r.name == attempt)
    config = make_config(model_type, rules)
    for c in _configs(config):
        if hasattr(c, "use_cache"):
            c.use_cache = False
    torch.manual_seed(0)
    model = instantiate(model_class(model_type), config)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and not p.any():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        for module in model.modules():  # batch norms' scales drawn small (RT-DETR: N(0, initializer_range))
            scale = getattr(module, "weight", None)
            if _batch_norm(module) and isinstance(scale, torch.Tensor) and scale.any() \
                    and float(scale.abs().max()) < 0.1:
                scale.fill_(1.0)
            _scale_normed_conv(module)
    if not hasattr(model, "config"):  # a part that keeps no config: its inputs are read from it
        model.config = config
    if type(model).forward is torch.nn.Module.forward and callable(getattr(model, "encode", None)):
        model.forward = model.encode  # a VQ-VAE without a forward (Chameleon's): run as its encoder
    return model.eval().float()


def _batch_norm(module: torch.nn.Module) -> bool:
    """A batch norm, trained or frozen (HGNetV2's keeps its scale as a buffer)."""
    return isinstance(module, torch.nn.modules.batchnorm._BatchNorm) or "BatchNorm" in type(module).__name__


def _scale_normed_conv(module: torch.nn.Module) -> None:
    """A conv followed by a batch norm (a conv-norm block: HGNetV2's, D-FINE's) whose weights the
    initialization draws far below a variance-keeping scale (N(0, initializer_range) for a 3-channel
    stem: std 0.02 against 1 / sqrt(27)) scaled up to std ``1 / sqrt(fan_in)``: else the features
    vanish block after block and a detector's top-k queries are picked among tied scores."""
    children = list(module.children())
    for conv, norm in zip(children, children[1:]):
        if not isinstance(conv, torch.nn.Conv2d) or not _batch_norm(norm):
            continue
        weight = conv.weight
        target = (weight[0].numel()) ** -0.5
        std = float(weight.std()) if weight.numel() > 1 else 0.0
        if 0.0 < std < target / 4:
            weight.mul_(target / std)


def _configs(config: Any, seen: set | None = None) -> list:
    """``config`` and every sub-config under it (``text_config``, ColPali's ``vlm_config.text_config``)."""
    from transformers import PretrainedConfig

    seen = set() if seen is None else seen
    if id(config) in seen:
        return []
    seen.add(id(config))
    out = [config]
    for value in vars(config).values():
        if isinstance(value, PretrainedConfig):
            out += _configs(value, seen)
    return out


@contextlib.contextmanager
def as_traced():
    """Eager PyTorch taking the paths transformers' code takes under ``torch.export`` and
    ``torch.compile`` (``torch.compiler.is_compiling()`` true: masks built in full, no shortcuts
    decided on the data)."""
    original = torch.compiler.is_compiling
    torch.compiler.is_compiling = lambda: True
    try:
        yield
    finally:
        torch.compiler.is_compiling = original


def traced_difference(model: torch.nn.Module, inputs: dict) -> float:
    """The largest difference between eager outputs as traced (``as_traced``) and as run, relative
    to the outputs' scale: transformers' code can take another path when it is not traced (Aimv2's
    text model skips its causal mask for a full attention mask under SDPA and attends both ways)."""
    plain = run(model, inputs)
    with as_traced():
        traced = run(model, inputs)
    worst = 0.0
    for a, b in zip(plain, traced):
        if a.shape != b.shape:
            return float("inf")
        if a.is_floating_point() and a.numel():
            worst = max(worst, float((a - b).abs().max()) / max(1.0, float(a.abs().max())))
        elif not a.is_floating_point() and not torch.equal(a, b):
            return float("inf")
    return worst


def run(model: torch.nn.Module, inputs: dict) -> list[torch.Tensor]:
    """Eager outputs, flattened (tensors only, in pytree order)."""
    with torch.no_grad():
        out = model(**inputs)
    return flat(out)


def flat(out: Any) -> list[torch.Tensor]:
    """The tensors of a model's output in order (a ``ModelOutput`` by its fields)."""
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    leaves = torch.utils._pytree.tree_leaves(out)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def missing_required(model: torch.nn.Module, names: list) -> list[str]:
    """``forward``'s parameters without a default that ``names`` does not give."""
    params = inspect.signature(model.forward).parameters
    return [n for n, p in params.items() if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in names]


def probe(model_type: str) -> dict:
    """The first attempt that builds and runs in eager, its inputs and their dynamic dims; or why
    none does (``status``: ``built``, ``no-build``, ``no-inputs``, ``too-large``)."""
    errors = []
    for rules in ATTEMPTS:
        try:
            cls = model_class(model_type)
            config = make_config(model_type, rules)
            count = parameters_on_meta(cls, config)
            if count > MAX_PARAMETERS:
                errors.append(f"{rules.name}: {count / 1e6:.0f}M parameters")
                continue
            model = build(model_type, rules.name)
        except Exception as e:  # noqa: BLE001 - any failure of the generic config is a finding
            errors.append(f"{rules.name}: build: {type(e).__name__}: {_line(e)}")
            continue
        for inputs in candidates(model):
            filled = hf_inputs.fill(model, inputs.names, inputs.dims, inputs.fixed)
            if filled is not None:
                inputs = Inputs(*filled)
            need = missing_required(model, inputs.names)
            if need:
                errors.append(f"{rules.name}: forward requires {need}")
                continue
            try:
                example = run(model, inputs.make(model, 0))
            except Exception as e:  # noqa: BLE001
                errors.append(f"{rules.name}: eager: {type(e).__name__}: {_line(e)}")
                continue
            if not example:
                errors.append(f"{rules.name}: no tensor output")
                continue
            stochastic = _differs(example, run(model, inputs.make(model, 0)))
            given = _with_noise(model, inputs) if stochastic else None
            if given is not None:
                inputs, example, stochastic = *given, False
            dynamic = _dynamic_dims(model, inputs)
            try:
                traced = traced_difference(model, inputs.make(model, 0))
            except Exception:  # noqa: BLE001 - a model that cannot run so is judged against plain eager
                traced = 0.0
            return {"status": "built", "attempt": rules.name, "class": type(model).__name__, "parameters": count,
                    "inputs": inputs.names, "fixed": inputs.fixed,
                    "eager_paths_differ": traced > 1e-4 and not stochastic,
                    "stochastic": stochastic,
                    "dims": {d: list(v) for d, v in dynamic.items()},
                    "all_dims": {d: list(v) for d, v in inputs.dims.items()},
                    "static": sorted(set(inputs.dims) - set(dynamic)), "outputs": len(example)}
    status = "too-large" if errors and all("parameters" in e for e in errors) else \
        "no-inputs" if any("forward requires" in e or "eager:" in e for e in errors) else "no-build"
    return {"status": status, "errors": errors}


def _with_noise(model: torch.nn.Module, inputs: Inputs) -> tuple[Inputs, list] | None:
    """``inputs`` with the random draw given as the forward's ``noise`` argument (ViTMAE's masking:
    "noise ... mainly used for testing purposes to control randomness") and the eager outputs on them,
    where the model then gives the same outputs twice; else None."""
    if "noise" not in inspect.signature(model.forward).parameters or "noise" in inputs.names \
            or "pixel_values" not in inputs.names:
        return None
    given = Inputs(inputs.names + ["noise"], inputs.dims, inputs.fixed)
    try:
        example = run(model, given.make(model, 0))
        return None if _differs(example, run(model, given.make(model, 0))) else (given, example)
    except Exception:  # noqa: BLE001 - the model's noise is not one value per patch
        return None


def _differs(first: list, second: list) -> bool:
    """Whether two eager runs on the same inputs differ (a model drawing random numbers in its
    forward, ViTMAE's random masking): no exporter's output can be compared with such a model's."""
    for a, b in zip(first, second):
        if a.shape != b.shape:
            return True
        if a.is_floating_point() and a.numel():
            if float((a - b).abs().max()) > 1e-4 * max(1.0, float(a.abs().max())):
                return True
        elif not a.is_floating_point() and not torch.equal(a, b):
            return True
    return False


def _dynamic_dims(model: torch.nn.Module, inputs: Inputs) -> dict:
    """The dims of ``inputs`` eager also runs at their other size: all at once, else one by one."""
    def runs(dims: dict) -> bool:
        trial = Inputs(inputs.names, {d: (v if d in dims else (v[0], v[0])) for d, v in inputs.dims.items()},
                       inputs.fixed)
        try:
            return bool(run(model, trial.make(model, 1)))
        except Exception:  # noqa: BLE001
            return False

    if runs(inputs.dims):
        return dict(inputs.dims)
    keep = {}
    for d, v in inputs.dims.items():
        if runs({d: v}):
            keep[d] = v
    return keep


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else "")[:200]


def restore(record: dict) -> tuple[torch.nn.Module, Inputs]:
    """The model and inputs a probe record describes (rebuilt: same seed, same weights)."""
    model = build(record["type"], record["attempt"])
    dims = {d: tuple(v) for d, v in record["dims"].items()}
    return model, Inputs(record["inputs"], dims, {**record["fixed"], **_static_sizes(record)})


def _static_sizes(record: dict) -> dict:
    """Sizes of the dims that stayed static, at their example size (the probe's first value)."""
    out = {}
    for d in record.get("static", []):
        out[d] = record["all_dims"][d][0]
    return out
