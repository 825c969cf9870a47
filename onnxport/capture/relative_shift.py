"""The relative shift of Transformer-XL style attention, captured as a gather.

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
(``FastSpeech2ConformerAttention.shift_relative_position_tensor``); Transformer-XL's relative shift
(Dai et al. 2019, appendix B).
"""

from __future__ import annotations

from typing import Callable

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register
from onnxport.capture.source_variants import transformers_classes

METHOD = "shift_relative_position_tensor"


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


def _make(original: Callable) -> Callable:
    def shift_relative_position_tensor(self, pos_tensor):
        return shifted(pos_tensor)

    return shift_relative_position_tensor


def _changes() -> list:
    return [SetAttribute(cls, METHOD, _make) for cls in transformers_classes((METHOD,))]


RELATIVE_SHIFT_GATHER = register(Patch(
    "relative shift as a gather", _changes,
    "transformers' shift_relative_position_tensor (FastSpeech2-Conformer's relative position attention): while "
    "torch.export traces, the zero-pad-and-view shift is the gather of the same elements of the flat padded "
    "scores, which needs no stride decided from the length; nothing happens where those modules are not imported",
    when=always, order=250))
