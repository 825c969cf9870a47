"""``genai_config.json``: what onnxruntime-genai reads beside a decoder to run it (``og.Model(dir)``).

The decoder is the one ``onnxport.pretrained.decoder`` exports: its input and output names are
onnxruntime-genai's defaults (``input_ids``, ``attention_mask``, ``position_ids``,
``past_key_values.%d.key``, ``present.%d.key``, ``logits``). Its present cache is a new tensor each
step (a Concat, not a buffer shared with the past), hence ``past_present_share_buffer: false``,
unless the decoder was rewritten for target ``genai-cpu`` and its cache is read by
``GroupQueryAttention`` alone (``onnxport.targets.genai_cpu``): then ``true``, one buffer of
``max_length`` written in place.

Semantics: onnxruntime-genai's configuration reference (``genai_config.json``: ``model``,
``model.decoder``, ``search``) and its ``src/config.cpp``; the model type picks the runtime's
model class (``src/models/model_type.h``): the types of plain decoders are kept, others are
``decoder``, the generic decoder-only model.
"""

from __future__ import annotations

from typing import Any

from onnxport.capture.caches import INPUT_PREFIX, OUTPUT_PREFIX
from onnxport.result import ExportResult

# onnxruntime-genai model types run by its generic decoder-only model (DecoderOnly_Model); gpt2 and
# lfm2 have classes of their own expecting other layouts
PLAIN_DECODER_TYPES = {"llama", "mistral", "qwen2", "qwen3", "phi", "gemma", "gemma2", "gemma3_text", "granite",
                       "olmo", "nemotron", "smollm3", "internlm2", "ernie4_5"}
DEFAULT_CONTEXT = 2048


def _first(config: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def _ids(value: Any) -> list[int]:
    return [] if value is None else [int(value)] if isinstance(value, int) else [int(v) for v in value]


def _shares_buffer(result: ExportResult) -> bool:
    """Whether the decoder's past and present cache may be one buffer of ``max_length``: target
    ``genai-cpu``'s shared-buffer fusion applied (``onnxport.targets.genai_cpu``)."""
    from onnxport.targets.genai_cpu import APPLIED, genai_fusions

    return genai_fusions(result.model).get("shared_buffer") == APPLIED


def genai_config(result: ExportResult, model: Any, filename: str = "model.onnx") -> dict:
    """The ``genai_config.json`` contents for the decoder ``result`` (saved as ``filename``)
    exported from ``model`` (a transformers ``*ForCausalLM``): sizes read from the exported
    model (layers, key/value heads, head size, vocabulary) and the config, token ids from the
    generation config, greedy search."""
    graph = result.model.graph
    inputs = {v.name: v for v in graph.inputs}
    past = [n for n in inputs if n.startswith(f"{INPUT_PREFIX}.") and n.endswith(".key")]
    kv_shape = list(inputs[past[0]].shape)
    logits = next(v for v in graph.outputs if v.name == "logits")
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    generation = model.generation_config
    eos = _ids(_first(generation, "eos_token_id") or _first(text, "eos_token_id"))
    pad = _first(generation, "pad_token_id", default=_first(text, "pad_token_id"))
    pad = int(pad) if pad is not None else (eos[0] if eos else 0)
    bos = _first(generation, "bos_token_id", default=_first(text, "bos_token_id"))
    context = int(_first(text, "max_position_embeddings", "n_positions", "max_sequence_length",
                         default=DEFAULT_CONTEXT))
    heads = int(_first(text, "num_attention_heads", "n_head"))
    names = {"input_ids": "input_ids", "attention_mask": "attention_mask"}
    if "position_ids" in inputs:
        names["position_ids"] = "position_ids"
    names |= {"past_key_names": f"{INPUT_PREFIX}.%d.key", "past_value_names": f"{INPUT_PREFIX}.%d.value"}
    decoder = {
        "filename": filename,
        "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
        "head_size": int(kv_shape[3]),
        "hidden_size": int(_first(text, "hidden_size", "n_embd", "d_model")),
        "num_attention_heads": heads,
        "num_hidden_layers": len(past),
        "num_key_value_heads": int(kv_shape[1]),
        "inputs": names,
        "outputs": {"logits": "logits", "present_key_names": f"{OUTPUT_PREFIX}.%d.key",
                    "present_value_names": f"{OUTPUT_PREFIX}.%d.value"},
    }
    return {
        "model": {
            "type": config.model_type if config.model_type in PLAIN_DECODER_TYPES else "decoder",
            "bos_token_id": int(bos) if bos is not None else pad,
            "eos_token_id": eos or [pad],
            "pad_token_id": pad,
            "context_length": context,
            "vocab_size": int(logits.shape[-1]),
            "decoder": decoder,
        },
        "search": {
            "do_sample": False, "num_beams": 1, "num_return_sequences": 1, "max_length": context, "min_length": 0,
            "past_present_share_buffer": _shares_buffer(result), "early_stopping": True, "length_penalty": 1.0,
            "no_repeat_ngram_size": 0, "diversity_penalty": 0.0, "repetition_penalty": 1.0, "temperature": 1.0,
            "top_k": 1, "top_p": 1.0,
        },
    }
