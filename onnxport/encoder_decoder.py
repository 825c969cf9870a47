"""Encoder-decoder models (T5, BART/Marian, Whisper) exported as the two models a decoding loop runs:
an encoder, and a decoder that takes its cache as inputs.

``export_encoder_decoder(model, encoder_inputs)`` exports, from one transformers
``*ForConditionalGeneration`` model (``onnxport.export_pretrained`` calls it for a
``save_pretrained`` directory of one):

* the **encoder**: the encoder inputs as given (``input_ids`` + ``attention_mask``, or
  ``input_features``) -> ``encoder_hidden_states`` ``[batch, encoder_seq, width]`` and the
  cross-attention cache every decoder step reads, ``present.<i>.encoder.key`` / ``.value``
  ``[batch, heads, encoder_seq, head_dim]`` (the keys and values the decoder's cross-attention
  computes from the encoder's output, computed once);
* the **decoder with cache**: ``input_ids`` ``[batch, seq]``, ``encoder_hidden_states``,
  ``encoder_attention_mask`` ``[batch, encoder_seq]`` (when the encoder takes a mask),
  ``past_key_values.<i>.decoder.key`` / ``.value`` ``[batch, heads, past, head_dim]`` (empty at
  the first step) and ``past_key_values.<i>.encoder.key`` / ``.value`` (the encoder's cross-attention
  cache) -> ``logits`` ``[batch, seq, vocab]`` and ``present.<i>.decoder.key`` / ``.value``
  ``[batch, heads, past + seq, head_dim]``.

Both come from Hugging Face calls as written: the decoder is ``model(decoder_input_ids=...,
encoder_outputs=..., attention_mask=..., past_key_values=EncoderDecoderCache(...), use_cache=True)``
(``onnxport.capture.caches``). The names follow optimum's and onnxruntime-genai's.
"""

from __future__ import annotations

from typing import Any

import torch

from onnxport.errors import ExportError
from onnxport.export import to_onnx
from onnxport.result import ExportResult


class EncoderWithCrossCache(torch.nn.Module):
    """The encoder and the cross-attention keys and values of every decoder layer.

    The cross-attention cache is what one decoder step on an empty ``EncoderDecoderCache``
    computes from the encoder's output; the rest of that step does not reach the outputs and is
    removed from the exported graph."""

    def __init__(self, model: torch.nn.Module, start_token: int):
        super().__init__()
        self.model = model
        self.start_token = start_token

    def forward(self, **inputs: Any) -> dict:
        """``{"encoder_hidden_states": [batch, encoder_seq, width], "cross": DynamicCache}`` of the
        encoder inputs (``input_ids``/``attention_mask`` or ``input_features``)."""
        from transformers import DynamicCache, EncoderDecoderCache
        from transformers.modeling_outputs import BaseModelOutput

        hidden = self.model.get_encoder()(**inputs).last_hidden_state
        start = torch.full((hidden.shape[0], 1), self.start_token, dtype=torch.long, device=hidden.device)
        out = self.model(decoder_input_ids=start, encoder_outputs=BaseModelOutput(last_hidden_state=hidden),
                         attention_mask=inputs.get("attention_mask"),
                         past_key_values=EncoderDecoderCache(DynamicCache(), DynamicCache()), use_cache=True)
        return {"encoder_hidden_states": hidden, "cross": out.past_key_values.cross_attention_cache}


