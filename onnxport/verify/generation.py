"""The decoding check: greedy decoding in onnxruntime gives the tokens the model's own greedy
``generate`` gives, step by step.

``check_generation`` runs Hugging Face's ``model.generate`` (greedy: ``do_sample=False``,
``num_beams=1``, no logits processors, the model's end-of-sequence and padding ids) and the
exported decoder in onnxruntime (``onnxport.verify.decoding.greedy``: the ``present.*`` outputs fed
back as ``past_key_values.*``), and compares the chosen tokens and the logits of every step. An
encoder-decoder is checked with its encoder model too: the encoder's outputs (hidden states and
cross-attention cache) feed every decoder step.

Semantics: ``transformers.GenerationMixin.generate`` with a ``GenerationConfig`` (greedy search,
a row ends at an end-of-sequence token and is padded from then on, decoding stops when every row
ended).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from onnxport.capture.caches import INPUT_PREFIX, OUTPUT_PREFIX
from onnxport.errors import ValidationError
from onnxport.verify.decoding import as_numpy, greedy
from onnxport.verify.runner import OrtRunner

LOGITS_ATOL = 1e-3  # float32 logits of eager and onnxruntime: absolute + relative tolerance
LOGITS_RTOL = 1e-3


@dataclasses.dataclass(frozen=True)
class GenerationReport:
    """Tokens and logits of both decodings, step by step.

    Attributes:
        expected: the tokens ``generate`` chose, ``[batch][step]``.
        got: the tokens greedy decoding in onnxruntime chose.
        logits_max_abs: per step, the largest difference of the logits (over rows and vocabulary).
        margins: per step, the smallest gap between eager's best and second-best logit (over rows):
            a token may legitimately flip where it is below the logits' difference.
        first_difference: the first step whose tokens differ, or None.
        tolerance: ``(atol, rtol)`` the logits were compared with.
        note: anything else to know (a decoding that ended early, a missing input).
    """

    expected: tuple
    got: tuple
    logits_max_abs: tuple
    margins: tuple
    first_difference: int | None
    tolerance: tuple = (LOGITS_ATOL, LOGITS_RTOL)
    logits_ok: tuple = ()
    note: str = ""

    @property
    def ok(self) -> bool:
        """The same tokens at every step, and every step's logits within the tolerance."""
        return self.first_difference is None and len(self.expected[0] if self.expected else ()) > 0 \
            and all(self.logits_ok)

    def to_dict(self) -> dict:
        """The report as plain data (the tokens, the per-step differences and ``ok``), for JSON."""
        return dataclasses.asdict(self) | {"ok": self.ok}

    def __str__(self) -> str:
        head = ("step", "generate", "onnxruntime", "max abs logits", "margin", "pass")
        rows = [head]
        steps = max(len(self.expected[0]) if self.expected else 0, len(self.got[0]) if self.got else 0)
        for t in range(steps):
            exp = [r[t] if t < len(r) else "-" for r in self.expected]
            got = [r[t] if t < len(r) else "-" for r in self.got]
            diff = self.logits_max_abs[t] if t < len(self.logits_max_abs) else float("nan")
            margin = self.margins[t] if t < len(self.margins) else float("nan")
            ok = exp == got and (self.logits_ok[t] if t < len(self.logits_ok) else False)
            rows.append((str(t), str(exp), str(got), f"{diff:.2e}", f"{margin:.2e}", "ok" if ok else "FAIL"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        if self.first_difference is not None:
            t = self.first_difference
            lines.append(f"first differing step: {t} (logits differ by up to {self.logits_max_abs[t]:.2e} there; "
                         f"eager's top-2 margin {self.margins[t]:.2e})" if t < len(self.logits_max_abs) else
                         f"first differing step: {t} (one decoding ended before the other)")
        elif not all(self.logits_ok):
            bad = self.logits_ok.index(False)
            lines.append(f"same tokens, but the logits of step {bad} differ by {self.logits_max_abs[bad]:.2e} "
                         f"(tolerance {self.tolerance[0]:g} + {self.tolerance[1]:g} * |logit|)")
        if self.note:
            lines.append(f"note: {self.note}")
        lines.append("generation matches" if self.ok else "GENERATION MISMATCH")
        return "\n".join(lines)

    __repr__ = __str__


def reference(model: torch.nn.Module, max_new_tokens: int, inputs: dict) -> tuple[np.ndarray, list, dict]:
    """``(tokens [batch, steps], logits per step [batch, vocab], ids)`` of the model's own greedy
    ``generate`` on ``inputs`` (``input_ids``/``attention_mask``, or an encoder-decoder's encoder
    inputs); ``ids``: the ``eos``, ``pad`` and ``start`` token ids it used.

    Raises ``ValidationError`` when the model has no ``generate`` (not a transformers model) or
    ``generate`` fails."""
    if not hasattr(model, "generate") or not hasattr(model, "generation_config"):
        raise ValidationError(f"{type(model).__name__} has no generate(): the decoding check compares with "
                              "Hugging Face transformers' greedy generate",
                              hint="pass the transformers model itself (a *ForCausalLM or *ForConditionalGeneration)")
    from transformers import GenerationConfig

    own = model.generation_config
    eos = own.eos_token_id
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    pad = own.pad_token_id if own.pad_token_id is not None else (eos[0] if eos else None)
    start = own.decoder_start_token_id
    if start is None and getattr(model.config, "is_encoder_decoder", False):
        start = getattr(model.config, "decoder_start_token_id", None)
    config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_new_tokens, eos_token_id=eos or None,
                              pad_token_id=pad, bos_token_id=own.bos_token_id, decoder_start_token_id=start,
                              use_cache=True, output_logits=True, return_dict_in_generate=True)
    try:
        with torch.no_grad():
            out = model.generate(**inputs, generation_config=config)
    except Exception as e:  # noqa: BLE001 - the model's own generate failed
        raise ValidationError(f"the model's generate() failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}",
                              hint="check the inputs generate() takes (input_ids, attention_mask, "
                                   "input_features)") from e
    new = out.sequences[:, -len(out.logits):] if out.logits else out.sequences[:, :0]
    logits = [step.float().numpy() for step in out.logits]
    return new.numpy(), logits, {"eos": tuple(eos), "pad": pad, "start": start}


def check_generation(model: torch.nn.Module, decoder: Any, prompt_ids: Any = None, *, attention_mask: Any = None,
                     max_new_tokens: int = 16, encoder: Any = None, encoder_inputs: dict | None = None,
                     atol: float = LOGITS_ATOL, rtol: float = LOGITS_RTOL) -> GenerationReport:
    """Greedy decoding in onnxruntime against the model's own greedy ``generate``, step by step.

    Args:
        model: the transformers model (``*ForCausalLM``, ``*ForConditionalGeneration``) in eval mode.
        decoder: the exported decoder taking its cache (an ``onnx.ModelProto`` or a path): inputs
            and outputs named as ``onnxport.verify.decoding`` describes.
        prompt_ids: int64 ``[batch, prompt]`` for a decoder-only model.
        attention_mask: ``[batch, prompt]`` (1 real token, 0 padding; left padding for a batch of
            prompts of different lengths); ones when None.
        max_new_tokens: tokens to generate (both decodings stop early when every row ended).
        encoder: an encoder-decoder's exported encoder (proto or path), with ``encoder_inputs``
            (name -> tensor: ``input_ids``/``attention_mask``, or ``input_features``) given to
            ``generate`` and to the encoder model alike.
        atol, rtol: tolerance of the logits (float32).

    Returns a ``GenerationReport`` (``.ok``, printable table). Raises ``ValidationError`` when the
    decoder's layout is not one greedy decoding can feed, or ``generate`` fails.
    """
    runner = OrtRunner(decoder)
    if encoder is not None or encoder_inputs is not None:
        if encoder is None or not encoder_inputs:
            raise ValidationError("an encoder-decoder is checked with both its encoder model and encoder_inputs",
                                  hint="pass encoder=<the encoder's model> and encoder_inputs={'input_ids': ...}")
        expected, ref_logits, ids = reference(model, max_new_tokens, dict(encoder_inputs))
        enc = OrtRunner(encoder)
        missing = [n for n in enc.input_names if n not in encoder_inputs]
        if missing:
            raise ValidationError(f"encoder_inputs lack the encoder model's inputs {missing}",
                                  hint=f"the encoder takes {enc.input_names}")
        feed = {n: as_numpy(encoder_inputs[n]) for n in enc.input_names}
        outs = dict(zip(enc.output_names, enc.session.run(None, feed)))
        cross = {INPUT_PREFIX + n[len(OUTPUT_PREFIX):]: v for n, v in outs.items() if n.startswith(OUTPUT_PREFIX + ".")}
        batch = next(iter(outs.values())).shape[0]
        if ids["start"] is None:
            raise ValidationError("the model's generation config has no decoder_start_token_id",
                                  hint="set model.generation_config.decoder_start_token_id")
        start = np.full((batch, 1), ids["start"], dtype=np.int64)
        got = greedy(runner, start, max_new_tokens, eos=ids["eos"], pad=ids["pad"], cross=cross,
                     encoder_states=outs.get("encoder_hidden_states"),
                     encoder_mask=as_numpy(encoder_inputs.get("attention_mask")))
    else:
        if prompt_ids is None:
            raise ValidationError("check_generation needs prompt_ids for a decoder-only model",
                                  hint="pass prompt_ids=torch.tensor([[...]]) (and attention_mask for padded prompts)")
        prompt = torch.as_tensor(prompt_ids)
        mask = torch.ones_like(prompt) if attention_mask is None else torch.as_tensor(attention_mask)
        expected, ref_logits, ids = reference(model, max_new_tokens, {"input_ids": prompt, "attention_mask": mask})
        got = greedy(runner, prompt.numpy(), max_new_tokens, mask=mask.numpy(), eos=ids["eos"], pad=ids["pad"])
    return compare_decodings(expected, ref_logits, got.tokens, got.logits, atol, rtol)


def compare_decodings(expected: np.ndarray, ref_logits: list, tokens: np.ndarray, logits: list,
                      atol: float = LOGITS_ATOL, rtol: float = LOGITS_RTOL) -> GenerationReport:
    """The ``GenerationReport`` of two decodings: tokens ``[batch, steps]`` and logits per step."""
    diffs, margins, oks = [], [], []
    first = None
    for t in range(min(len(ref_logits), len(logits))):
        e, g = ref_logits[t].astype(np.float64), logits[t].astype(np.float64)
        finite = np.isfinite(e) & np.isfinite(g)
        d = np.abs(e - g)[finite]
        diffs.append(float(d.max()) if d.size else 0.0)
        oks.append(bool(np.all(np.abs(e - g)[finite] <= atol + rtol * np.abs(e[finite]))) and
                   bool(np.array_equal(np.isfinite(e), np.isfinite(g))))
        top = np.sort(e, axis=-1)[:, -2:]
        margins.append(float((top[:, 1] - top[:, 0]).min()) if e.shape[-1] > 1 else float("inf"))
        if first is None and not np.array_equal(expected[:, t], tokens[:, t]):
            first = t
    note = ""
    if first is None and expected.shape[1] != tokens.shape[1]:
        first = min(expected.shape[1], tokens.shape[1])
        note = f"generate produced {expected.shape[1]} tokens, onnxruntime {tokens.shape[1]}"
    return GenerationReport(tuple(tuple(int(v) for v in r) for r in expected),
                            tuple(tuple(int(v) for v in r) for r in tokens), tuple(diffs), tuple(margins), first,
                            (atol, rtol), tuple(oks), note)


def check_generation_of_file(path: str, reference: Any, max_new_tokens: int,
                             prompts: list[list[int]] | None = None) -> GenerationReport:
    """``check_generation`` of the decoder in the ONNX file ``path`` against ``reference.module``
    (an ``ExportResult`` of the same transformers model, as ``onnxport validate`` builds it).

    ``prompts``: token ids per row, left-padded to the longest with the model's padding id (its
    attention mask 0 there); default: the ``input_ids`` of the reference's example inputs.
    Raises ``ValidationError`` when no prompt is given and the example has no ``input_ids``.
    """
    model = reference.module
    if prompts is None:
        args, kwargs = reference.example
        ids = kwargs.get("input_ids", args[0] if args and isinstance(args[0], torch.Tensor) else None)
        if ids is None:
            raise ValidationError("no prompt for the decoding check: the target's example has no input_ids",
                                  hint='give one with --prompt "5 17 42"')
        return check_generation(model, path, ids, max_new_tokens=max_new_tokens)
    config = getattr(model, "generation_config", None)
    pad = getattr(config, "pad_token_id", None)
    eos = getattr(config, "eos_token_id", None)
    pad = pad if pad is not None else (eos[0] if isinstance(eos, (list, tuple)) else eos) or 0
    longest = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (longest - len(p)) + list(p) for p in prompts], dtype=torch.long)
    mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long)
    return check_generation(model, path, ids, attention_mask=mask, max_new_tokens=max_new_tokens)
