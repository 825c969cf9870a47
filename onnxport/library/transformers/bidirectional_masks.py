"""transformers' bidirectional attention mask skipped where no attention mask is given, as in eager.

transformers' ``sdpa_mask`` (``masking_utils.py``; the eager attention's ``eager_mask`` calls it too)
returns None, no mask, for bidirectional attention where ``_ignore_bidirectional_mask_sdpa(
padding_mask, kv_length, local_attention_size)`` holds: no token masked and no local attention
window. While ``torch.export`` traces, that function answers False whatever its arguments ("we need
to avoid to check the contents of the mask"), so the traced model gets an all-true mask eager never
builds. Most attentions compute the same with it, but an attention that only takes a mask of the
shape of the scores it computes without one fails on it: Autoformer's auto-correlation (its weights
``[batch * heads, length, channels]``, viewed as ``[batch, heads, length, length]`` to add the mask)
and Informer's ProbSparse attention (scores of its ``u`` sampled queries, the mask of every query),
refused while traced though eager runs them at every size.

Where ``padding_mask`` is None and ``local_attention_size`` is None, eager's answer reads no tensor:
True, at every size. ``EAGER_MASK_SKIP`` (a registered capture patch) makes
``_ignore_bidirectional_mask_sdpa`` give that answer while torch.export traces; for a padding mask or
a local window it is transformers' own (the mask materialized, which computes what eager computes).
Nothing happens where ``transformers.masking_utils`` is not imported.

Semantics: transformers' ``masking_utils.py`` (``sdpa_mask``, ``eager_mask``,
``_ignore_bidirectional_mask_sdpa``); an attention without a mask attends to every key.
"""

from __future__ import annotations

from typing import Callable

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import module_function

MODULE = "transformers.masking_utils"
FUNCTION = "_ignore_bidirectional_mask_sdpa"


def _eager_skip(original: Callable) -> Callable:
    def _ignore_bidirectional_mask_sdpa(padding_mask, kv_length, local_attention_size=None):
        if padding_mask is None and local_attention_size is None:
            return True
        return original(padding_mask, kv_length, local_attention_size)

    return _ignore_bidirectional_mask_sdpa


def _changes() -> list:
    return module_function(MODULE, FUNCTION, _eager_skip)


EAGER_MASK_SKIP = register(Patch(
    "bidirectional mask skipped without a padding mask", _changes,
    "transformers' masking_utils._ignore_bidirectional_mask_sdpa: while torch.export traces, True (no mask) where "
    "no padding mask and no local attention window are given, eager's answer at every size, so the traced model "
    "attends as eager does (Autoformer's and Informer's attentions take no all-true mask); transformers' own "
    "answer otherwise; nothing happens where that module is not imported", when=always, order=238))
