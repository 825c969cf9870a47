"""Qwen3-ASR's and Qwen3-Omni's audio attention windows, computed as a tensor of boundaries.

transformers' ``get_audio_cu_seqlens(chunk_lengths, feature_lens, n_window_infer, n_window)``
(``models/qwen3_asr``, ``models/qwen3_omni_moe``) cuts each sample's packed post-convolution frames
into attention windows of ``W = max(per-chunk length) * (n_window_infer // (2 * n_window))`` frames
in a Python loop: ``[W] * (L // W)`` and the remainder, for each sample's length ``L``, then their
cumulative sum. ``W`` and each ``L`` are values known only when the model runs, which torch.export
cannot loop over.

A sample starting at ``S`` ends its ``k``-th window at ``S + min(k * W, L)``. A sample holds at most as
many windows as it has chunks (each chunk adds at most ``max(per-chunk length) <= W`` frames), and so
at most as many as the call has chunks (``chunk_lengths.shape[0]``: Qwen3-ASR's ``batch * chunks``,
Qwen3-Omni's chunks of every sample), so ``[0] + [S_s + min(k * W, L_s) for s, k in samples x
1..chunks]`` holds every boundary the loop makes, in order, and repeats ``S_s + L_s`` where a sample
has fewer windows: boundaries that
mark no frame. The packed attention that reads them (``packed_vision_attention``: a token's piece is
the number of boundaries at or before it) groups the same frames either way; flash attention, which
reads ``cu_seqlens`` itself, is not traced.

``WINDOW_BOUNDARIES`` (a registered capture patch) makes each loaded ``get_audio_cu_seqlens`` of that
form compute that tensor (int32, as transformers' own) while torch.export traces; precomputed
``cu_seqlens`` are popped and returned as before.

Semantics: transformers' ``models/qwen3_asr/modeling_qwen3_asr.py`` (``get_audio_cu_seqlens``,
``_get_feat_extract_output_lengths``).
"""

from __future__ import annotations

import sys

from onnxport.capture.patches import Patch, SetCode, always, register
from onnxport.library.transformers import MODELS

MODULES = ("qwen3_asr.modeling_qwen3_asr", "qwen3_omni_moe.modeling_qwen3_omni_moe")


def window_boundaries(chunk_lengths, feature_lens, n_window_infer, n_window, kwargs=None, *, lengths=None):
    """``cu_seqlens`` ``[1 + batch * chunks]`` int32 of the windows of each sample (``feature_lens``
    ``[batch]`` frames, ``chunk_lengths`` ``[chunks]`` frames per chunk of every sample), with repeated
    boundaries where a sample has fewer than ``chunks`` windows; ``lengths`` is the module's
    ``_get_feat_extract_output_lengths`` (frames after the convolutions)."""
    import torch

    if kwargs is not None and (cu_seqlens := kwargs.pop("cu_seqlens", None)) is not None:
        return cu_seqlens
    after = lengths(feature_lens, n_window)
    window = lengths(chunk_lengths, n_window).max() * (n_window_infer // (n_window * 2))
    chunks = chunk_lengths.shape[0]  # no sample has more windows than the call has chunks
    k = torch.arange(1, chunks + 1, device=feature_lens.device)
    starts = after.cumsum(0) - after
    ends = starts[:, None] + torch.minimum(k[None, :] * window, after[:, None])
    return torch.nn.functional.pad(ends.flatten(), (1, 0)).to(torch.int32)


def _changes() -> list:
    changes = []
    for name in MODULES:
        module = sys.modules.get(MODELS + name)
        fn = getattr(module, "get_audio_cu_seqlens", None) if module is not None else None
        lengths = getattr(module, "_get_feat_extract_output_lengths", None) if module is not None else None
        if fn is None or lengths is None or "window_aftercnn" not in fn.__code__.co_varnames:
            continue

        def replacement(chunk_lengths, feature_lens, n_window_infer, n_window, kwargs=None, _lengths=lengths):
            return window_boundaries(chunk_lengths, feature_lens, n_window_infer, n_window, kwargs, lengths=_lengths)

        changes.append(SetCode(fn, replacement))
    return changes


WINDOW_BOUNDARIES = register(Patch(
    "Qwen3 audio window boundaries as a tensor", _changes,
    "transformers' get_audio_cu_seqlens of Qwen3-ASR and Qwen3-Omni: while torch.export traces, each sample's "
    "attention windows end at start + min(k * window, length) for k = 1..chunks (repeating the sample's end where "
    "it has fewer windows) instead of a Python loop over values known only when the model runs; nothing happens "
    "where those modules are not imported", when=always, order=235))
