"""Greedy decoding in onnxruntime with an exported decoder that takes its cache as inputs.

The decoder's layout is read from its input and output names (the names ``onnxport.to_onnx``
gives a Hugging Face call, ``onnxport.capture.caches``):

* ``input_ids`` ``[batch, seq]`` (or ``decoder_input_ids``): the new tokens;
* ``attention_mask`` ``[batch, past + seq]`` (optional): 1 for real tokens, 0 for padding;
* ``position_ids`` ``[batch, seq]`` (optional), ``cache_position`` ``[seq]`` (optional);
* ``past_key_values.<i>.key`` / ``.value`` ``[batch, heads, past, head_dim]`` (``.decoder.`` /
  ``.encoder.`` for an encoder-decoder's self- and cross-attention), ``.conv_state`` /
  ``.recurrent_state`` for a recurrent layer;
* ``encoder_hidden_states`` / ``encoder_attention_mask`` (optional): the encoder's output and mask;
* outputs ``logits`` ``[batch, seq, vocab]`` and ``present.<i>...`` for each ``past_key_values.<i>...``.

Each step feeds the ``present.*`` outputs back as ``past_key_values.*``, as onnxruntime-genai and
optimum do. A fixed-buffer cache (axis ``max_length``: opset 24's ``TensorScatter`` form) starts as zeros of
prompt + new tokens and is fed back the same way. Positions follow Hugging Face's ``generate``:
``cumsum(attention_mask) - 1`` on the prompt (padding at position 0), then one more per step
(``transformers.GenerationMixin._prepare_position_ids_for_generation``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from onnxport.capture.caches import INPUT_PREFIX, OUTPUT_PREFIX
from onnxport.errors import ValidationError
from onnxport.verify.runner import OrtRunner

TOKEN_INPUTS = ("input_ids", "decoder_input_ids")
MAX_LENGTH = "max_length"  # the axis of a fixed-buffer cache (opset 24, onnxport.pretrained.fixed_cache)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Which ONNX inputs and outputs of a decoder play which part (see the module docstring)."""

    tokens: str
    logits: str
    mask: str | None
    positions: str | None
    cache_position: str | None
    encoder_states: str | None
    encoder_mask: str | None
    cache: dict  # past input name -> present output name
    batch_dim: Any  # the dim_param (or size) of the batch axis of the token input

    @classmethod
    def of(cls, runner: OrtRunner) -> "Layout":
        """The layout of the model ``runner`` runs. Raises ``ValidationError`` when it has no token
        input, no logits output, or a cache input without its present output."""
        inputs = {i.name: i for i in runner.session.get_inputs()}
        outputs = [o.name for o in runner.session.get_outputs()]
        tokens = next((n for n in TOKEN_INPUTS if n in inputs), None)
        if tokens is None:
            raise ValidationError(f"the decoder has no token input ({' or '.join(TOKEN_INPUTS)}); its inputs are "
                                  f"{sorted(inputs)}", hint="export the decoder with input_ids as a keyword input")
        logits = "logits" if "logits" in outputs else None
        if logits is None:
            raise ValidationError(f"the decoder has no 'logits' output; its outputs are {outputs}",
                                  hint="export a model returning logits (a *ForCausalLM / *ForConditionalGeneration)")
        cache = {}
        for name in inputs:
            if name.startswith(INPUT_PREFIX + "."):
                present = OUTPUT_PREFIX + name[len(INPUT_PREFIX):]
                if present not in outputs and ".encoder." not in name:
                    raise ValidationError(f"the decoder takes {name} but returns no {present}",
                                          hint="export with use_cache=True so that the model returns its cache")
                cache[name] = present if present in outputs else None
        if not cache:
            raise ValidationError("the decoder takes no cache input (past_key_values.*)",
                                  hint="export it with past_key_values=DynamicCache(...) and use_cache=True")

        def opt(name):
            return name if name in inputs else None

        return cls(tokens, logits, opt("attention_mask"), opt("position_ids"), opt("cache_position"),
                   opt("encoder_hidden_states"), opt("encoder_attention_mask"), cache, inputs[tokens].shape[0])


def _dtype(ort_type: str) -> np.dtype:
    table = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
             "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
    return np.dtype(table.get(ort_type, np.float32))


def empty_cache(runner: OrtRunner, layout: Layout, batch: int, given: dict | None = None,
                max_length: int = 0) -> dict[str, np.ndarray]:
    """The cache inputs of the first step: keys and values of length 0 (axes named like the batch
    take ``batch``, axes named ``max_length``, a fixed-buffer cache's, ``max_length`` zeros, other
    named axes 0), recurrent states zero; ``given`` (name -> array: the cross-attention cache an
    encoder computed) as given."""
    given = given or {}
    inputs = {i.name: i for i in runner.session.get_inputs()}
    out = {}
    for name in layout.cache:
        if name in given:
            out[name] = given[name]
            continue
        shape = [d if isinstance(d, int) else batch if d == layout.batch_dim else max_length if d == MAX_LENGTH else 0
                 for d in inputs[name].shape]
        out[name] = np.zeros(shape, dtype=_dtype(inputs[name].type))
    return out


def first_positions(mask: np.ndarray) -> np.ndarray:
    """Positions of a prompt as ``generate`` computes them: ``cumsum(mask) - 1``, 0 where padded."""
    pos = np.cumsum(mask.astype(np.int64), axis=-1) - 1
    return np.where(mask == 0, 0, pos)


