"""A transformers decoder (``*ForCausalLM``) exported with its key/value cache, named as
onnxruntime-genai and Optimum name it.

Inputs: ``input_ids`` ``[batch_size, sequence_length]``, ``attention_mask`` ``[batch_size,
total_sequence_length]``, ``position_ids`` ``[batch_size, sequence_length]`` (when the model takes
them), ``past_key_values.<i>.key`` / ``.value`` ``[batch_size, kv_heads, past_sequence_length,
head_dim]``. Outputs: ``logits`` ``[batch_size, sequence_length, vocab]`` and ``present.<i>.key`` /
``.value`` ``[batch_size, kv_heads, past_sequence_length + sequence_length, head_dim]``. The
attention mask covers the cached and the new tokens: ``total_sequence_length =
past_sequence_length + sequence_length``.

The call is the one ``generate`` makes: ``model(input_ids=..., attention_mask=..., position_ids=...,
past_key_values=DynamicCache(...), use_cache=True)`` (the cache under the name ``forward`` takes:
``past_key_values`` or transformers 5's ``cache``).
"""

from __future__ import annotations

from typing import Any

import torch

from onnxport.capture.caches import CACHE_PARAMETERS
from onnxport.errors import TargetError
from onnxport.export import to_onnx
from onnxport.pretrained.tasks import BATCH, PAST, SEQ, TOTAL, parameters, special_ids, token_ids, vocab_size
from onnxport.result import ExportResult

EXAMPLE_PAST, EXAMPLE_NEW = 5, 3


class CausalLMWithCache(torch.nn.Module):
    """One decoding step: new tokens, the mask of every token so far, their positions and the
    cache -> ``{"logits": [batch, seq, vocab], "present": the grown cache}``."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model
        self.cache_name = cache_parameter(model)

    def forward(self, **inputs: Any) -> dict:
        """``inputs``: ``input_ids``, ``attention_mask``, ``position_ids`` (optional) and
        ``past_key_values`` (a transformers ``DynamicCache``)."""
        cache = inputs.pop("past_key_values")
        out = self.model(**inputs, **{self.cache_name: cache}, use_cache=True, return_dict=True)
        return {"logits": out.logits, "present": out.past_key_values}


def cache_parameter(model: torch.nn.Module) -> str:
    """The name under which ``model.forward`` takes its cache (``cache`` in transformers 5, else
    ``past_key_values``). Raises ``TargetError`` when it takes none."""
    names = parameters(model)
    for name in ("cache", "past_key_values"):
        if name in names and name in CACHE_PARAMETERS:
            return name
    raise TargetError(f"{type(model).__name__}.forward takes no cache ({' or '.join(CACHE_PARAMETERS)})",
                      hint="the task text-generation-with-past exports a decoder with its key/value cache")


def example_step(model: torch.nn.Module, batch: int = 2, past: int = EXAMPLE_PAST, new: int = EXAMPLE_NEW,
                 seed: int = 0) -> tuple[dict, dict]:
    """``(inputs, dynamic_shapes)`` of one decoding step: ``new`` tokens after ``past`` cached ones,
    the cache filled by the model itself on ``past`` tokens (so that every layer's cache is of the
    kind the model makes)."""
    from transformers import DynamicCache

    gen = torch.Generator().manual_seed(seed)
    vocab, avoid = vocab_size(model), special_ids(model)
    cache = DynamicCache(config=model.config)
    name = cache_parameter(model)
    with torch.no_grad():
        model(input_ids=token_ids(vocab, (batch, past), avoid, gen), **{name: cache}, use_cache=True)
    inputs = {"input_ids": token_ids(vocab, (batch, new), avoid, gen),
              "attention_mask": torch.ones(batch, past + new, dtype=torch.int64)}
    dims = {"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: TOTAL}}
    if "position_ids" in parameters(model):
        inputs["position_ids"] = torch.arange(past, past + new).expand(batch, new)
        dims["position_ids"] = {0: BATCH, 1: SEQ}
    inputs["past_key_values"] = cache
    dims["past_key_values"] = {0: BATCH, 2: PAST}
    return inputs, dims


def export_decoder_with_cache(model: torch.nn.Module, **options: Any) -> ExportResult:
    """Export ``model`` (a transformers ``*ForCausalLM`` in eval mode) as one decoding step with its
    cache (see the module docstring). ``options``: further ``onnxport.to_onnx`` arguments.

    Raises ``TargetError`` when the model takes no cache, and the errors of ``to_onnx``."""
    wrapper = CausalLMWithCache(model).eval()
    inputs, dims = example_step(model)
    layers = len(inputs["past_key_values"].layers)
    names = ["logits"] + [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    return to_onnx(wrapper, kwargs=inputs, dynamic_shapes=dims, output_names=names,
                   relations={TOTAL: f"{PAST} + {SEQ}"}, **options)


def prompts(model: torch.nn.Module, length: int = 6, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` ``[2, length]`` of the decoding check: two prompts, the
    second 2 tokens shorter, left-padded with the model's padding id (0 when it has none)."""
    gen = torch.Generator().manual_seed(seed)
    ids = token_ids(vocab_size(model), (2, length), special_ids(model), gen)
    mask = torch.ones(2, length, dtype=torch.int64)
    pad = getattr(model.generation_config, "pad_token_id", None)
    if pad is None:
        eos = getattr(model.generation_config, "eos_token_id", None)
        pad = (eos[0] if isinstance(eos, (list, tuple)) else eos) or 0
    ids[1, :2], mask[1, :2] = pad, 0
    return ids, mask
