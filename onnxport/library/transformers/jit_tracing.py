"""transformers' code paths for exporting, taken while torch.export traces.

transformers' model code asks ``torch.jit.is_tracing()`` where an exported model needs another path
than eager: ``if not torch.jit.is_tracing() and num_patches == num_positions and height == width:
return self.position_embeddings`` (ViT, DINOv2, CLIPSeg and some 50 more: "always interpolate when
tracing to ensure the exported model works for dynamic input shapes"). torch.export does not set that
flag, so the branch on the example's image size is taken and fixes the size. ``JIT_TRACING_PATHS``
(a registered capture patch) makes ``torch.jit.is_tracing()`` true while torch.export traces, for
calls from transformers' model code only (``transformers.models.*``, read from the caller's frame);
for any other caller it is torch's own. At the sizes where eager skips it, the interpolation is to the
same size, which bicubic and bilinear resampling (``align_corners=False``) return unchanged.

Semantics: ``torch.jit.is_tracing`` (PyTorch docs); transformers' ``interpolate_pos_encoding``.
"""

from __future__ import annotations

import sys

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register

_PREFIX = "transformers.models."


def _tracing_for_transformers(original):
    def is_tracing() -> bool:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        return True if caller.startswith(_PREFIX) else original()

    return is_tracing


JIT_TRACING_PATHS = register(Patch(
    "transformers' export paths", lambda: [SetAttribute(torch.jit, "is_tracing", _tracing_for_transformers)],
    "torch.jit.is_tracing: while torch.export traces, true when called from transformers.models code (the paths "
    "transformers writes for exported models: position encodings interpolated at every image size); torch's own "
    "for every other caller", when=always, order=280))
