"""TimeSformer's position and time embeddings, resized at every image size and frame count.

transformers' ``TimesformerEmbeddings.forward`` adds the position embeddings as they are where the
video's patch count matches the config's (``embeddings.size(1) == self.position_embeddings.size(1)``)
and otherwise resizes their ``n x n`` grid to the video's ``rows x cols`` (``interpolate(...,
mode="nearest")``); likewise the time embeddings to the frame count. torch.export follows the side
the example takes: an example at the config's image size fixes the image size to it; any other
example excludes it.

Nearest resizing to the grid's own size is the identity (source index ``floor(i * n / n) = i``), so
the resizing side computes the same as the direct one wherever the patch grid is ``n x n``: always
for the frames, and for the image wherever it is square (``rows * cols == cols * cols``). It differs
only where a non-square grid has the config's patch count, where eager adds the ``n x n`` table read
as ``rows x cols``.

``RESIZE_AT_EVERY_SIZE`` (a registered capture patch) gives ``TimesformerEmbeddings``, while
torch.export traces, a ``forward`` compiled from transformers' own source with the image branch taken
where the grid is square or the count differs (``(embeddings.size(1) - 1) == patch_width *
patch_width or ...``: a square grid of one dynamic size decides it without a guard), and the frame
branch always taken.

Semantics: transformers' ``models/timesformer/modeling_timesformer.py``
(``TimesformerEmbeddings.forward``); ``torch.nn.functional.interpolate`` (nearest).
"""

from __future__ import annotations

import ast
import sys

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import forward_variants

MODULE = "transformers.models.timesformer.modeling_timesformer"

_IMAGE = "embeddings.size(1) != self.position_embeddings.size(1)"
_SQUARE_OR_IMAGE = f"embeddings.size(1) - 1 == patch_width * patch_width or {_IMAGE}"
_FRAMES = "num_frames != self.time_embeddings.size(1)"


def _resize_first(func: ast.FunctionDef) -> bool:
    """Make the image branch taken for a square grid and the frame branch always; False where
    ``func`` holds not exactly one branch of each."""
    if func.name != "forward":
        return False
    image = [n for n in ast.walk(func) if isinstance(n, ast.If) and ast.unparse(n.test) == _IMAGE]
    frames = [n for n in ast.walk(func) if isinstance(n, ast.If) and ast.unparse(n.test) == _FRAMES]
    if len(image) != 1 or len(frames) != 1:
        return False
    image[0].test = ast.copy_location(ast.parse(_SQUARE_OR_IMAGE, mode="eval").body, image[0].test)
    frames[0].test = ast.copy_location(ast.Constant(True), frames[0].test)
    for node in (image[0].test, frames[0].test):
        for child in ast.walk(node):
            ast.copy_location(child, node)
    return True


def _changes() -> list:
    module = sys.modules.get(MODULE)
    cls = getattr(module, "TimesformerEmbeddings", None) if module is not None else None
    return [] if cls is None or "forward" not in vars(cls) else forward_variants([cls], _resize_first)


RESIZE_AT_EVERY_SIZE = register(Patch(
    "TimeSformer embeddings resized at every size", _changes,
    "transformers' TimesformerEmbeddings.forward: while torch.export traces, the position embeddings are resized "
    "to the patch grid wherever it is square (nearest resizing to the table's own size returns it unchanged) and "
    "the time embeddings to the frame count always, instead of a branch on the config's size that fixes the "
    "image size; nothing happens where that module is not imported", when=always, order=234))
