"""An image-text-to-text model (transformers' ``LlavaForConditionalGeneration`` and models of its
form) exported as the three models a runtime runs, as onnxruntime-genai's vision-language pipelines
split them:

* ``vision_model``: ``pixel_values`` ``[batch_size, channels, height, width]`` -> ``image_features``
  ``[num_image_tokens, hidden]``, the vision tower and the multimodal projector
  (``model.get_image_features``), the features of every image concatenated (``num_image_tokens`` =
  images x tokens per image; the image size is the config's);
* ``embedding_model``: ``input_ids`` ``[batch_size, sequence_length]`` and ``image_features``
  ``[num_image_tokens, hidden]`` -> ``inputs_embeds`` ``[batch_size, sequence_length, hidden]``: the
  token embeddings with the image features scattered, in order, into the image tokens'
  places (``masked_scatter`` at ``input_ids == config.image_token_id``); ``num_image_tokens`` may be
  0 (a decoding step without images);
* ``text_model``: the decoder with its cache (``onnxport.pretrained.decoder``) taking
  ``inputs_embeds`` ``[batch_size, sequence_length, hidden]`` instead of token ids, with
  ``attention_mask`` ``[batch_size, total_sequence_length]``, ``position_ids`` and
  ``past_key_values.<i>.key`` / ``.value`` -> ``logits`` and ``present.<i>.key`` / ``.value``.

The number of image tokens of a prompt must equal the features' rows (as in transformers, which
raises otherwise); the validation of the embedding model therefore runs on prompts made to hold
them (``prompt``), not on token ids drawn at random.

Semantics: transformers' ``models/llava/modeling_llava.py`` (``LlavaModel.get_image_features``,
``get_placeholder_mask``, ``forward``: embeddings, ``masked_scatter``, language model).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from onnxport.errors import TargetError
from onnxport.export import to_onnx
from onnxport.pretrained.tasks import BATCH, SEQ, EXAMPLE_BATCH, image_size, special_ids, token_ids, vocab_size
from onnxport.result import ExportResult

IMAGE_TOKENS = "num_image_tokens"
PARTS = ("vision_model", "embedding_model", "text_model")


def image_token_id(model: torch.nn.Module) -> int:
    """The id of the image placeholder token (``config.image_token_id``, or ``image_token_index``).
    Raises ``TargetError`` when the config has neither."""
    config = model.config
    for key in ("image_token_id", "image_token_index"):
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    raise TargetError(f"{type(model).__name__}'s config has no image_token_id",
                      hint="the task image-text-to-text exports models whose prompt holds image placeholder tokens")


class VisionEncoder(torch.nn.Module):
    """``pixel_values [batch, channels, height, width] -> image_features [batch * tokens, hidden]``:
    the model's ``get_image_features`` (vision tower and projector), the images' features concatenated."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """The features of every image, in order, one row per image token."""
        out = self.model.get_image_features(pixel_values=pixel_values, return_dict=True)
        features = out.pooler_output if hasattr(out, "pooler_output") else out
        if isinstance(features, (list, tuple)):
            features = torch.cat(list(features), dim=0)
        return features.reshape(-1, features.shape[-1])


class EmbeddingMerge(torch.nn.Module):
    """``input_ids [batch, seq], image_features [tokens, hidden] -> inputs_embeds [batch, seq, hidden]``:
    the token embeddings with the image features at the image tokens (transformers'
    ``masked_scatter`` of the features into the embeddings, in row-major order of the tokens)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.embed = model.get_input_embeddings()
        self.image_token = image_token_id(model)

    def forward(self, input_ids: torch.Tensor, image_features: torch.Tensor) -> torch.Tensor:
        """The merged embeddings."""
        embeds = self.embed(input_ids)
        mask = (input_ids == self.image_token).unsqueeze(-1).expand_as(embeds)
        return embeds.masked_scatter(mask, image_features.to(embeds.dtype))


def pixel_values(model: torch.nn.Module, batch: int, preprocessor: dict | None = None, seed: int = 0) -> torch.Tensor:
    """Random float images ``[batch, channels, height, width]`` of the vision config's size."""
    vision = getattr(model.config, "vision_config", model.config)
    h, w = image_size(vision, preprocessor)
    channels = int(getattr(vision, "num_channels", 3) or 3)
    return torch.randn(batch, channels, h, w, generator=torch.Generator().manual_seed(seed))


