"""Fields a config class leaves unset (None, or empty) by default that its model requires,
set to what the family's published configs state (``hf_config.overrides`` applies them after the
generic rules, to a config and its sub-configs, by the config's ``model_type``):

* per-layer types a model indexes layer by layer (LFM2-MoE's ``layer_types``, DeepSeek-OCR 2's
  ``mlp_layer_types``): one of each kind over the tiny layer count, a dense layer first;
* the routed experts of a MoE whose default names none (dots.llm1's ``n_routed_experts``,
  DiffusionGemma's ``num_experts``);
* the vocabulary map of a model placing a VQ-VAE's image tokens in its text vocabulary (Chameleon's
  ``IMGIMG...`` names, Emu3's ``<|visual token...|>``): ``<image>`` and the codebook's first entries at the
  top of the tiny vocabulary (as many as half of it: the text-only inputs the sweep gives read none);
* InstructBLIP-Video's video placeholder token (the vocabulary's last, as BLIP-2's image token);
* Granite 4 Vision's Q-Former window rate (``"1/4"``, its docstring's example) and the vision layers it
  injects into the text layers (each tiny layer into its peer);
* LW-DETR's projector scales (one feature level, as its published tiny config);
* Cohere Compass's rope per layer type, DBRX's ``clip_qkv`` (its attention clamps the projections by
  it; torch refuses a clamp without bounds), ESM's padding id (its positions count from it).

A field is set only where the default leaves it unset: a config that states it keeps its value.
``TIED``: sub-config fields a family's published configs make equal (CLVP's speech encoder reads the
speech decoder's tokens: its vocabulary is the decoder's). ``FITTED``: fields set over the generic rules
to agree with the tiny widths as the published configs do: ALIGN's projection width, which its image
embeddings (EfficientNet's last stage, scaled by its width coefficient) are compared at unprojected;
ERNIE 4.5 VL's rope sections; Llama 4's vision MLP width; Apertus 1.5's image and audio code ranges
within the tiny vocabulary; EdgeTAM's backbone and feature sizes; DeepSeek-OCR 2's SAM widths; Kolibri
1.1's per-layer sources; Depth Pro's patch its encoders' image size (its validator ties them) and its
hooks within their layers; FastVLM's tower at its family's smallest size; dots.ocr 3's vision experts and
text heads and ranks (fields its config lets no one read globally, left at their defaults by the generic
rules), its sliding layers' own through its ``swa_*`` keywords.

``keep_extras``: the attributes a parent config sets on a sub-config beyond its constructor's fields
(CHMv2's DINOv3 backbone's ``return_class_token``, FastVLM's timm tower's ``hidden_size``, BLT's
``encoder_cross_output_size``) kept on the rebuilt tiny sub-config where it lacks them.
"""

from __future__ import annotations

from typing import Any

from hf_rules import EXPERTS, FFN, HEAD_DIM, VOCAB


def _layers(config: Any, out: dict) -> int:
    count = out.get("num_hidden_layers", getattr(config, "num_hidden_layers", 2))
    return count if isinstance(count, int) else 2


def _kinds(first: str, rest: str):
    """One ``first`` layer, the rest ``rest`` (a dense MLP before the sparse ones, as published)."""
    return lambda config, out: [first] + [rest] * (_layers(config, out) - 1)


