"""FSMT's decoder padding mask kept when it masks nothing.

transformers' FSMT builds the decoder's padding mask with ``make_padding_mask(input_ids, padding_idx)``:
``padding_mask = input_ids.eq(padding_idx)``, then ``if not padding_mask.any(): padding_mask = None``
(fairseq's convention). That ``if`` reads the inputs' data, and no ONNX model holds a tensor on one
side and nothing on the other. The mask's one use is the decoder self-attention's
``key_padding_mask``: ``attn_weights.masked_fill(mask.unsqueeze(1).unsqueeze(2), min)``, which leaves
the weights as they are where the mask is all False; the mask kept computes what None computes.
``KEPT_PADDING_MASK`` (a registered capture patch) makes FSMT's ``make_padding_mask`` return
``input_ids.eq(padding_idx)`` while torch.export traces. Nothing happens where FSMT's module is not
imported.

Semantics: transformers' ``models/fsmt/modeling_fsmt.py`` (``make_padding_mask``, ``Attention.forward``:
``if key_padding_mask is not None: ... masked_fill``).
"""

from __future__ import annotations

from typing import Callable

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import module_function

MODULE = "transformers.models.fsmt.modeling_fsmt"


def _make(original: Callable) -> Callable:
    def make_padding_mask(input_ids, padding_idx=1):
        return input_ids.eq(padding_idx)

    return make_padding_mask


def _changes() -> list:
    return module_function(MODULE, "make_padding_mask", _make)


KEPT_PADDING_MASK = register(Patch(
    "FSMT padding mask kept", _changes,
    "transformers' FSMT make_padding_mask: while torch.export traces, the mask input_ids.eq(padding_idx) is "
    "returned even where it masks nothing ('if not padding_mask.any(): padding_mask = None' reads the data); its "
    "one use, masked_fill of the attention weights, leaves them as they are where the mask is all False",
    when=always, order=220))
