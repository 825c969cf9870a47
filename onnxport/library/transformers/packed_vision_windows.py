"""Packed vision windows (Qwen2.5-VL's vision tower and its kin), computed per token instead of per image.

transformers' ``vision_utils.get_vision_window_index(grid_thw, spatial_merge_size, window_size,
patch_size)`` orders each image's merged patches by attention window in a Python loop over
``grid_thw.tolist()``: the ``h' x w'`` grid of merged patches (``h' = h // m``) padded to whole windows
of ``V = window_size // m // patch_size`` a side, read window by window (``t, window row, window
column, row in window, column in window``), the padding dropped; and the windows' ends, cumulated and
without repeats (``unique_consecutive``). A loop over the rows of ``grid_thw`` fixes the number of
images in torch.export.

Each merged patch's place in that order is a function of its index ``u``: its image ``k`` (by the
images' ends), its frame, row ``r`` and column ``c`` in the image; its window ``(r // V, c // V)``
among ``(h' // V + 1) x (w' // V + 1)`` (the loop's padded count); the key ``(k, frame, window, r % V,
c % V)`` sorts the patches as the loop lists them, so ``window_index = argsort(key)``. The window
boundaries are where the sorted window changes, ``(i + 1) * m * m`` after sorted patch ``i``; the
other places hold 0, a boundary before every token, which the packed attention reading them
(``packed_vision_attention``: a token's piece is the number of boundaries at or before it) counts for
every token alike: the same pieces as transformers' list at a size that does not depend on the data.

``WINDOWS_PER_TOKEN`` (a registered capture patch) makes ``get_vision_window_index``, while
torch.export traces, that computation (precomputed ``window_index`` and ``cu_window_seqlens`` are
popped and returned as before).

Semantics: transformers' ``vision_utils.py`` (``get_vision_window_index``).
"""

from __future__ import annotations

import sys

from onnxport.capture.patches import Patch, SetCode, always, register
from onnxport.library.transformers.packed_vision_positions import image_of_tokens

MODULE = "transformers.vision_utils"
_IMAGE = 2 ** 32  # a key's step from one image to the next: more windows than an image holds


def windows_per_token(grid_thw, spatial_merge_size, window_size, patch_size, kwargs=None):
    """``(window_index, cu_window_seqlens)``: the merged patches ``[sum(t * h' * w')]`` int64 in window
    order, and ``[1 + sum(t * h' * w')]`` int32 window ends (``(i + 1) * m * m`` where the window
    changes after sorted patch ``i``, 0 elsewhere), from ``grid_thw`` ``[images, 3]``.

    ``cu_window_seqlens`` is not transformers' list: its zeros are boundaries before every token, right
    only for a reader that counts the boundaries at or before each token (the block mask of
    ``packed_vision_attention``, which the eager and SDPA attention read it through). A length taken
    from consecutive entries (``max_seqlen = (cu[1:] - cu[:-1]).max()``: transformers' ``get_max_seqlen``,
    which the model calls under flash attention only) would be wrong: a window's end minus a 0 is the
    whole sequence up to it, and a 0 minus the end before it is negative."""
    import torch

    if kwargs is not None:
        window_index = kwargs.pop("window_index", None)
        cu_window_seqlens = kwargs.pop("cu_window_seqlens", None)
        if window_index is not None and cu_window_seqlens is not None:
            return window_index, cu_window_seqlens
    m = spatial_merge_size
    side = window_size // m // patch_size
    grid = grid_thw.long()
    t, h, w = grid[:, 0], grid[:, 1] // m, grid[:, 2] // m
    k, local = image_of_tokens(t * h * w)
    hk, wk = h[k], w[k]
    frame, rest = local // (hk * wk), local % (hk * wk)
    r, c = rest // wk, rest % wk
    window = (frame * (hk // side + 1) + r // side) * (wk // side + 1) + c // side + k * _IMAGE
    key = window * (side * side) + (r % side) * side + c % side
    window_index = torch.argsort(key)
    ordered = window[window_index]
    changes = torch.cat([ordered[1:] != ordered[:-1], torch.ones(1, dtype=torch.bool, device=grid.device)])
    boundaries = torch.where(changes, torch.arange(1, key.shape[0] + 1, device=grid.device) * (m * m), 0)
    cu = torch.cat([torch.zeros(1, dtype=boundaries.dtype, device=grid.device), boundaries])
    return window_index, cu.to(torch.int32)


def _changes() -> list:
    module = sys.modules.get(MODULE)
    fn = getattr(module, "get_vision_window_index", None) if module is not None else None
    if fn is None or "tolist" not in fn.__code__.co_names:
        return []
    return [SetCode(fn, windows_per_token)]


WINDOWS_PER_TOKEN = register(Patch(
    "packed vision window order per token", _changes,
    "transformers' vision_utils.get_vision_window_index: while torch.export traces, the merged patches' window "
    "order is the argsort of a key computed from each patch's index and grid_thw's cumulative sizes, and the "
    "window ends are marked where the sorted window changes (0 elsewhere), instead of a Python loop over "
    "grid_thw.tolist(), which fixes the number of images; nothing happens where transformers.vision_utils is "
    "not imported", when=always, order=237))
