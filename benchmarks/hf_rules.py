"""Per-field rules of the tiny configs: what one constructor parameter of a config class becomes,
by its name and value (``hf_config.overrides`` applies them to every parameter and sub-config).

* ``tiny``: widths 128, 2 heads (1 key/value head where the default groups them), head sizes 64,
  feed-forward 256, 2 layers, vocabulary 1000, 4 experts (2 per token), images of 4 patches
  and at least 64 pixels, stage depths 1, stage widths an eighth, positions 256, object queries
  ``QUERIES``;
* ``shallow``: only layers, stage depths, vocabulary and experts reduced, widths and images as the
  defaults;
* ``narrow``: ``tiny`` with the default number of layers and stage depths (a config class whose
  validators tie per-layer patterns to the layer count: GPT-Neo's ``attention_types``);
* rope parameters: multimodal rope sections scaled to the new head size, the original context within
  the new positions.

The rules read one field at a time; the fits that tie several fields together (widths, strides,
heads, backbone indices) are in ``hf_widths.py``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

WIDTH, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS, VOCAB, EXPERTS, POSITIONS = 128, 2, 1, 64, 256, 2, 1000, 4, 256
QUERIES = 16  # object queries of a detector (top-k over the anchors of a 64-pixel image)
SLIDING_WINDOW = 4  # tokens a sliding-window layer attends, where the config leaves it unset
PREDICTION = 8  # time steps a forecaster predicts where its config names none

_LAYERS = re.compile(r"^(num_(hidden_|encoder_|decoder_|text_|vision_|audio_|transformer_|)layers|n_layers?|"
                     r"num_self_attends_per_block|"
                     r"(encoder|decoder|text|vision|audio)_layers|depth|num_hidden_blocks|num_blocks)$")
_WIDTH = re.compile(r"^(hidden_size|hidden_size_global|cross_hidden_size|d_model|n_embd|n_embed|embed_dim|dim|"
                    r"hidden_dim|d_embed|model_dim|emb_dim|adapter_in_dim|adapter_out_dim|adapter_input_size|"
                    r"word_embed_proj_dim|projection_dim|proj_dim|text_embed_dim|vision_embed_dim|"
                    r"(encoder|decoder|text|vision|audio|backbone|fpn)_hidden_size|d_hidden|d_latents)$")
_HEADS = re.compile(r"^(num_attention_heads|n_heads?|num_heads|(encoder|decoder)_attention_heads|attention_heads|"
                    r"num_(encoder|decoder)_attention_heads)$")
_KV = re.compile(r"^(num_key_value_heads|num_kv_heads|n_kv_heads|multi_query_group_num)$")
_HEAD_DIM = re.compile(r"^(head_dim|d_kv|attention_head_dim|kv_channels|(qk|v|qk_nope|qk_rope)_head_dim|"
                       r"attention_head_size)$")
_FFN = re.compile(r"(intermediate_size|ffn_dim|^d_ff$|^n_inner$|^mlp_dim$|^dim_feedforward$|^ffn_hidden_size$|"
                  r"^intermediate_dim$|^encoder_ffn_dim$|^decoder_ffn_dim$|^moe_hidden_size$|^projector_hidden_size$)")
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



def _uses_sliding(config: Any) -> bool:
    """Whether a config names sliding-window attention beside its ``sliding_window`` (a layer type, a
    head count of its sliding layers)."""
    return any("sliding" in str(v) for v in vars(config).values() if isinstance(v, (list, tuple))) or any(
        "sliding" in k and k != "sliding_window" for k in vars(config))


_LAYER_TYPES = ("layers_block_type", "block_types", "hybrid_layer_types")


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
    if name in ("n_group", "topk_group", "n_shared_experts", "first_k_dense_replace", "num_dense_layers"):
        return min(value, 1)
    if name.endswith("_layer_period") or name.endswith("_layers_block_period"):
        return min(value, 2)
    if name == "num_kv_shared_layers":  # the last layers reuse earlier ones' keys: none left to share at 2 layers
        return 0 if rules.layers else None
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