@dataclasses.dataclass
class Decoded:
    """What greedy decoding in onnxruntime produced: ``tokens`` ``[batch, steps]`` and, per step,
    the logits of the last position ``[batch, vocab]`` (float32 arrays)."""

    tokens: np.ndarray
    logits: list


def greedy(runner: OrtRunner, start: np.ndarray, max_new_tokens: int, *, mask: np.ndarray | None = None,
           eos: tuple = (), pad: int | None = None, cross: dict | None = None,
           encoder_states: np.ndarray | None = None, encoder_mask: np.ndarray | None = None,
           forced: np.ndarray | None = None) -> Decoded:
    """Greedy decoding: the first step feeds ``start`` (``[batch, n]`` token ids: the prompt, or an
    encoder-decoder's start token) with an empty cache; each later step the chosen token, the cache
    the previous step returned, the mask grown by one. A row that chose an ``eos`` token is
    finished: it takes ``pad`` from then on; decoding stops when every row is finished (as
    transformers' ``generate`` does).

    A decoder whose token input has one step only (``[batch, 1]``: a recurrent model's step) takes
    the prompt one token at a time. An ``attention_mask`` input as long as the token input
    (``[batch, seq]``, a recurrent model's) gets the mask of the new tokens; otherwise the mask of
    every token so far (``[batch, past + seq]``).

    Args:
        runner: onnxruntime session of the decoder.
        start: int64 ``[batch, n]``.
        max_new_tokens: steps to run.
        mask: ``[batch, n]`` attention mask of ``start`` (1 real, 0 padding); ones when None.
        eos, pad: end-of-sequence token ids and the padding id of finished rows.
        cross: cross-attention cache inputs (``past_key_values.<i>.encoder.*``) from the encoder.
        encoder_states, encoder_mask: the encoder's output ``[batch, encoder_seq, width]`` and mask.
        forced: ``[batch, steps]`` tokens fed at each step instead of the chosen ones (teacher
            forcing: every step sees those tokens so far); ``tokens`` then holds what the model would
            have chosen at each step, for at most ``steps`` steps.

    Raises ``ValidationError`` when the decoder's layout is not one this loop feeds.
    """
    layout = Layout.of(runner)
    inputs = {i.name: i for i in runner.session.get_inputs()}
    one_step = inputs[layout.tokens].shape[1] == 1
    mask_of_new = layout.mask is not None and inputs[layout.mask].shape[1] == inputs[layout.tokens].shape[1]
    batch = start.shape[0]
    mask = np.ones(start.shape, dtype=np.int64) if mask is None else mask.astype(np.int64)
    feeds: dict[str, np.ndarray] = empty_cache(runner, layout, batch, cross, max_length=start.shape[1] + max_new_tokens)
    positions = first_positions(mask)
    state = {"past": 0}

    def step(tokens: np.ndarray, seen: int) -> np.ndarray:
        """Run the decoder on ``tokens`` (the last of the ``seen`` tokens); the logits of the last."""
        n = tokens.shape[1]
        feeds[layout.tokens] = tokens
        if layout.mask:
            feeds[layout.mask] = mask[:, seen - n:seen] if mask_of_new else mask[:, :seen]
        if layout.positions:
            feeds[layout.positions] = positions[:, seen - n:seen]
        if layout.cache_position:
            feeds[layout.cache_position] = np.arange(state["past"], state["past"] + n, dtype=np.int64)
        if layout.encoder_states and encoder_states is not None:
            feeds[layout.encoder_states] = encoder_states
        if layout.encoder_mask and encoder_mask is not None:
            feeds[layout.encoder_mask] = encoder_mask
        missing = [name for name in inputs if name not in feeds]
        if missing:
            raise ValidationError(f"greedy decoding does not know what to feed the decoder's inputs {missing}",
                                  hint="the decoder's inputs are input_ids, attention_mask, position_ids, "
                                       "past_key_values.* (and encoder_hidden_states / encoder_attention_mask)")
        result = dict(zip(runner.output_names, runner.session.run(None, feeds)))
        state["past"] += n
        for name, present in layout.cache.items():
            if present is not None:
                feeds[name] = result[present]
        return result[layout.logits][:, -1, :].astype(np.float32)

    tokens = start.astype(np.int64)
    if one_step:
        for j in range(tokens.shape[1] - 1):
            step(tokens[:, j:j + 1], j + 1)
        tokens = tokens[:, -1:]
    seen = start.shape[1]
    unfinished = np.ones(batch, dtype=bool)
    chosen, logits_per_step = [], []
    steps = max_new_tokens if forced is None else min(max_new_tokens, forced.shape[1])
    for t in range(steps):
        last = step(tokens, seen)
        logits_per_step.append(last)
        nxt = last.argmax(-1).astype(np.int64)
        if forced is not None:
            chosen.append(nxt)
            nxt = forced[:, t].astype(np.int64)
        elif pad is not None:
            nxt = np.where(unfinished, nxt, pad)
        if forced is None:
            chosen.append(nxt)
        if eos:
            unfinished &= ~np.isin(nxt, list(eos))
        tokens, seen = nxt[:, None], seen + 1
        mask = np.concatenate([mask, np.ones((batch, 1), dtype=np.int64)], axis=1)
        positions = np.concatenate([positions, positions[:, -1:] + 1], axis=1)
        if eos and not unfinished.any():
            break
    return Decoded(np.stack(chosen, axis=1) if chosen else np.zeros((batch, 0), np.int64), logits_per_step)


def as_numpy(x: Any) -> np.ndarray | None:
    """A tensor (or array) as a NumPy array; None stays None."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
