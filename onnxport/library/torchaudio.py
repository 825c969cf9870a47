"""torchaudio's Emformer with its segment count kept symbolic while torch.export traces.

``_EmformerImpl.forward`` builds two things from the number of segments, ``num_segs =
ceil(utterance_length / segment_length)``, with Python loops over it: the right-context frames
(``_gen_right_context``: the ``right_context_length`` frames after each segment, cut from the input and
concatenated) and the block attention mask (``_gen_attention_mask``: per segment, rows of ones over the
segment's right context, its query segment with ``left_context_length`` frames before it, and the memory
slots it may read, concatenated). A loop over ``range(num_segs)`` fixes the time axis to the example's
segment count (``SpecializationError``: the model's code branches on a size). While traced, both are
computed from index arithmetic over ``torch.arange`` instead, the segment count a symbolic size:

- right context: output row ``k`` is input frame ``start(k // R) + k % R``, where ``start(i)`` is
  ``(i + 1) * segment_length`` for every segment but the last and ``T - R`` for the last (``R``:
  ``right_context_length``, ``T``: the input's frames), as the loop's slices ``input[start:start + R]`` and
  ``input[T - R:]`` take them (none of those slices is clamped: ``(i + 1) * segment_length + R <= T`` for
  ``i < num_segs - 1``);
- attention mask: row ``r`` belongs to segment ``r // R`` (right-context rows), ``r // segment_length``
  (query rows) or ``r`` (summary rows, with memory); a column is a memory slot, a right-context frame or an
  utterance frame; the mask is False exactly where the loop's block for that row's segment has a one
  (``_gen_attention_mask_col_widths``: memory ``[max(i - max_memory_size, 0), i)``, right context ``[i * R,
  (i + 1) * R)``, utterance ``[max(i * segment_length - left_context_length, 0), min((i + 1) *
  segment_length, utterance_length))``; summary rows read no memory), True elsewhere.

Both give the values eager's loops give at every utterance length of at least one frame (at zero frames
eager's ``torch.cat`` of no blocks raises). Eager execution outside the trace is unchanged, and nothing is
changed where torchaudio's Emformer is not imported.

Source: ``torchaudio/models/emformer.py`` (torchaudio 2.x), ``_EmformerImpl._gen_right_context``,
``_gen_attention_mask``, ``_gen_attention_mask_col_widths``, ``_gen_attention_mask_block``.
"""

from __future__ import annotations

import sys

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register


def right_context(impl, input: torch.Tensor) -> torch.Tensor:
    """``_EmformerImpl._gen_right_context``: ``input[T, B, D]`` (utterance then ``R`` right-context frames)
    -> ``[num_segs * R, B, D]``, the ``R`` frames after each segment (the input's last ``R`` for the last
    segment), num_segs = ceil((T - R) / segment_length) >= 1."""
    rc, seg = impl.right_context_length, impl.segment_length
    total = input.shape[0]
    if rc == 0:
        return input[total:]
    num_segs = (total - rc + seg - 1) // seg
    k = torch.arange(num_segs * rc, device=input.device)
    i = k // rc
    start = torch.where(i < num_segs - 1, (i + 1) * seg, total - rc)
    return input.index_select(0, start + k % rc)


def attention_mask(impl, input: torch.Tensor) -> torch.Tensor:
    """``_EmformerImpl._gen_attention_mask``: ``input[U, B, D]`` (the utterance) -> the bool mask
    ``[num_segs * R + U (+ num_segs), (num_segs - 1) + num_segs * R + U]`` (memory rows and columns where the
    Emformer has memory), True where attention is not allowed; num_segs = ceil(U / segment_length)."""
    rc, seg, lc = impl.right_context_length, impl.segment_length, impl.left_context_length
    length, device = input.size(0), input.device
    num_segs = (length + seg - 1) // seg
    segments = torch.arange(num_segs, device=device)
    rows = [segments.repeat_interleave(rc) if rc else segments[:0], torch.arange(length, device=device) // seg]
    if impl.use_mem:
        rows.append(segments)
    i = torch.cat(rows).unsqueeze(1)
    mem = num_segs - 1 if impl.use_mem else 0
    column = torch.arange(mem + num_segs * rc + length, device=device).unsqueeze(0)
    in_rc = (column >= mem) & (column < mem + num_segs * rc)
    utterance = column - mem - num_segs * rc
    allowed = in_rc & (column - mem >= i * rc) & (column - mem < (i + 1) * rc)
    allowed |= (utterance >= (i * seg - lc).clamp(min=0)) & (utterance < ((i + 1) * seg).clamp(max=length))
    if impl.use_mem:
        summary = torch.arange(i.shape[0], device=device).unsqueeze(1) >= num_segs * rc + length
        allowed |= (column < mem) & ~summary & (column >= (i - impl.max_memory_size).clamp(min=0)) & (column < i)
    return ~allowed


def _changes() -> list:
    emformer = sys.modules.get("torchaudio.models.emformer")
    impl = getattr(emformer, "_EmformerImpl", None)
    if impl is None:
        return []
    return [SetAttribute(impl, "_gen_right_context", lambda original: right_context),
            SetAttribute(impl, "_gen_attention_mask", lambda original: attention_mask)]


EMFORMER_SEGMENTS = register(Patch(
    "torchaudio Emformer segments symbolic", _changes,
    "torchaudio.models.emformer._EmformerImpl._gen_right_context and _gen_attention_mask computed from index "
    "arithmetic while torch.export traces: their Python loops over the segment count fix the time axis; the "
    "same values at every utterance length of one frame or more; nothing changes where torchaudio's Emformer "
    "is not imported", when=always, order=360))