class DecoderWithCache(torch.nn.Module):
    """One decoding step: new tokens, the encoder's output and mask, the self- and cross-attention
    cache -> logits and the grown self-attention cache."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, encoder_hidden_states, encoder_attention_mask=None, past_key_values=None) -> dict:
        """``{"logits": [batch, seq, vocab], "present": DynamicCache}``: the step's logits and the
        self-attention cache grown by ``seq`` (``past_key_values``: an ``EncoderDecoderCache``)."""
        from transformers.modeling_outputs import BaseModelOutput

        out = self.model(decoder_input_ids=input_ids, past_key_values=past_key_values, use_cache=True,
                         encoder_outputs=BaseModelOutput(last_hidden_state=encoder_hidden_states),
                         attention_mask=encoder_attention_mask)
        return {"logits": out.logits, "present": out.past_key_values.self_attention_cache}


def _start_token(model: torch.nn.Module) -> int:
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        start = getattr(source, "decoder_start_token_id", None)
        if start is not None:
            return int(start)
    raise ExportError(f"{type(model).__name__} has no decoder_start_token_id in its generation config or config",
                      hint="set model.generation_config.decoder_start_token_id")


DIM_NAMES = {"batch": "batch", "seq": "seq", "past": "past", "encoder_seq": "encoder_seq"}


def default_encoder_dims(encoder_inputs: dict, names: dict | None = None) -> dict:
    """``batch`` on axis 0 of every encoder input, ``encoder_seq`` on axis 1 of 2-D integer inputs
    (token ids and their mask); other axes (Whisper's mel bins and frames) static. ``names``: other
    names for ``batch`` and ``encoder_seq`` (``DIM_NAMES`` keys)."""
    names = DIM_NAMES | dict(names or {})
    dims = {}
    for name, t in encoder_inputs.items():
        axes = {0: names["batch"]}
        if t.dim() == 2 and not t.dtype.is_floating_point:
            axes[1] = names["encoder_seq"]
        dims[name] = axes
    return dims


def export_encoder_decoder(model: torch.nn.Module, encoder_inputs: dict, *, dynamic_shapes: dict | None = None,
                           past: int = 3, dim_names: dict | None = None, **options: Any) -> ExportResult:
    """Export an encoder-decoder's encoder and its decoder-with-cache (see the module docstring).

    Args:
        model: a transformers ``*ForConditionalGeneration`` (T5, BART, Marian, Whisper...) in eval mode.
        encoder_inputs: the encoder's example inputs by name, as ``generate`` takes them:
            ``input_ids`` int64 ``[batch, encoder_seq]`` and ``attention_mask``, or Whisper's
            ``input_features`` float ``[batch, mel_bins, frames]``.
        dynamic_shapes: the encoder inputs' dynamic axes; default ``default_encoder_dims``.
        past: cached steps of the decoder's example (its new tokens: 2).
        dim_names: the names of the decoder's dims (``DIM_NAMES`` keys: ``batch``, ``seq`` the new
            tokens, ``past`` the cached ones, ``encoder_seq`` the encoder's output length, when
            dynamic); default ``DIM_NAMES``. ``dynamic_shapes`` should name the encoder's the same.
        options: further ``onnxport.to_onnx`` arguments (``opset``, ``optimize``...).

    Returns an ``ExportResult`` of two ``parts``, ``encoder`` and ``decoder`` (``.save(dir)`` writes
    ``encoder.onnx`` and ``decoder.onnx``; ``.validate()`` checks both; ``.check_generation(model,
    encoder_inputs)`` decodes greedily against ``model.generate``).

    Raises ``ExportError`` (no decoder start token) and the errors of ``to_onnx``.
    """
    from transformers import DynamicCache, EncoderDecoderCache

    start = _start_token(model)
    names = DIM_NAMES | dict(dim_names or {})
    enc_dims = dynamic_shapes if dynamic_shapes is not None else default_encoder_dims(encoder_inputs, names)
    encoder_module = EncoderWithCrossCache(model, start).eval()
    with torch.no_grad():
        enc_out = encoder_module(**encoder_inputs)
    hidden, cross = enc_out["encoder_hidden_states"], enc_out["cross"]
    layers = len(cross.layers)
    enc_names = ["encoder_hidden_states"] + [f"present.{i}.encoder.{kv}"
                                             for i in range(layers) for kv in ("key", "value")]
    encoder = to_onnx(encoder_module, kwargs=dict(encoder_inputs), dynamic_shapes=enc_dims, output_names=enc_names,
                      **options)

    length = encoder.model.graph.outputs[0].shape[1]
    enc_seq = names["encoder_seq"] if not isinstance(length, int) else None
    mask = encoder_inputs.get("attention_mask")
    batch = hidden.shape[0]
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    with torch.no_grad():
        cache = EncoderDecoderCache(DynamicCache(), _copy(cross))
        first = torch.cat([torch.full((batch, 1), start), torch.randint(0, vocab, (batch, past - 1), generator=gen)], 1)
        model(decoder_input_ids=first, past_key_values=cache, use_cache=True, attention_mask=mask,
              encoder_outputs=_base_output(hidden))
    b = names["batch"]
    along = {0: b, 1: enc_seq} if enc_seq else {0: b}  # [batch, encoder_seq, ...]
    kwargs = dict(input_ids=torch.randint(0, vocab, (batch, 2), generator=gen), encoder_hidden_states=hidden)
    dims = {"input_ids": {0: b, 1: names["seq"]}, "encoder_hidden_states": along}
    if mask is not None:
        kwargs["encoder_attention_mask"], dims["encoder_attention_mask"] = mask, along
    kwargs["past_key_values"] = cache
    dims["past_key_values"] = {"decoder": {0: b, 2: names["past"]},
                               "encoder": {0: b, 2: enc_seq} if enc_seq else {0: b}}
    dec_names = ["logits"] + [f"present.{i}.decoder.{kv}" for i in range(layers) for kv in ("key", "value")]
    decoder = to_onnx(DecoderWithCache(model).eval(), kwargs=kwargs, dynamic_shapes=dims, output_names=dec_names,
                      **options)
    return ExportResult(None, parts={"encoder": encoder, "decoder": decoder})


def _copy(cache: Any) -> Any:
    from transformers import DynamicCache

    out = DynamicCache()
    for i, layer in enumerate(cache.layers):
        out.update(layer.keys.clone(), layer.values.clone(), i)
    return out


def _base_output(hidden: torch.Tensor) -> Any:
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=hidden)
