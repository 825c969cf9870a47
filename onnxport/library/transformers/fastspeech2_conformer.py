"""FastSpeech2-Conformer's length regulator, captured as one gather over the batch.

transformers' ``length_regulator(encoded_embeddings, duration_labels, speaking_speed)`` repeats each
token's embedding by its predicted duration: ``if duration_labels.sum() == 0:`` it first sets the
durations of utterances whose durations are all 0 to 1 (a branch on the data), then makes a zero
tensor ``(batch, max_len, dim)`` with ``max_len`` the longest utterance's frame count, and fills it
utterance by utterance (``for i, ... in enumerate(zip(...))``: ``torch.repeat_interleave`` by the
durations), which fixes the batch size and branches on data.

``LENGTH_REGULATOR`` (a registered capture patch) gives that function, while torch.export traces, the
same computation for the whole batch: the all-zero rule as ``torch.where`` (written into the
durations in place, as the original's indexed assignment does), the frames' ends ``cumsum`` of the
durations, ``max_len`` their largest total (a size known only when the model runs, an ONNX
dimension named by the model's output), and for frame ``f`` of utterance ``b`` the token
``searchsorted(ends[b], f, right=True)`` (the token whose span holds it, zero-duration tokens
skipped), its embedding gathered where ``f`` is before the utterance's end and 0 after it.

Semantics: transformers' ``models/fastspeech2_conformer/modeling_fastspeech2_conformer.py``
(``length_regulator``); ``torch.searchsorted`` and ``torch.repeat_interleave`` (PyTorch docs).
"""

from __future__ import annotations

from typing import Callable

import torch

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import module_function

MODULE = "transformers.models.fastspeech2_conformer.modeling_fastspeech2_conformer"


def _make(original: Callable) -> Callable:
    def length_regulator(encoded_embeddings, duration_labels, speaking_speed=1.0):
        """(batch, tokens, dim) embeddings and (batch, tokens) int64 durations -> (batch, frames, dim)
        float32, frames the longest utterance's total duration."""
        if speaking_speed <= 0:
            raise ValueError("`speaking_speed` must be greater than 0.")
        elif speaking_speed != 1.0:
            duration_labels = torch.round(duration_labels.float() * speaking_speed).long()
        none = duration_labels.sum().eq(0) & duration_labels.sum(dim=1).eq(0)
        duration_labels.copy_(torch.where(none[:, None], torch.ones_like(duration_labels), duration_labels))
        ends = torch.cumsum(duration_labels, dim=1)
        frames = ends[:, -1].max().item()
        torch._check(frames >= 0)
        positions = torch.arange(frames, device=ends.device).expand(ends.size(0), -1).contiguous()
        token = torch.searchsorted(ends, positions, right=True)
        inside = token < ends.size(1)
        token = token.clamp(max=ends.size(1) - 1)
        gathered = torch.gather(encoded_embeddings, 1, token[..., None].expand(-1, -1, encoded_embeddings.size(2)))
        return torch.where(inside[..., None], gathered, torch.zeros((), dtype=gathered.dtype)).to(torch.float)

    return length_regulator


def _changes() -> list:
    return module_function(MODULE, "length_regulator", _make)


LENGTH_REGULATOR = register(Patch(
    "FastSpeech2 length regulator for the whole batch", _changes,
    "transformers' FastSpeech2-Conformer length_regulator: while torch.export traces, each frame's token is found "
    "with searchsorted over the durations' cumsum and its embedding gathered for the whole batch, instead of a "
    "loop over the utterances with repeat_interleave and 'if duration_labels.sum() == 0' (a branch on the data); "
    "nothing happens where that module is not imported", when=always, order=240))
