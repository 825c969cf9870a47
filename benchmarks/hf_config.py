"""Tiny configs of every architecture transformers ships, derived generically from the config
class's defaults (``make_config``; ``hf_tiny.py`` builds and probes the models).

``overrides(config, rules)`` gives the constructor arguments of an attempt (``hf_rules.ATTEMPTS``),
made by rules on the constructor's parameter names (the same rules for every class, applied to
sub-configs too): the per-field rules of ``hf_rules.py``; a list of layer indices kept as indices
(Llama 4's ``moe_layers``), per-layer lists cut keeping one of each distinct entry, layers given by
their types alone cut (Nemotron-H's ``layers_block_type``); the fits of ``hf_widths.py``; token ids
beyond the new vocabulary moved to its end. What a config leaves unset and its model requires is
set: a forecaster's ``prediction_length`` (``PREDICTION``), a routed MoE's experts per token, the
window of a config naming sliding attention (``SLIDING_WINDOW``), BLIP-2's image token, X-MOD's
default language, a timm ViT left at its defaults given a tiny ``model_args``; the fields a family's
config leaves unset or ties to others, as its published configs state them (``hf_unset.py``).

``construct(cls, base, changes)``: where a config's validators refuse the changes, a field the
message states must equal a value set to it, key/value heads tied to the heads made the heads, else
the changes the message names left at their defaults.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import hf_unset
from hf_rules import FFN, _FFN
from hf_rules import (_HEADS, _IDS, _KV, _LAYER_TYPES, _PER_LAYER_NAME, _PER_TOKEN, HEAD_DIM, HEADS, LAYERS,
                      PREDICTION, SLIDING_WINDOW, VOCAB, WIDTH, Rules, _dict_rule, _image, _int_rule, _list_rule,
                      _trim_layers, _uses_sliding, _value)
from hf_widths import fit_latent_grid, fit_sum_dims
from hf_widths import (_fit_base_width, _fit_groups, _fit_last_width, _fit_out_indices, _fit_ssm_heads,
                       _fit_stage_widths)

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
            elif name == "backbone" and "features_only" in params:  # a timm backbone names none by default
                out[name] = TIMM_BACKBONE
            elif name.startswith("indexer_") and _uses_indexer(config) and name[len("indexer_"):] in INDEXER:
                out[name] = INDEXER[name[len("indexer_"):]]  # fields its indexed layers require, left unset
            continue
        if isinstance(value, PretrainedConfig):
            out[name] = hf_unset.keep_extras(value, construct(type(value), _current(value), overrides(value, rules)))
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
            if name in out or not (_PER_LAYER_NAME.search(name) or _FFN.search(name)):
                continue
            if _FFN.search(name) and rules.widths and isinstance(value, (list, tuple)):  # Gemma 3n's per layer
                value = [min(v, FFN) if isinstance(v, int) else v for v in value]
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
    _fit_groups(config, params, out)
    if rules.widths:
        _fit_base_width(config, out)
    _fit_last_width(config, out)
    hf_unset.fill(config, params, out)
    fit_sum_dims(config, params, out)
    fit_latent_grid(config, params, out)
    _fix_ids(config, params, out)
    return out


TIMM_BACKBONE = "test_resnet"  # timm's test-size ResNet, built from its architecture alone
INDEXER = {"n_heads": HEADS, "kv_heads": 1, "head_dim": HEAD_DIM, "budget": 4, "compress_ratio": 2}


def _uses_indexer(config: Any) -> bool:
    """Whether a config's layers include indexed (sparse, top-k selected) attention (Qwen4-Exp's)."""
    return any("indexed" in str(v) for v in (_value(config, "layer_types") or ()))


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

    from transformers import PretrainedConfig

    cls = CONFIG_MAPPING[model_type]
    default = cls()
    config = construct(cls, {}, overrides(default, rules))
    _fit_derived(default, config)
    _fit_feeding(default, config)
    for c in [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]:
        _fit_window(c)
        _fit_feature_grid(c)
    _fit_image_tokens(config)
    return config


def _fit_feeding(default: Any, config: Any) -> None:
    """Channels of one part whose last stage feeds another part at that part's width (Unlimited-OCR's
    SAM ``downsample_channels`` ending at its CLIP encoder's ``hidden_size``) scaled with that width."""
    from transformers import PretrainedConfig

    subs = [(n, v) for n, v in vars(default).items() if isinstance(v, PretrainedConfig)]
    for name, sub in subs:
        for other, target in subs:
            old, new = _value(target, "hidden_size"), _value(_value(config, other), "hidden_size")
            if other == name or not isinstance(old, int) or not isinstance(new, int) or old == new:
                continue
            for field, value in vars(sub).items():
                if isinstance(value, (list, tuple)) and len(value) > 1 and value[-1] == old \
                        and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                    setattr(_value(config, name), field, type(value)(max(8, v * new // old) for v in value))


def _fit_feature_grid(config: Any) -> None:
    """A ViT backbone's feature map sizes (SAM 3's ``backbone_feature_sizes``) its patch grid, ``image_size
    // patch_size``, times each of its ``scale_factors``: the image is no longer a multiple of the patch."""
    sizes, scales, backbone = (_value(config, n) for n in ("backbone_feature_sizes", "scale_factors",
                                                           "backbone_config"))
    side, patch = _value(backbone, "image_size"), _value(backbone, "patch_size")
    if isinstance(sizes, list) and isinstance(scales, (list, tuple)) and isinstance(side, int) \
            and isinstance(patch, int) and 0 < patch <= side and len(scales) >= len(sizes):
        config.backbone_feature_sizes = [[int(side // patch * f)] * 2 for f in scales[:len(sizes)]]


def _fit_image_tokens(config: Any) -> None:
    """An image's tokens pooled from its patch grid (Gemma 3's ``mm_tokens_per_image``, a square pooled
    from the ``image_size // patch_size`` patches a side) at most one per patch of the new grid."""
    tokens, vision = _value(config, "mm_tokens_per_image"), _value(config, "vision_config")
    side, patch = _value(vision, "image_size"), _value(vision, "patch_size")
    if isinstance(tokens, int) and isinstance(side, int) and isinstance(patch, int) and 0 < patch <= side:
        grid = side // patch
        if int(tokens ** 0.5) > grid:
            config.mm_tokens_per_image = grid * grid


def _fit_window(config: Any) -> None:
    """An audio encoder reading its frames in windows of ``2 * n_window`` (Qwen2.5-Omni's) keeps a
    position for each frame of a window after its stride-2 conv: ``max_source_positions`` at least
    ``n_window``."""
    window, positions = _value(config, "n_window"), _value(config, "max_source_positions")
    if isinstance(window, int) and isinstance(positions, int) and positions < window:
        config.max_source_positions = window


def _fit_derived(default: Any, config: Any) -> None:
    """A quantizer's width the default config sets equal to one it derives from its parts set to the new
    config's: its ``hidden_size`` where a property sums its parts' (X-Codec's ``codebook_dim``: the acoustic and
    the semantic models' widths), else one its width and a sub-config's width sum to
    (X-Codec 2's ``quantization_dim``: its acoustic width and its semantic model's); a quantizer's
    hidden width kept its codebook's (Mimi's ``vector_quantization_hidden_dimension``); channels the
    default sets to its width kept its width (Phi-4's audio ``ext_pw_out_channel``, ``nemo_conv_channels``)."""
    from transformers import PretrainedConfig

    pairs = []
    if isinstance(getattr(type(config), "hidden_size", None), property):
        pairs.append((_value(default, "hidden_size"), _value(config, "hidden_size")))
    for name, sub in vars(default).items():
        new_sub = _value(config, name)
        if isinstance(sub, PretrainedConfig) and isinstance(new_sub, PretrainedConfig):
            old = (_value(default, "hidden_size"), _value(sub, "hidden_size"))
            new = (_value(config, "hidden_size"), _value(new_sub, "hidden_size"))
            if all(isinstance(v, int) for v in old + new):
                pairs.append((sum(old), sum(new)))
    fields = inspect.signature(type(config).__init__).parameters
    for old, new in pairs:
        _set_equal(default, config, [f for f in fields if _QUANTIZER_WIDTH.search(f)], old, new)
    codebook = _value(default, "codebook_dim"), _value(config, "codebook_dim")  # Mimi's quantizer width
    _set_equal(default, config, [f for f in fields if _QUANTIZER_WIDTH.search(f) and f != "codebook_dim"], *codebook)
    width = _value(default, "hidden_size"), _value(config, "hidden_size")  # Phi-4's audio convs' channels
    _set_equal(default, config, [f for f in fields if "channel" in f and _value(default, f) != 3], *width)


def _set_equal(default: Any, config: Any, fields: list, old: Any, new: Any) -> None:
    """Each of ``fields`` the default config sets to ``old`` set to ``new``."""
    for field in fields:
        if isinstance(old, int) and isinstance(new, int) and _value(default, field) == old \
                and _value(config, field) not in (None, new):
            setattr(config, field, new)


_QUANTIZER_WIDTH = re.compile(r"^((codebook|quantization)_dim|vector_quantization_hidden_dimension)$")


def construct(cls: type, base: dict, changes: dict, tries: int = 8) -> Any:
    """``cls(**base, **changes)``; where the config's validators refuse it: a field the message states
    must equal a value (```adaptor_config.intermediate_size` (256) must equal `text_config.hidden_size
    // 4` (32)``) set to it, key/value heads it ties to the heads (``num_key_value_heads must match
    num_attention_heads``) made the heads; a layer count it ties to per-layer lists left at its default
    (the lists kept); else the changes the message names (``hidden_size_per_layer_input must be 0``) left
    at their defaults; again, until it builds or no change is named."""
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
            count = [n for n in named if n in ("num_hidden_layers", "num_layers") and isinstance(changes[n], int)]
            if count and any(isinstance(changes[n], (list, tuple)) and len(changes[n]) != changes[count[0]]
                             for n in named):  # per-layer lists the count must match (MuseSpark's audio stages)
                changes = {n: v for n, v in changes.items() if n not in count}
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
