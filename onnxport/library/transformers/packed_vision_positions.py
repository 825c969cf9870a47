"""Packed vision positions (Qwen2-VL's vision tower and its kin), computed per token instead of per image.

transformers' ``vision_utils.get_vision_position_ids(grid_thw, spatial_merge_size)`` gives each token
of a packed sequence of images its (row, column) patch position (and its frame, with
``include_temporal``) by a Python loop over ``grid_thw.tolist()``: one ``meshgrid`` per image, laid
out block-major over ``merge x merge`` blocks, repeated over its ``t`` frames, concatenated. A loop
over the rows of ``grid_thw`` fixes the number of images in torch.export.

Each token's position is a function of its index ``j`` in the sequence: its image ``k`` is the number
of images' ends ``cumsum(t * h * w)`` at or before ``j``; its offset in the image ``o = j - start[k]``;
its frame ``o // (h * w)``; its place in the frame ``f = o % (h * w)`` read in the block-major order of
``(h // m, w // m, m, m)``: ``a, b, c, d`` its digits, row ``a * m + c``, column ``b * m + d``.

``POSITIONS_PER_TOKEN`` (a registered capture patch) makes ``get_vision_position_ids``, while
torch.export traces, that computation over ``j < sum(t * h * w)`` (a size known when the model runs,
which the model's later use against its patches ties to the input's sequence length) where
``spatial_merge_size`` is an int; a per-image tensor of merge sizes, and precomputed ``position_ids``,
take transformers' own code.

Semantics: transformers' ``vision_utils.py`` (``get_vision_position_ids``).
"""

from __future__ import annotations

import sys

from onnxport.capture.patches import Patch, SetCode, always, register
from onnxport.capture.source_variants import source_variant

MODULE = "transformers.vision_utils"


def image_of_tokens(sizes):
    """``(image, index)``, each ``[sum(sizes)]`` int64: the image of each token of images of ``sizes``
    ``[images]`` int64 tokens packed one after another, and the token's index in its image."""
    import torch

    ends = sizes.cumsum(0)
    total = ends[-1].item()
    torch._check(total >= 0)
    at = torch.arange(total, device=sizes.device)
    image = (at[:, None] >= ends[None, :]).sum(-1)
    return image, at - (ends - sizes)[image]


def positions_per_token(grid_thw, spatial_merge_size, include_temporal=False, kwargs=None, *, original=None):
    """The position ids of ``get_vision_position_ids``: ``[sum(t * h * w), 2]`` int64 (row, column),
    ``[.., 3]`` (frame, row, column) with ``include_temporal``, from ``grid_thw`` ``[images, 3]`` int;
    ``original`` (transformers' own code) where ``spatial_merge_size`` is not an int."""
    import torch

    if kwargs is not None and (position_ids := kwargs.pop("position_ids", None)) is not None:
        return position_ids
    if not isinstance(spatial_merge_size, int):
        return original(grid_thw, spatial_merge_size, include_temporal=include_temporal, kwargs=kwargs)
    m = spatial_merge_size
    grid = grid_thw.long()
    t, h, w = grid[:, 0], grid[:, 1], grid[:, 2]
    k, o = image_of_tokens(t * h * w)
    frame = (h * w)[k]
    f = o % frame
    block = (w // m)[k] * m * m
    a, r = f // block, f % block
    b, r = r // (m * m), r % (m * m)
    c, d = r // m, r % m
    rows, cols = a * m + c, b * m + d
    if include_temporal:
        return torch.stack([o // frame, rows, cols], dim=-1)
    return torch.stack([rows, cols], dim=-1)


def _same(func) -> bool:
    """Keep ``func`` as it is (``source_variant`` then compiles a copy of it)."""
    return True


def _changes() -> list:
    module = sys.modules.get(MODULE)
    fn = getattr(module, "get_vision_position_ids", None) if module is not None else None
    if fn is None or "tolist" not in fn.__code__.co_names:
        return []
    original = source_variant(fn, _same)  # a copy: fn's own code becomes the trampoline
    if original is None:
        return []

    def replacement(grid_thw, spatial_merge_size, include_temporal=False, kwargs=None):
        return positions_per_token(grid_thw, spatial_merge_size, include_temporal, kwargs, original=original)

    return [SetCode(fn, replacement)]


POSITIONS_PER_TOKEN = register(Patch(
    "packed vision position ids per token", _changes,
    "transformers' vision_utils.get_vision_position_ids with an int merge size: while torch.export traces, each "
    "token's (frame,) row and column are computed from its index and the cumulative image sizes of grid_thw "
    "instead of a Python loop over grid_thw.tolist(), which fixes the number of images; nothing happens where "
    "transformers.vision_utils is not imported", when=always, order=233))
