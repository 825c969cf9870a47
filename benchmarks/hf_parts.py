"""Example inputs of model parts whose forward takes what another part computes, under names the
other input modules do not know (``hf_inputs.candidates`` tries them first; token embeddings and a
grid's patches as one batch of images last, ``late_sets``):

* token embeddings in place of token ids (Qwen3-Omni's talker and its code predictor, which refuse
  ids or keep no embedding table): ``inputs_embeds`` ``[batch, seq, hidden_size]``, with the
  attention mask where the forward takes one;
* a diffusion head's step (VibeVoice's: ``forward(noisy_images, timesteps, condition)``): noisy
  latents ``[batch, latent_size]``, one diffusion step of ``STEPS`` per item as a float
  ``[batch]``, the language model's condition ``[batch, hidden_size]``;
* a block-diffusion drafter (``forward(noise_embeds, context_hidden_states)``): ``block_size``
  embeddings to denoise ``[batch, block_size, hidden_size]`` and the target model's hidden states of
  its ``target_layer_ids`` concatenated ``[batch, seq, hidden_size * len(target_layer_ids)]``;
* tiled images (Mllama's vision tower): ``[batch, 1 image, max_num_tiles, channels, side, side]``,
  each image of aspect ratio 1:1 (``aspect_ratio_ids`` 1, the first of ``supported_aspect_ratios``),
  its one tile kept by ``aspect_ratio_mask`` ``[batch, 1, max_num_tiles]``;
* an encoder-decoder without its pre-nets (SpeechT5's base model): the encoder's and the decoder's
  hidden states, ``input_values`` ``[batch, 7, hidden_size]``, ``decoder_input_values`` ``[batch,
  decoder_seq, hidden_size]``;
* a codec reading a waveform and its semantic features (X-Codec 2's, NeuCodec's): ``input_values``
  ``[batch, 1, SAMPLES]`` and ``input_features`` ``[batch, SAMPLES // hop_length, bins]``, one frame
  of features per frame of its acoustic encoder (the sizes fixed: the two must agree);
* an audio-video encoder (Perception Encoder's): a mono waveform ``[batch, 1, samples]`` and a video
  of 2 frames ``[batch, 2, 3, 64, 64]`` at once;
* a depth decoder (Moshi's: ``forward(input_ids, last_hidden_state)``): a token of each codebook
  and the main decoder's state for each, ``[batch, seq, input_size]``;
* a waveform encoder taking whole frames of its patch stages (MuseSpark's audio tower): ``samples``
  two and three frames of ``prod(patch_sizes)`` samples;
* an image beside a prompt image and mask stacked on it to the config's ``image_size`` (SegGPT's):
  each ``[batch, channels, image_size[0] // 2, image_size[1]]``;
* a document's words with their boxes in [0, 1], its page and decoder ids (UDOP's);
* a codes-to-mel DiT's step (Qwen2.5-Omni's): ``CODES`` codes ``[batch, CODES]``, the noisy mel and
  the speaker embedding over their ``CODES * repeats`` frames, a reference mel ``[batch, REFERENCE,
  mel_dim]``, a time in [0, 1) per item (the lengths fixed: the codes' and the frames' are tied);
* codes to a waveform through that DiT and a vocoder (Qwen2.5-Omni's token2wav): ``CODES`` codes, the
  speaker's embedding ``[batch, enc_emb_dim]`` and a reference mel;
* a text each token of which adds ``audio_length_per_tok`` frames of its audio (Voxtral Realtime):
  ``TOKENS`` tokens and a spectrogram ``[batch, bins, TOKENS * audio_length_per_tok]`` (the lengths
  fixed: they are tied);
* a text model whose layers read a time condition its forward passes through (Voxtral Realtime's
  ``t_cond``, ``[1, 1, hidden_size]``, the whole model's time embedding broadcast to the batch);
* a robot policy's step (PI0's: ``forward(action_embeds, input_ids, pixel_values, pixel_attention_mask)``):
  one camera's image ``[batch, 1, channels, side, side]`` kept by its mask, a text led by the image's
  ``(side // patch_size)**2`` tokens, an action chunk's embeddings ``[batch, chunk_size, hidden_size]``
  (and its time's embedding ``[batch, hidden_size]`` where its layers read one: PI0.5's);
* a retrieval-augmented generator given its documents (RAG without a retriever): ``n_docs`` documents
  of each of 2 questions ``[2 * n_docs, seq]`` with their mask and scores ``[2, n_docs]``, decoder ids
  (the batch fixed: the documents are counted in it);
* a feature map injected as patch embeddings (Unlimited-OCR's vision encoder: ``patch_embeds``
  ``[batch, hidden_size, GRID, GRID]``);
* patch features pooled by index (Molmo2's adapter): one crop's ``GRID * GRID`` patches of the
  concatenated ViT layers ``[1, GRID**2, hidden_size * len(vision_feature_layer)]``, each output
  token pooling one 2 by 2 window (``pooled_patches_idx`` ``[(GRID // 2)**2, 4]``).

A maker is ``maker(model, sizes, generator) -> value`` as in ``hf_inputs``.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

STEPS = 1000  # diffusion steps a head's timestep is drawn among
GRID = 4  # patches a side of a feature map or a crop
TOKENS = 8  # tokens of a text each adding its audio frames (Voxtral Realtime)
CODES, REFERENCE = 6, 16  # codes a DiT turns into mel frames, frames of its reference mel
LARGE = 128  # the side of an image for a model whose downsampling leaves too few rows of a 64-pixel one
SAMPLES = 3200  # a codec's waveform where its semantic features must match its frames


def _int(config: Any, name: str, default: int) -> int:
    value = getattr(config, name, None)
    value = value[0] if isinstance(value, (list, tuple)) and value else value  # a square's side
    return int(value) if isinstance(value, int) else default


def _value(config: Any, name: str) -> Any:
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001 - a derived field its config cannot give
        return None


def _width(m: torch.nn.Module) -> int:
    return _int(m.config, "hidden_size", 128)


def late_sets(model: torch.nn.Module, params: dict) -> list:
    """``(names, dims, fixed)`` of token embeddings in place of the ids, where the forward takes both;
    a square image of ``LARGE`` pixels, where an image model's downsampling leaves too few rows of a
    64-pixel one (PP-OCRv5's text recognizer); an image's patches flattened, ``[batch, (image_size //
    patch_size)**2, channels * patch_size**2]`` (Molmo2's vision tower), where a vision tower's forward
    takes pixels alone; a grid's patches as one
    batch of images (PaddleOCR-VL's vision tower: ``[1, patches, channels, patch_size, patch_size]``),
    where the forward takes a grid beside its pixels."""
    out = []
    if "inputs_embeds" in params and "input_ids" in params:
        names = ["inputs_embeds"] + (["attention_mask"] if "attention_mask" in params else [])
        out.append((names, {"batch": (2, 3), "seq": (7, 11)}, {}))
    vision = getattr(model.config, "vision_config", None) or model.config
    alone = "pixel_values" in params and "input_ids" not in params
    if alone and getattr(model, "main_input_name", "") == "pixel_values":  # more rows than 64 pixels leave
        out.append((["pixel_values"], {"batch": (2, 3), "image": (LARGE, LARGE + 32)},
                    {"channels": _int(vision, "num_channels", 3)}))
    patch, side = _int(vision, "patch_size", 0), _int(vision, "image_size", 0)
    if "pixel_values" in params and "input_ids" not in params and "grid_thw" not in params and 0 < patch <= side:
        out.append((["pixel_values"], {"batch": (2, 3)}, {"pixels": "flat_patches", "grid": side // patch,
                                                         "width": _int(vision, "num_channels", 3) * patch * patch}))
    if "grid_thw" in params and "pixel_values" in params and "input_ids" not in params:
        vision = getattr(model.config, "vision_config", None) or model.config
        out.append((["pixel_values", "grid_thw"], {}, {"pixels": "grid_batch", "grid": GRID, "t": 1,
                                                       "channels": _int(vision, "num_channels", 3),
                                                       "patch": _int(vision, "patch_size", 14)}))
    return out


def part_sets(model: torch.nn.Module, params: dict) -> list:
    """``(names, dims, fixed)`` of the input sets of the other parts above ``model``'s forward matches
    (tried first: the generic sets would fill the part's own inputs beside a text's)."""
    out = []
    batch = {"batch": (2, 3)}
    if all(n in params for n in ("noisy_images", "timesteps", "condition")):
        out.append((["noisy_images", "timesteps", "condition"], batch, {"step": "diffusion"}))
    if "noise_embeds" in params and "context_hidden_states" in params:
        out.append((["noise_embeds", "context_hidden_states"], batch | {"seq": (7, 11)}, {}))
    if "aspect_ratio_ids" in params and "aspect_ratio_mask" in params and "pixel_values" in params \
            and "input_ids" not in params:  # the vision tower alone
        side = _int(model.config, "image_size", 64)
        out.append((["pixel_values", "aspect_ratio_ids", "aspect_ratio_mask"], batch,
                    {"pixels": "tiles", "image": side, "channels": _int(model.config, "num_channels", 3),
                     "tiles": _int(model.config, "max_num_tiles", 4)}))
    if "input_values" in params and "decoder_input_values" in params:
        out.append((["input_values", "decoder_input_values"], batch | {"decoder_seq": (5, 9)},
                    {"layout": "frames", "frames": 7, "bins": _width(model)}))
    hop = _value(model.config, "encoder_hop_length") or _value(model.config, "hop_length")  # at the input rate
    if "input_values" in params and "input_features" in params and isinstance(hop, int) and hop > 0:
        from hf_inputs import mel_bins  # a codec's waveform and its semantic features, frame for frame

        out.append((["input_values", "input_features"], batch, {
            "layout": "channels", "channels": 1, "samples": SAMPLES, "bins": mel_bins(model.config),
            "frames": SAMPLES // hop, "bins_first": False}))
    if "input_values" in params and "pixel_values_videos" in params:  # an audio-video encoder: both at once
        out.append((["input_values", "pixel_values_videos"], batch | {"samples": (3200, 4800)}, {
            "layout": "channels", "channels": 1, "video_channels": 3, "frames": 2, "image": 64}))
    if "last_hidden_state" in params and "input_ids" in params:  # a depth decoder: one token per codebook
        out.append((["input_ids", "last_hidden_state"], batch | {"seq": (7, 11)}, {}))
    stride = _stride(model.config)
    if getattr(model, "main_input_name", None) == "input_values" and stride and 3200 % stride:
        for layout in ({"layout": "samples"}, {"layout": "channels", "channels": 1}):  # whole patches of audio
            out.append((["input_values"], batch | {"samples": (2 * stride, 3 * stride)}, layout))
    size = _value(model.config, "image_size")
    if "prompt_pixel_values" in params and isinstance(size, (list, tuple)) and len(size) == 2:
        names = ["pixel_values", "prompt_pixel_values"] + (["prompt_masks"] if "prompt_masks" in params else [])
        out.append((names, batch, {"pixels": "half", "height": int(size[0]) // 2, "width": int(size[1]),
                                   "channels": _int(model.config, "num_channels", 3)}))
    if "bbox" in params and "pixel_values" in params and "visual_bbox" in params and "decoder_input_ids" in params:
        side = _int(model.config, "image_size", 64)  # a document's words, boxes in [0, 1], page and decoder ids
        out.append((["input_ids", "attention_mask", "bbox", "pixel_values", "decoder_input_ids"],
                    batch | {"seq": (7, 11), "decoder_seq": (5, 9)},
                    {"boxes": "unit", "image": side, "channels": _int(model.config, "num_channels", 3)}))
    if all(n in params for n in ("hidden_states", "condition_vector", "speaker_embedding", "quantized_code",
                                 "time_step")):  # a codes-to-mel DiT's step (Qwen2.5-Omni's), its length fixed
        repeats, mel = _int(model.config, "repeats", 1), _int(model.config, "mel_dim", 80)
        out.append((["hidden_states", "condition_vector", "speaker_embedding", "quantized_code", "time_step"],
                    batch, {"seq": CODES * repeats, "codes": CODES, "embed_width": mel, "mel": mel,
                            "speaker": _int(model.config, "enc_emb_dim", 192)}))
    if all(n in params for n in ("code", "conditioning", "reference_mel")):  # codes to a waveform through the DiT
        dit = getattr(model.config, "dit_config", None) or model.config
        out.append((["code", "conditioning", "reference_mel"], batch, {
            "codes": CODES, "mel": _int(dit, "mel_dim", 80), "speaker": _int(dit, "enc_emb_dim", 192),
            "vocab": _int(dit, "num_embeds", 1000)}))
    per_token = _value(model.config, "audio_length_per_tok")
    if isinstance(per_token, int) and all(n in params for n in ("input_ids", "input_features")):
        from hf_inputs import mel_bins  # a text whose every token adds the audio frames it stands for

        names = ["input_ids"] + (["attention_mask"] if "attention_mask" in params else []) + ["input_features"]
        out.append((names, batch, {"seq": TOKENS, "frames": TOKENS * per_token, "bins": mel_bins(model.config),
                                   "bins_first": True}))
    if "input_ids" in params and any(p.kind == p.VAR_KEYWORD for p in params.values()) and _reads(model, "t_cond"):
        names = ["input_ids"] + (["attention_mask"] if "attention_mask" in params else []) + ["t_cond"]
        out.append((names, batch | {"seq": (7, 11)}, {}))  # its layers' time condition, passed through
    chunk, vlm = _value(model.config, "chunk_size"), _value(model.config, "vlm_config")
    if "action_embeds" in params and "pixel_attention_mask" in params and isinstance(chunk, int) and vlm is not None:
        vision = _value(vlm, "vision_config")  # a robot policy: a camera's image tokens and a text, an action chunk
        side, patch = _int(vision, "image_size", 64), _int(vision, "patch_size", 16)
        time = ["timestep_embeds"] if _reads(model, "timestep_embeds") else []  # PI0.5's adaptive norms' time
        out.append((["input_ids", "pixel_values", "pixel_attention_mask", "action_embeds"] + time,
                    batch | {"seq": (7, 11)},
                    {"pixels": "video", "frames": 1, "image": side, "channels": _int(vision, "num_channels", 3),
                     "image_token": _value(vlm, "image_token_id"), "image_tokens": (side // patch) ** 2,
                     "chunk": chunk, "action_width": _int(_value(model.config, "dit_config"), "hidden_size", 128)}))
    docs = _value(model.config, "n_docs")
    if isinstance(docs, int) and all(n in params for n in ("context_input_ids", "context_attention_mask",
                                                           "doc_scores")):
        out.append((["context_input_ids", "context_attention_mask", "doc_scores", "decoder_input_ids"],
                    {"seq": (7, 11), "decoder_seq": (5, 9)}, {"batch": 2, "docs": docs}))  # documents retrieved
    if "patch_embeds" in params:
        out.append((["patch_embeds"], batch, {}))
    if "image_features" in params and "pooled_patches_idx" in params:
        out.append((["image_features", "pooled_patches_idx"], {}, {}))
    return out


def _generator_vocab(m: torch.nn.Module) -> int:
    return _int(_value(m.config, "generator") or m.config, "vocab_size", 1000)


def _family(name: str) -> Any:
    from hf_families import _FAMILY_MAKERS

    return _FAMILY_MAKERS[name]


def _pixels(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    from hf_families import pixels

    return pixels(m, s, g)


def _reads(model: torch.nn.Module, name: str) -> bool:
    """Whether a layer of ``model`` takes ``name`` in its forward (a condition the model's forward passes
    through its keyword arguments: Voxtral Realtime's text layers' ``t_cond``)."""
    return any(name in inspect.signature(m.forward).parameters for m in model.modules()
               if type(m).forward is not torch.nn.Module.forward)


def _stride(config: Any) -> int | None:
    """The samples a waveform encoder's patch stages take per output frame (the product of its
    ``patch_sizes``: MuseSpark's audio tower, which requires whole frames), else None."""
    sizes = _value(config, "patch_sizes")
    if not isinstance(sizes, (list, tuple)) or not sizes or not all(isinstance(v, int) for v in sizes):
        return None
    return int(torch.tensor(sizes).prod())


def _boxes(s: dict, g: torch.Generator) -> torch.Tensor:
    """Word boxes ``[batch, seq, 4]`` (x0, y0, x1, y1 sorted): in [0, 1] where the set says so (UDOP's),
    else in [0, 1000] (LayoutLM's)."""
    if s.get("boxes") == "unit":
        return torch.sort(torch.rand(s["batch"], s["seq"], 4, generator=g), -1)[0]
    return torch.sort(torch.randint(0, 1000, (s["batch"], s["seq"], 4), generator=g), -1)[0]


def _half(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    return torch.randn(s["batch"], s["channels"], s["height"], s["width"], generator=g)


def _tiles(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    return torch.randn(s["batch"], 1, s["tiles"], s["channels"], s["image"], s["image"], generator=g)


def _tile_mask(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    mask = torch.zeros(s["batch"], 1, s["tiles"], dtype=torch.int64)
    mask[..., 0] = 1  # a 1:1 image fills one tile
    return mask


def _pooled_index(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor:
    """The patch indices of each 2 by 2 window of a ``GRID`` by ``GRID`` crop, row-major."""
    half = GRID // 2
    rows = [[(2 * i + di) * GRID + 2 * j + dj for di in (0, 1) for dj in (0, 1)]
            for i in range(half) for j in range(half)]
    return torch.tensor(rows, dtype=torch.int64)


def _layers(m: torch.nn.Module, name: str) -> int:
    value = getattr(m.config, name, None)
    return len(value) if isinstance(value, (list, tuple)) else 1


MAKERS: dict[str, Any] = {
    "noisy_images": lambda m, s, g: torch.randn(s["batch"], _int(m.config, "latent_size", 64), generator=g),
    "timesteps": lambda m, s, g: torch.randint(0, STEPS, (s["batch"],), generator=g).float()
    if s.get("step") == "diffusion" else _family("timesteps")(m, s, g),  # (a trajectory's are its family's)
    "condition": lambda m, s, g: torch.randn(s["batch"], _width(m), generator=g),
    "noise_embeds": lambda m, s, g: torch.randn(s["batch"], _int(m.config, "block_size", 4), _width(m), generator=g),
    "context_hidden_states": lambda m, s, g: torch.randn(
        s["batch"], s["seq"], _width(m) * _layers(m, "target_layer_ids"), generator=g),
    "decoder_input_values": lambda m, s, g: torch.randn(s["batch"], s["decoder_seq"], _width(m), generator=g),
    "aspect_ratio_ids": lambda m, s, g: torch.ones(s["batch"], 1, dtype=torch.int64),
    "aspect_ratio_mask": _tile_mask,
    "pixel_values_videos": lambda m, s, g: torch.randn(s["batch"], s["frames"], s["video_channels"], s["image"],
                                                       s["image"], generator=g) if "video_channels" in s else _pixels(
        m, s, g),
    "last_hidden_state": lambda m, s, g: torch.randn(s["batch"], s["seq"], _int(m.config, "input_size", _width(m)),
                                                     generator=g),
    "prompt_pixel_values": lambda m, s, g: _half(m, s, g) if s.get("pixels") == "half" else _pixels(m, s, g),
    "prompt_masks": lambda m, s, g: _half(m, s, g) if s.get("pixels") == "half" else _pixels(m, s, g),
    "bbox": lambda m, s, g: _boxes(s, g),
    "condition_vector": lambda m, s, g: torch.randn(s["batch"], REFERENCE, s["mel"], generator=g),
    "speaker_embedding": lambda m, s, g: torch.randn(s["batch"], s["seq"], s["speaker"], generator=g),
    "quantized_code": lambda m, s, g: torch.randint(0, min(_int(m.config, "num_embeds", 1000), 1000),
                                                    (s["batch"], s["codes"]), generator=g),
    "time_step": lambda m, s, g: torch.rand(s["batch"], generator=g),
    "t_cond": lambda m, s, g: torch.randn(1, 1, _width(m), generator=g),  # one time embedding, broadcast
    "action_embeds": lambda m, s, g: torch.randn(s["batch"], s["chunk"], s["action_width"], generator=g)
    if "chunk" in s else _family("action_embeds")(m, s, g),
    "pixel_attention_mask": lambda m, s, g: torch.ones(s["batch"], s["frames"], dtype=torch.bool) if "chunk" in s
    else _family("pixel_attention_mask")(m, s, g),
    "timestep_embeds": lambda m, s, g: torch.randn(s["batch"], s["action_width"], generator=g),
    "context_input_ids": lambda m, s, g: torch.randint(3, min(_generator_vocab(m), 1000), (
        s["batch"] * s["docs"], s["seq"]), generator=g),
    "context_attention_mask": lambda m, s, g: torch.ones(s["batch"] * s["docs"], s["seq"], dtype=torch.int64),
    "doc_scores": lambda m, s, g: torch.randn(s["batch"], s["docs"], generator=g),
    "code": lambda m, s, g: torch.randint(0, min(s["vocab"], 1000), (s["batch"], s["codes"]), generator=g),
    "conditioning": lambda m, s, g: torch.randn(s["batch"], s["speaker"], generator=g),
    "reference_mel": lambda m, s, g: torch.randn(s["batch"], REFERENCE, s["mel"], generator=g),
    "patch_embeds": lambda m, s, g: torch.randn(s["batch"], _width(m), GRID, GRID, generator=g),
    "image_features": lambda m, s, g: torch.randn(
        1, GRID * GRID, _width(m) * _layers(m, "vision_feature_layer"), generator=g),
    "pooled_patches_idx": _pooled_index,
}
AXES = {"noisy_images": {0: "batch"}, "timesteps": {0: "batch"}, "condition": {0: "batch"},
        "noise_embeds": {0: "batch"}, "decoder_input_values": {0: "batch", 1: "decoder_seq"},
        "context_hidden_states": {0: "batch", 1: "seq"}, "condition_vector": {0: "batch"},
        "speaker_embedding": {0: "batch"}, "quantized_code": {0: "batch"}, "time_step": {0: "batch"},
        "last_hidden_state": {0: "batch", 1: "seq"}, "code": {0: "batch"}, "conditioning": {0: "batch"},
        "reference_mel": {0: "batch"}, "t_cond": {}, "context_input_ids": {1: "seq"},
        "context_attention_mask": {1: "seq"}, "doc_scores": {},
        "aspect_ratio_ids": {0: "batch"}, "aspect_ratio_mask": {0: "batch"}, "patch_embeds": {0: "batch"},
        "image_features": {}, "pooled_patches_idx": {}}


def axes(name: str, fixed: dict) -> dict | None:
    """``{axis: dim name}`` of an input this module lays out, else None."""
    if (name == "pixel_values" and fixed.get("pixels") in ("tiles", "flat_patches")) or (
            name == "pixel_values_videos" and "video_channels" in fixed):
        return {0: "batch"}
    if name == "pixel_values" and fixed.get("pixels") == "grid_batch":
        return {}
    if name in ("action_embeds", "pixel_attention_mask", "pixel_values", "timestep_embeds") and "chunk" in fixed:
        return {0: "batch"}
    if name in ("pixel_values", "prompt_pixel_values", "prompt_masks") and fixed.get("pixels") == "half":
        return {0: "batch"}
    if name in ("prompt_pixel_values", "prompt_masks") or (name == "timesteps" and fixed.get("step") != "diffusion"):
        return None
    return AXES.get(name)


LAYOUTS = ("tiles", "grid_batch", "half", "flat_patches")  # the pixel layouts of this module


def tiles(m: torch.nn.Module, s: dict, g: torch.Generator) -> torch.Tensor | None:
    """Pixels in a layout of this module (``LAYOUTS``), else None."""
    if s.get("pixels") == "half":
        return _half(m, s, g)
    if s.get("pixels") == "flat_patches":
        return torch.randn(s["batch"], s["grid"] ** 2, s["width"], generator=g)
    if s.get("pixels") == "grid_batch":
        return torch.randn(1, s["t"] * s["grid"] ** 2, s["channels"], s["patch"], s["patch"], generator=g)
    return _tiles(m, s, g) if s.get("pixels") == "tiles" else None