def _rope_per_type(config: Any, out: dict) -> dict:
    types = set(getattr(config, "layer_types", None) or ["full_attention"])
    half = (out.get("head_dim") or HEAD_DIM) // 2
    section = [half - 2 * (half * 5 // 16), half * 5 // 16, half * 5 // 16]  # 24, 20, 20 of a 128-wide head
    return {t: {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section} for t in sorted(types)}


def _image_vocabulary(name, extra: tuple = ()):
    """A vocabulary map: ``<image>``, the tokens ``extra`` names, and ``name(i)`` of codebook entry ``i``."""
    def make(config: Any, out: dict) -> dict:
        vocab = out.get("vocab_size", getattr(config, "vocab_size", 1000))
        vq = getattr(config, "vq_config", None)
        count = min(int(getattr(vq, "num_embeddings", None) or getattr(vq, "codebook_size", 0) or 8192), vocab // 2)
        first = vocab - count
        specials = {t: first - 1 - i for i, t in enumerate(("<image>",) + extra)}
        return specials | {name(i): first + i for i in range(count)}
    return make


def _chameleon_token(i: int) -> str:
    return "IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(i)) + "Z"


UNSET: dict[str, dict] = {
    "chameleon": {"vocabulary_map": _image_vocabulary(_chameleon_token)},
    "emu3": {"vocabulary_map": _image_vocabulary(lambda i: f"<|visual token{i:06d}|>", ("<|extra_200|>",))},
    "lfm2_moe": {"layer_types": _kinds("conv", "full_attention")},
    "deepseek_ocr2_text": {"mlp_layer_types": _kinds("dense", "sparse")},
    "dots1": {"n_routed_experts": lambda c, o: EXPERTS, "num_experts_per_tok": lambda c, o: 2,
              "n_shared_experts": lambda c, o: 1},
    "diffusion_gemma_text": {"num_experts": lambda c, o: EXPERTS, "top_k_experts": lambda c, o: 2,
                             "moe_intermediate_size": lambda c, o: FFN},
    "cohere_compass_text": {"rope_parameters": _rope_per_type},
    "DbrxAttentionConfig": {"clip_qkv": lambda c, o: 8.0},
    "esm": {"pad_token_id": lambda c, o: 1},
    "lw_detr": {"projector_scale_factors": lambda c, o: [1.0]},
    "granite4_vision": {"downsample_rate": lambda c, o: "1/4", "deepstack_layer_map": lambda c, o: [[0, 0], [1, 1]]},
    "instructblipvideo": {"video_token_index": lambda c, o: VOCAB - 1},
}


TIED: dict[str, list] = {
    "clvp": [("speech_config.vocab_size", "decoder_config.vocab_size")],
}


def _last_stage_width(config: Any, out: dict) -> int | None:
    vision = out.get("vision_config")
    return None if vision is None else int(vision.out_channels[-1] * vision.width_coefficient)


def _hw_sections(config: Any, out: dict) -> dict:
    """ERNIE 4.5 VL's rope sections as its code's default (22, 22, 20 of a 128-wide head: height and width
    equal, they are interleaved) scaled to the tiny head."""
    half = (out.get("head_dim") or HEAD_DIM) // 2
    side = half * 11 // 32
    return dict(out.get("rope_parameters") or getattr(config, "rope_parameters", None) or {}) | {
        "mrope_section": [side, side, half - 2 * side]}


def _repvit(config: Any, out: dict) -> Any:
    """EdgeTAM's timm backbone named as its config's defaults mean it (``"archirecture": "repvit_m1"``, a
    misspelt key that leaves timm's ResNet-50, whose stage widths its neck does not take)."""
    backbone = out.get("backbone_config", getattr(config, "backbone_config", None))
    if backbone is not None and getattr(backbone, "architecture", None) == "resnet50":
        backbone.architecture = "repvit_m1"
    return backbone


def _feature_sizes(config: Any, out: dict) -> list:
    """EdgeTAM's feature map sizes (stated for its 1024-pixel images) at the sweep's 64-pixel image."""
    return [[max(1, v * 64 // 1024) for v in size] for size in getattr(config, "backbone_feature_sizes", [])]


def _token_ranges(config: Any, out: dict) -> int | None:
    """Apertus 1.5's image and audio code ranges (``image_token_offset``, codebooks of ``CODES`` each) at
    the top of the tiny vocabulary, below the two placeholder ids moved to its end; the audio offset
    where the image codes end (its validator ties them). Returns the image offset."""
    vocab = out["text_config"].vocab_size if "text_config" in out else VOCAB
    for name in ("vision_config", "audio_config"):
        if name in out:
            out[name].codebook_size = CODES
    out["audio_token_offset"] = vocab - 2 - CODES
    return vocab - 2 - 2 * CODES


def _shuffled_width(config: Any, out: dict) -> int:
    """Llama 4's vision MLP width, which its adapter takes as the pixel-shuffled patches' width
    (``hidden_size / pixel_shuffle_ratio**2``: 1408 and 5632 as published)."""
    return int(out.get("hidden_size", config.hidden_size) / config.pixel_shuffle_ratio ** 2)


def _sam_channels(config: Any, out: dict) -> Any:
    """DeepSeek-OCR 2's SAM tower's downsampling widths ending at its encoder's width (512 and 896 as
    published: the second is the encoder's), the first half the second."""
    sam, encoder = out.get("sam_config"), out.get("encoder_config")
    if sam is not None and encoder is not None:
        sam.downsample_channels = [encoder.hidden_size // 2, encoder.hidden_size]
    return sam


def _own_sources(config: Any, out: dict) -> list:
    """Kolibri 1.1's layers each reading its own keys and values (the published layout's sources are
    layers the tiny config cuts), its first indexed layer an indexer, its indexer heads within a key
    head's query heads, its first layer dense."""
    types = out.get("layer_types") or config.layer_types
    indexed = [i for i, t in enumerate(types) if t == "indexed_attention"]
    out["index_layers"] = indexed[:1]
    out["mlp_only_layers"] = [0]  # one dense layer first, as the published two of 48; the rest MoE
    heads = out.get("num_attention_heads", config.num_attention_heads)
    out["index_num_heads"] = min(config.index_num_heads, max(1, heads // out.get("num_key_value_heads",
                                                                                  config.num_key_value_heads)))
    return list(range(len(types)))


def _smallest_fastvit(config: Any, out: dict) -> Any:
    """FastVLM's timm tower at the family's smallest size (MobileCLIP's ``fastvit_mci0``, 11M parameters,
    1024 features) in place of its default ``fastvit_mci3`` (125M), its width the tower's features."""
    vision = out.get("vision_config", getattr(config, "vision_config", None))
    if getattr(vision, "architecture", None) == "fastvit_mci3":
        vision.architecture, vision.hidden_size = "fastvit_mci0", 1024
    return vision


def _hooks(config: Any, out: dict) -> list | None:
    """Depth Pro's hooked patch-encoder layers spread over the tiny encoder's layers, in their order."""
    patch = out.get("patch_model_config")
    ids = list(config.intermediate_hook_ids)
    if patch is None or not ids:
        return None
    last = patch.num_hidden_layers - 1
    return [round(i * last / max(ids)) for i in ids]


# dots.ocr 3's text layers: fields its per-layer config keeps from being read globally (the generic rules
# leave them at their defaults), and its sliding layers' own (``swa_*`` constructor keywords)
_DOTS3_TEXT = {"num_attention_heads": 2, "num_key_value_heads": 2, "kv_lora_rank": 32, "qk_nope_head_dim": 64,
               "index_n_heads": 2, "index_head_dim": 64, "swa_num_attention_heads": 2, "swa_num_key_value_heads": 2,
               "swa_q_lora_rank": 32, "swa_kv_lora_rank": 32, "swa_head_dim": 128, "swa_qk_nope_head_dim": 64,
               "swa_v_head_dim": 64}


CODES = 128  # a tiny codebook where a vocabulary holds its codes


FITTED = {"align": {"projection_dim": _last_stage_width}, "ernie4_5_vl_moe_text": {"rope_parameters": _hw_sections},
          "edgetam_vision_model": {"backbone_config": _repvit, "backbone_feature_sizes": _feature_sizes},
          "apertus1p5": {"image_token_offset": _token_ranges},
          "llama4_vision_model": {"intermediate_size": _shuffled_width},
          "deepseek_ocr2_vision": {"sam_config": _sam_channels},
          "kolibri1_1": {"kv_source_layers": _own_sources},
          "fast_vlm": {"vision_config": _smallest_fastvit},
          "depth_pro": {"patch_size": lambda c, o: o["image_model_config"].image_size if "image_model_config" in o
                        else None, "intermediate_hook_ids": _hooks},
          "dots3_note_vision_encoder": {"num_local_experts": lambda c, o: EXPERTS},
          "dots3_note_text": {n: (lambda v: lambda c, o: v)(v) for n, v in _DOTS3_TEXT.items()}}


def _tie(out: dict, target: str, source: str) -> None:
    """``target`` (``sub_config.field`` of ``out``'s built sub-configs) set to ``source``'s value."""
    (t_sub, t_name), (s_sub, s_name) = target.split("."), source.split(".")
    if t_sub in out and s_sub in out:
        setattr(out[t_sub], t_name, getattr(out[s_sub], s_name))


def fill(config: Any, params: Any, out: dict) -> None:
    """``out`` (the constructor arguments of ``config``'s tiny config) given the fields ``UNSET``
    names for its ``model_type`` (else its class's name) that the config leaves unset."""
    fields = UNSET.get(getattr(config, "model_type", "")) or UNSET.get(type(config).__name__, {})
    for name, value in fields.items():
        current = getattr(config, name, None)
        if name in params and name not in out and (current is None or (not current and current != 0)):
            out[name] = value(config, out)
    for target, source in TIED.get(getattr(config, "model_type", ""), []):
        _tie(out, target, source)
    for name, value in FITTED.get(getattr(config, "model_type", ""), {}).items():
        if (name in params or name.startswith("swa_")) and value(config, out) is not None:
            out[name] = value(config, out)


def keep_extras(old: Any, new: Any) -> Any:
    """``new`` (``old`` rebuilt from its constructor's fields) given ``old``'s attributes that neither its
    class's defaults nor its constructor name and ``new`` lacks (set on it by its parent config)."""
    import inspect

    try:
        base = set(vars(type(old)()))
    except Exception:  # noqa: BLE001 - a config class that cannot be built alone keeps nothing extra
        return new
    params = inspect.signature(type(old).__init__).parameters
    for name, value in vars(old).items():
        if name not in base and name not in params and not name.startswith("_") and not hasattr(new, name):
            setattr(new, name, value)
    return new
