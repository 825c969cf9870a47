"""ESPnet's streaming positional encoding at a position given as a tensor, while torch.export traces.

ESPnet's contextual-block encoders (``ContextualBlockConformerEncoder``, ``ContextualBlockTransformerEncoder``)
add ``StreamPositionalEncoding`` at an offset that counts the blocks processed so far
(``self.pos_enc(chunk, cur_hop + self.hop_size * n_processed_blocks)``). Exported as one streaming step,
that count is part of the state the step takes and returns, a tensor; ``StreamPositionalEncoding.forward``
then grows its table when ``self.pe.size(1) < x.size(1) + start_idx`` (a branch on the tensor's value
that also writes the module) and slices the table at the tensor (a size read from the data). While
traced, a ``start_idx`` given as a tensor computes the rows of the table it would read instead, with
the same operations ``extend_pe`` builds the table with: ``pe[p, 2k] = sin(p * div_term[k])``,
``pe[p, 2k + 1] = cos(p * div_term[k])``, ``div_term = exp(arange(0, d_model, 2) * -(log(10000) /
d_model))``, in float32 for the positions ``p = start_idx + arange(x.size(1))`` (exact integers
below 2**24), then cast to ``x``'s dtype: the same values at every position, and no table to grow.
A Python ``start_idx`` runs ESPnet's own. Eager execution outside the trace is unchanged, and nothing
changes where ESPnet is not imported.

Source: ``espnet/nets/pytorch_backend/transformer/embedding.py`` (ESPnet 202x),
``StreamPositionalEncoding.extend_pe`` and ``StreamPositionalEncoding.forward``.
"""

from __future__ import annotations

import math
import sys

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register

MODULE = "espnet.nets.pytorch_backend.transformer.embedding"


def _rows(self, x: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """``self.pe[:, start : start + x.size(1)]`` as ``extend_pe`` computes it, for a tensor ``start``."""
    position = (start.reshape(()).to(torch.float32) + torch.arange(x.size(1), dtype=torch.float32)).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, self.d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / self.d_model))
    angles = position * div_term
    pe = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(x.size(1), self.d_model)
    return pe.unsqueeze(0).to(device=x.device, dtype=x.dtype)


def _at_a_tensor_position(original):
    def forward(self, x, start_idx=0):
        """ESPnet's ``StreamPositionalEncoding.forward``; for a tensor ``start_idx``, the table's rows
        computed (onnxport/library/espnet.py)."""
        if not isinstance(start_idx, torch.Tensor) or self.d_model % 2:
            return original(self, x, start_idx)
        return self.dropout(x * self.xscale + _rows(self, x, start_idx))

    return forward


def _changes() -> list:
    embedding = sys.modules.get(MODULE)
    cls = getattr(embedding, "StreamPositionalEncoding", None) if embedding is not None else None
    return [SetAttribute(cls, "forward", _at_a_tensor_position)] if cls is not None else []


STREAM_POSITIONS = register(Patch(
    "ESPnet streaming positions at a tensor offset", _changes,
    "espnet.nets.pytorch_backend.transformer.embedding.StreamPositionalEncoding.forward with a start_idx given "
    "as a tensor (a streaming step's count of processed blocks) computes the rows of its sinusoid table it "
    "would read, as extend_pe computes them, instead of growing the table on the tensor's value and slicing "
    "it there; a Python start_idx runs ESPnet's own; nothing changes where ESPnet is not imported",
    when=always, order=350))
