"""The decoding check of an image-text-to-text model exported as its three parts
(``onnxport.pretrained.vision_language``): greedy decoding in onnxruntime, the way a runtime chains
the parts, against the model's own greedy ``generate`` on the same prompt and images.

In onnxruntime: ``vision_model`` once on the images; ``embedding_model`` on the prompt with those
features; ``text_model`` on the merged embeddings with an empty cache; then each step the chosen
token through ``embedding_model`` (with no image features) and ``text_model`` with the cache the
previous step returned, the mask grown by one. Positions and finished rows as
``onnxport.verify.decoding.greedy`` (``cumsum(mask) - 1``; a row that chose an end-of-sequence
token takes the padding id from then on). The decoder-only loop of ``onnxport.verify.decoding``
feeds token ids; this one feeds embeddings, which is why it is its own.

Semantics: ``transformers.GenerationMixin.generate`` (greedy) of ``LlavaForConditionalGeneration``
with ``input_ids``, ``attention_mask`` and ``pixel_values``.
"""

from __future__ import annotations

import numpy as np
import torch

from onnxport.capture.caches import INPUT_PREFIX, OUTPUT_PREFIX
from onnxport.verify.decoding import first_positions
from onnxport.verify.generation import LOGITS_ATOL, LOGITS_RTOL, GenerationReport, compare_decodings, reference
from onnxport.verify.runner import OrtRunner


def _run(runner: OrtRunner, **feeds: np.ndarray) -> dict[str, np.ndarray]:
    return dict(zip(runner.output_names, runner.session.run(None, feeds)))


def check_generation(parts: dict, model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     pixel_values: torch.Tensor, max_new_tokens: int = 16, atol: float = LOGITS_ATOL,
                     rtol: float = LOGITS_RTOL) -> GenerationReport:
    """Greedy decoding with ``parts`` (``vision_model``, ``embedding_model``, ``text_model``, each an
    ``ExportResult``) in onnxruntime against ``model.generate(input_ids=..., attention_mask=...,
    pixel_values=...)`` (greedy), step by step; see the module docstring.

    Args:
        parts: the three exported models.
        model: the transformers model they were exported from (eval mode).
        input_ids, attention_mask: int64 ``[batch, prompt]``, the prompt holding each image's tokens
            (left padding: mask 0).
        pixel_values: float ``[images, channels, height, width]``.
        max_new_tokens: tokens to generate.
        atol, rtol: tolerance of the logits.

    Returns a ``GenerationReport``; raises ``ValidationError`` when ``generate`` fails."""
    expected, ref_logits, ids = reference(model, max_new_tokens, {
        "input_ids": input_ids, "attention_mask": attention_mask, "pixel_values": pixel_values})
    vision, merge, text = (OrtRunner(parts[k].model_proto) for k in ("vision_model", "embedding_model", "text_model"))
    features = _run(vision, pixel_values=pixel_values.numpy())["image_features"]
    tokens, mask = input_ids.numpy().astype(np.int64), attention_mask.numpy().astype(np.int64)
    batch = tokens.shape[0]
    none = np.zeros((0, features.shape[-1]), dtype=features.dtype)
    feeds = {}
    for i in text.session.get_inputs():
        if i.name.startswith(INPUT_PREFIX + "."):
            shape = [d if isinstance(d, int) else (batch if d == "batch_size" else 0) for d in i.shape]
            feeds[i.name] = np.zeros(shape, dtype=np.float32)
    positions = first_positions(mask)
    seen = tokens.shape[1]
    embeds = _run(merge, input_ids=tokens, image_features=features)["inputs_embeds"]
    unfinished = np.ones(batch, dtype=bool)
    chosen, logits = [], []
    for _ in range(max_new_tokens):
        n = embeds.shape[1]
        feeds.update(inputs_embeds=embeds, attention_mask=mask[:, :seen])
        if "position_ids" in text.input_names:
            feeds["position_ids"] = positions[:, seen - n:seen]
        out = _run(text, **feeds)
        for name in list(feeds):
            if name.startswith(INPUT_PREFIX + "."):
                feeds[name] = out[OUTPUT_PREFIX + name[len(INPUT_PREFIX):]]
        last = out["logits"][:, -1, :].astype(np.float32)
        logits.append(last)
        nxt = last.argmax(-1).astype(np.int64)
        if ids["pad"] is not None:
            nxt = np.where(unfinished, nxt, ids["pad"])
        chosen.append(nxt)
        if ids["eos"]:
            unfinished &= ~np.isin(nxt, list(ids["eos"]))
        seen += 1
        mask = np.concatenate([mask, np.ones((batch, 1), dtype=np.int64)], axis=1)
        positions = np.concatenate([positions, positions[:, -1:] + 1], axis=1)
        if ids["eos"] and not unfinished.any():
            break
        embeds = _run(merge, input_ids=nxt[:, None], image_features=none)["inputs_embeds"]
    got = np.stack(chosen, axis=1) if chosen else np.zeros((batch, 0), np.int64)
    return compare_decodings(expected, ref_logits, got, logits, atol, rtol)
