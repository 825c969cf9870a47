"""transformers' sliding-window cache layers kept whole: exported holding every step.

Sliding-window layers are exported holding the whole sequence, like full-attention layers; the
window is applied by the attention mask. A trace cannot keep transformers' Python token counter of a
sliding layer, nor cut the cache to the window, without fixing the sequence length.
``SLIDING_WINDOW_AS_FULL`` (a registered capture patch) gives ``DynamicSlidingWindowLayer`` the
methods of ``DynamicLayer`` while torch.export traces, and ``sliding_window_as_full()`` while
validation runs the eager model (``verify/eager.py``), so both compute the same. The cache classes
as inputs and outputs are ``capture/caches.py``.

Semantics: ``transformers.cache_utils`` (DynamicLayer, DynamicSlidingWindowLayer), transformers 5.x.
"""

from __future__ import annotations

import contextlib
import sys

from onnxport.capture.patches import Patch, SetAttribute, always, installed, register


def _full_layer_method(fn):
    """A method calling ``fn`` (DynamicLayer's): a function of its own, so the patch's mark is not
    set on transformers' function."""

    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    return method


def _sliding_window_changes() -> list:
    cu = sys.modules.get("transformers.cache_utils")
    if cu is None:
        return []
    return [SetAttribute(cu.DynamicSlidingWindowLayer, n,
                         lambda _original, n=n: _full_layer_method(getattr(cu.DynamicLayer, n)))
            for n in ("update", "get_mask_sizes", "get_seq_length")]


SLIDING_WINDOW_AS_FULL = register(Patch(
    "sliding window as full", _sliding_window_changes,
    "transformers' DynamicSlidingWindowLayer.update / get_mask_sizes / get_seq_length: a sliding-window cache "
    "layer keeps every step like a full-attention layer (the attention mask still applies the window)",
    when=always, order=330))


@contextlib.contextmanager
def sliding_window_as_full():
    """While active, transformers' sliding-window cache layers keep every step like a full-attention
    layer (``SLIDING_WINDOW_AS_FULL``; the attention mask still applies the window). See the module
    docstring."""
    with installed(SLIDING_WINDOW_AS_FULL):
        yield
