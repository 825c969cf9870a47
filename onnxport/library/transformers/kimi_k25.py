"""Kimi K2.5's vision tower on packed clips at every grid: frame indices per token, merged counts read
as symbolic sizes.

transformers' ``models/kimi_k25/modeling_kimi_k25.py`` gives each patch of the packed clips its row of
the temporal embedding table with ``get_vision_frame_index(grid_thw)``: a Python loop over
``grid_thw.tolist()``, one ``torch.arange(t) + int(t > 1)`` per clip of ``t`` frames of ``h x w``
patches, repeated ``h * w`` times, concatenated. The loop fixes the number of clips in torch.export,
and ``arange(t)`` of a value read from the input is a size torch.export cannot decide on (``t > 1``).

Each patch's row is a function of its index ``j`` in the sequence: its clip ``k`` and offset ``o``
in it (``packed_vision_positions.image_of_tokens`` over the clips' sizes ``t * h * w``), its frame
``o // (h * w)``, plus 1 where the clip has more than one frame (row 0 is the table's zero pad, which
single-frame clips take). ``FRAMES_PER_TOKEN`` (a registered capture patch) makes
``get_vision_frame_index`` that computation while torch.export traces; a precomputed ``frame_index``
in ``kwargs`` is returned as transformers returns it.

``get_vision_temporal_merge_index`` (already vectorized over the clips) reads its two counts as Python
numbers, ``num_patches = int(patches_per_video.sum())`` and ``num_merged_tokens = int(...)``, which
torch.export cannot give for a value of the input. ``COUNTS_AS_SIZES`` (a registered capture patch)
makes it, while traced, the function compiled from transformers' own source with each ``int(x.sum())``
read as ``x.sum().item()``: the same count, a size symbol torch.export keeps. Nothing happens where
Kimi K2.5's module is not imported.

Semantics: transformers' ``models/kimi_k25/modeling_kimi_k25.py`` (``get_vision_frame_index``,
``get_vision_temporal_merge_index``); ``int(t)`` of a one-element tensor is ``t.item()``.
"""

from __future__ import annotations

import ast
import sys
from typing import Callable

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import function_variant, module_function
from onnxport.library.transformers.packed_vision_positions import image_of_tokens

MODULE = "transformers.models.kimi_k25.modeling_kimi_k25"


def frames_per_token(grid_thw, kwargs=None):
    """``get_vision_frame_index``: ``[sum(t * h * w)]`` int64, each patch's row of the temporal table
    (its frame, plus 1 in a clip of more than one frame), from ``grid_thw`` ``[clips, 3]`` int."""
    if kwargs is not None and (frame_index := kwargs.pop("frame_index", None)) is not None:
        return frame_index
    grid = grid_thw.long()
    t, h, w = grid[:, 0], grid[:, 1], grid[:, 2]
    clip, offset = image_of_tokens(t * h * w)
    return offset // (h * w)[clip] + (t > 1).long()[clip]


def _changes() -> list:
    def make(original: Callable) -> Callable:
        return frames_per_token

    return module_function(MODULE, "get_vision_frame_index", make)


FRAMES_PER_TOKEN = register(Patch(
    "Kimi K2.5 frame indices per token", _changes,
    "transformers' Kimi K2.5 get_vision_frame_index: while torch.export traces, each patch's temporal row (its "
    "frame, plus 1 in a multi-frame clip) is computed from its index and the cumulative clip sizes of grid_thw "
    "instead of a Python loop over grid_thw.tolist(); nothing happens where that module is not imported",
    when=always, order=239))


def _counts_read_as_sizes(func: ast.FunctionDef) -> bool:
    """Each ``int(x.sum())`` of ``get_vision_temporal_merge_index`` read as ``x.sum().item()``; False
    where there is none."""
    if func.name != "get_vision_temporal_merge_index":
        return False
    changed = []

    class Item(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            inner = node.args[0] if len(node.args) == 1 and not node.keywords else None
            if isinstance(node.func, ast.Name) and node.func.id == "int" and isinstance(inner, ast.Call) \
                    and isinstance(inner.func, ast.Attribute) and inner.func.attr == "sum" and not inner.args:
                changed.append(node)
                return ast.copy_location(ast.Call(ast.Attribute(inner, "item", ast.Load()), [], []), node)
            return node

    Item().visit(func)
    return bool(changed)


def _count_changes() -> list:
    module = sys.modules.get(MODULE)
    fn = getattr(module, "get_vision_temporal_merge_index", None) if module is not None else None
    return [] if fn is None else function_variant(fn, _counts_read_as_sizes)


COUNTS_AS_SIZES = register(Patch(
    "Kimi K2.5 merge counts as symbolic sizes", _count_changes,
    "transformers' Kimi K2.5 get_vision_temporal_merge_index: while torch.export traces, each int(x.sum()) count "
    "of patches and merged tokens is read as x.sum().item(), the same count kept a size symbol instead of a Python "
    "number torch.export cannot give; nothing happens where that module is not imported", when=always, order=239))
