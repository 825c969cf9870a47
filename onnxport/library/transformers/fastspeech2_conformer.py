"""transformers' FastSpeech2-Conformer: its length regulator captured as one gather over the batch,
its relative shift as a gather.

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

ESPnet's relative position attention, as transformers writes it for FastSpeech2-Conformer
(``shift_relative_position_tensor``), turns scores over relative positions ``(batch, head, time,
2 * time - 1)`` into scores over key positions with views: pad one zero column in front, view the
``(time, r + 1)`` rows as ``(r + 1, time)``, drop the first row, view the rest as ``(time, r)`` again
and keep the first ``r // 2 + 1`` columns. Those views of a sliced tensor need torch to decide
strides from the length, which it cannot where the length is known only when the model runs (the
frames after FastSpeech2's length regulator). Read through the views, element ``(i, j)`` of the
result is element ``time + i * r + j`` of the padded scores laid out flat.
``RELATIVE_SHIFT_GATHER`` (a registered capture patch) gives such classes, while torch.export
traces, that gather (the same values at every length).

Semantics: transformers' ``models/fastspeech2_conformer/modeling_fastspeech2_conformer.py``
(``length_regulator``, ``FastSpeech2ConformerAttention.shift_relative_position_tensor``);
``torch.searchsorted`` and ``torch.repeat_interleave`` (PyTorch docs); Transformer-XL's relative shift
(Dai et al. 2019, appendix B).
"""

from __future__ import annotations

from typing import Callable

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register
from onnxport.capture.source_variants import module_function
from onnxport.library.transformers import model_classes

MODULE = "transformers.models.fastspeech2_conformer.modeling_fastspeech2_conformer"
METHOD = "shift_relative_position_tensor"


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


def shifted(pos_tensor: torch.Tensor) -> torch.Tensor:
    """``(batch, head, time, r)`` scores over relative positions -> ``(batch, head, time, r // 2 + 1)``
    scores over key positions, as the zero-pad-and-view shift computes them."""
    b, h, t, r = pos_tensor.shape
    zero = torch.zeros((b, h, t, 1), dtype=pos_tensor.dtype, device=pos_tensor.device)
    padded = torch.cat([zero, pos_tensor], dim=-1).reshape(b, h, -1)
    rows = torch.arange(t, device=pos_tensor.device)[:, None]
    cols = torch.arange(r // 2 + 1, device=pos_tensor.device)[None, :]
    flat = (t + rows * r + cols).reshape(1, 1, -1).expand(b, h, -1)
    return padded.gather(2, flat).reshape(b, h, t, r // 2 + 1)


def _shift(original: Callable) -> Callable:
    def shift_relative_position_tensor(self, pos_tensor):
        return shifted(pos_tensor)

    return shift_relative_position_tensor


def _shift_changes() -> list:
    return [SetAttribute(cls, METHOD, _shift) for cls in model_classes((METHOD,))]


RELATIVE_SHIFT_GATHER = register(Patch(
    "relative shift as a gather", _shift_changes,
    "transformers' shift_relative_position_tensor (FastSpeech2-Conformer's relative position attention): while "
    "torch.export traces, the zero-pad-and-view shift is the gather of the same elements of the flat padded "
    "scores, which needs no stride decided from the length; nothing happens where those modules are not imported",
    when=always, order=250))