def prompt(model: torch.nn.Module, batch: int, text: int, per_image: int, seed: int = 0,
           padded: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` ``[batch, text + per_image]`` of prompts holding one image each:
    one text token, the ``per_image`` image tokens, the other text tokens; the last row left-padded by
    ``padded`` tokens (the model's padding id, mask 0) before its text."""
    gen = torch.Generator().manual_seed(seed)
    image = image_token_id(model)
    ids = token_ids(vocab_size(model), (batch, text), special_ids(model) | {image}, gen)
    ids = torch.cat([ids[:, :1], torch.full((batch, per_image), image), ids[:, 1:]], dim=1)
    mask = torch.ones_like(ids)
    if padded and batch > 1:
        pad = getattr(model.generation_config, "pad_token_id", None)
        pad = pad if pad is not None else 0
        row = torch.cat([torch.full((padded,), pad), ids[-1, :ids.shape[1] - padded]])
        ids[-1], mask[-1, :padded] = row, 0
    return ids, mask


def tokens_per_image(model: torch.nn.Module, preprocessor: dict | None = None) -> int:
    """The image tokens one image of the config's size fills (rows of ``VisionEncoder`` on one image)."""
    with torch.no_grad():
        return int(VisionEncoder(model).eval()(pixel_values(model, 1, preprocessor)).shape[0])


def export_parts(model: torch.nn.Module, preprocessor: dict | None = None,
                 on_step: Callable[[str, float], None] | None = None, **options: Any) -> dict[str, ExportResult]:
    """``{"vision_model", "embedding_model", "text_model"}`` of ``model`` (see the module docstring),
    each an ``ExportResult`` of ``to_onnx`` (``options``: its further arguments).

    Raises ``TargetError`` when the config has no image token id or the model no cache, and the
    errors of ``to_onnx``."""
    from onnxport.pretrained.decoder import CausalLMWithCache, example_step

    per_image = tokens_per_image(model, preprocessor)
    images = pixel_values(model, EXAMPLE_BATCH, preprocessor)
    vision = to_onnx(VisionEncoder(model).eval(), (images,), dynamic_shapes={"pixel_values": {0: BATCH}},
                     input_names=["pixel_values"], output_names=["image_features"], on_step=on_step, **options)
    ids, _ = prompt(model, EXAMPLE_BATCH, 5, per_image)
    with torch.no_grad():
        features = VisionEncoder(model).eval()(images)
    tokens = torch.export.Dim(IMAGE_TOKENS, min=0)
    merge = to_onnx(EmbeddingMerge(model).eval(), (ids, features),
                    dynamic_shapes={"input_ids": {0: BATCH, 1: SEQ}, "image_features": {0: tokens}},
                    input_names=["input_ids", "image_features"], output_names=["inputs_embeds"], on_step=on_step,
                    **options)
    inputs, dims = example_step(model)
    with torch.no_grad():
        inputs = {"inputs_embeds": model.get_input_embeddings()(inputs.pop("input_ids")), **inputs}
    dims = {"inputs_embeds": {0: BATCH, 1: SEQ}, **{k: v for k, v in dims.items() if k != "input_ids"}}
    layers = len(inputs["past_key_values"].layers)
    names = ["logits"] + [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    from onnxport.pretrained.tasks import PAST, TOTAL

    text = to_onnx(CausalLMWithCache(model).eval(), kwargs=inputs, dynamic_shapes=dims, output_names=names,
                   relations={TOTAL: f"{PAST} + {SEQ}"}, on_step=on_step, **options)
    return {"vision_model": vision, "embedding_model": merge, "text_model": text}


def validate_parts(parts: dict[str, ExportResult], model: torch.nn.Module,
                   preprocessor: dict | None = None) -> dict[str, ExportResult]:
    """Each part with its ``validation``: the vision and text models at their default sizes, the
    embedding model on prompts holding as many image tokens as the features have rows (batch 1 and
    3, other lengths) and on text without images (no features)."""
    per_image = tokens_per_image(model, preprocessor)
    hidden = parts["embedding_model"].example[0][1].shape[-1]
    sets = []
    for batch, text, seed in ((1, 3, 1), (3, 9, 2)):
        ids, _ = prompt(model, batch, text, per_image, seed=seed)
        sets.append((ids, torch.randn(batch * per_image, hidden, generator=torch.Generator().manual_seed(seed))))
    ids, _ = prompt(model, 2, 4, 0, seed=3)
    sets.append((ids, torch.zeros(0, hidden)))
    out = {}
    for stem, part in parts.items():
        report = part.validate(inputs=sets, sizes=[], values=[]) if stem == "embedding_model" else part.validate()
        out[stem] = part.replace(validation=report)
    return out


def export_image_text_to_text(model: torch.nn.Module, preprocessor: dict | None = None, *, validate: bool = True,
                              generate: int = 16, on_step: Callable[[str, float], None] | None = None,
                              **options: Any) -> tuple[dict[str, ExportResult], tuple]:
    """``(parts, generation)`` of the task ``image-text-to-text``: the three parts (``export_parts``),
    each validated against eager PyTorch (``validate_parts``) when ``validate``, and, when
    ``generate``, the decoding checks of ``onnxport.pretrained.vision_language_generation`` (batch 1;
    batch 2, the second prompt left-padded), each ``(label, GenerationReport)``. ``on_step`` is called
    ``(step, seconds)`` for the steps of each export, ``validate`` and ``generate``."""
    import time

    from onnxport.pretrained.vision_language_generation import check_generation

    step = on_step or (lambda name, seconds: None)
    parts = export_parts(model, preprocessor, on_step=on_step, **options)
    if validate:
        start = time.perf_counter()
        parts = validate_parts(parts, model, preprocessor)
        step("validate", time.perf_counter() - start)
    generation = []
    if generate:
        start = time.perf_counter()
        per_image = tokens_per_image(model, preprocessor)
        for batch, label in ((1, "batch 1, one image"), (2, "batch 2, one image each, the second prompt left-padded")):
            ids, mask = prompt(model, batch, 6, per_image, seed=batch, padded=2 if batch > 1 else 0)
            images = pixel_values(model, batch, preprocessor, seed=batch)
            generation.append((label, check_generation(parts, model, ids, mask, images, max_new_tokens=generate)))
        step("generate", time.perf_counter() - start)
    return parts, tuple(generation)
