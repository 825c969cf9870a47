"""Cosmos 3 Edge's vision positions resized per image, their sizes stated as the model needs them.

transformers' ``models/cosmos3_edge/modeling_cosmos3_edge.py`` resizes its learned square grid of
position embeddings to each packed image or frame (``resize_positional_embeddings``)::

    for temporal, height, width in grid_thw.tolist():
        resized = F.interpolate(positional_embeddings, size=(height, width), mode="bilinear", antialias=True)
        resized = resized....reshape(height // spatial_merge_size, spatial_merge_size,
                                     width // spatial_merge_size, spatial_merge_size, -1)

``height`` and ``width`` are values of the input ``grid_thw``, sizes torch.export knows nothing of:
it cannot decide ``height > 0`` (the interpolation's output) nor the reshape's product. Eager PyTorch
runs only where each side is a positive multiple of ``spatial_merge_size`` (the reshape fails
otherwise), which the model's processor guarantees. ``SIDES_STATED`` (a registered capture patch)
makes the function, while torch.export traces, the one compiled from transformers' own source with
``torch._check(side >= spatial_merge_size)`` and ``torch._check(side % spatial_merge_size == 0)``
stated for both sides at the top of that loop: the sizes eager runs at, nothing more. Nothing happens
where Cosmos 3 Edge's module is not imported.

Semantics: transformers' ``models/cosmos3_edge/modeling_cosmos3_edge.py``
(``Cosmos3EdgeVisionEmbeddings.resize_positional_embeddings``); ``Tensor.reshape`` needs the product
of the shape to be the element count.
"""

from __future__ import annotations

import ast

from onnxport.capture.patches import Patch, always, register
from onnxport.library.transformers import method_variants

METHOD = "resize_positional_embeddings"
MERGE = "spatial_merge_size"
_CHECKS = "torch._check({side} >= {merge})\ntorch._check({side} % {merge} == 0)\n"


def _sides_stated(func: ast.FunctionDef) -> bool:
    """The checks at the top of the one ``for t, height, width in grid_thw.tolist():`` loop of
    ``func``; False where ``func`` has no ``spatial_merge_size`` argument or not that one loop."""
    if func.name != METHOD or MERGE not in {a.arg for a in func.args.args}:
        return False
    loops = [n for n in ast.walk(func) if isinstance(n, ast.For) and ast.unparse(n.iter).endswith(".tolist()")
             and isinstance(n.target, ast.Tuple) and len(n.target.elts) == 3
             and all(isinstance(e, ast.Name) for e in n.target.elts)]
    if len(loops) != 1:
        return False
    loop = loops[0]
    checks = ast.parse("".join(_CHECKS.format(side=e.id, merge=MERGE) for e in loop.target.elts[1:])).body
    for node in checks:
        for child in ast.walk(node):
            ast.copy_location(child, loop.body[0])
    loop.body[:0] = checks
    return True


def _changes() -> list:
    return method_variants(METHOD, _sides_stated, reads=frozenset({"tolist", "interpolate"}))


SIDES_STATED = register(Patch(
    "Cosmos 3 Edge position sizes stated", _changes,
    "transformers' Cosmos 3 Edge resize_positional_embeddings: while torch.export traces, each image's height and "
    "width read from grid_thw are stated to be positive multiples of spatial_merge_size (torch._check), the sizes "
    "eager runs at, so the interpolation and the reshape to merge blocks are decided; nothing happens where that "
    "module is not imported", when=always, order=239))
