"""Make capture follow what eager PyTorch computes at inference where its fast paths differ.

``nn.TransformerEncoder`` in eval mode, with a ``src_key_padding_mask`` and no grad, runs its
nested-tensor fast path: padded frames leave the layers as zeros (``to_padded_tensor(0.)``), before
the final norm. Tracing takes the regular path, which leaves values there. During capture,
``TRANSFORMER_ENCODER_AS_EAGER`` (a registered capture patch) makes the traced forward zero the
padded frames exactly when eager's fast path would (the same module conditions; the mask's left
alignment checked as data).
Semantics: ``torch.nn.TransformerEncoder.forward`` (torch 2.13), assuming inference without grad.
"""

from __future__ import annotations

import torch
from torch import nn

from onnxport.capture.patches import Patch, SetAttribute, always, register


def _static_fast_path(enc: nn.TransformerEncoder, src: torch.Tensor, mask, key_padding_mask) -> bool:
    """The conditions of eager's nested-tensor path that do not depend on data."""
    first = enc.layers[0]
    return (
        torch.backends.mha.get_fastpath_enabled()
        and getattr(enc, "use_nested_tensor", False)
        and not first.training
        and src.dim() == 3
        and key_padding_mask is not None
        and mask is None
        and not torch.is_autocast_enabled()
    )


def _make(original):
    """``nn.TransformerEncoder.forward`` zeroing the padded frames where eager's fast path would."""

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        if not _static_fast_path(self, src, mask, src_key_padding_mask):
            return original(self, src, mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
        norm, self.norm = self.norm, None
        try:
            out = original(self, src, mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
        finally:
            self.norm = norm
        pad = src_key_padding_mask.bool() if src_key_padding_mask.dtype != torch.bool else src_key_padding_mask
        keep = ~pad
        # eager checks the mask is left aligned (valid frames first) before taking the fast path
        if getattr(self, "mask_check", True):
            frames = torch.arange(keep.shape[1], device=keep.device).unsqueeze(0)
            aligned = (keep == (frames < keep.sum(1, keepdim=True))).all()
        else:
            aligned = torch.ones((), dtype=torch.bool)
        frame_pad = pad.unsqueeze(-1) if self.layers[0].self_attn.batch_first else pad.t().unsqueeze(-1)
        out = torch.where(aligned, out.masked_fill(frame_pad, 0.0), out)
        return norm(out) if norm is not None else out

    return forward


TRANSFORMER_ENCODER_AS_EAGER = register(Patch(
    "transformer encoder as eager", lambda: [SetAttribute(nn.TransformerEncoder, "forward", _make)],
    "nn.TransformerEncoder.forward: the traced forward zeroes the padded frames where eager's nested-tensor "
    "fast path would", when=always, order=100))
