"""transformers' MobileViT cutting its feature maps into patches, captured at every image size.

``MobileViTLayer.unfolding`` rounds the height and width up to whole patches with
``int(math.ceil(orig_height / patch_height) * patch_height)`` (``int()`` fixes a symbolic size to
the example's) and resizes the features only ``if new_width != orig_width or new_height !=
orig_height`` (a branch on the sizes' residues); ``folding`` resizes back where it did. Where the
sizes are whole patches the bilinear resize (``align_corners=False``) to the same size returns its
input unchanged, so resizing at every size is the same function. ``SYMBOLIC_PATCH_GRID`` (a
registered capture patch) gives the traced class a version of ``unfolding`` compiled from
transformers' own source with the rounding written as ``((size + patch - 1) // patch) * patch``
(the same integers) and the resize unconditional; ``folding`` then resizes back at every size too.
Eager execution outside the trace is unchanged; a transformers whose source lacks those statements
is left as it is.

Semantics: transformers' ``models/mobilevit/modeling_mobilevit.py``; ``torch.nn.functional.interpolate``
(bilinear, ``align_corners=False``: output pixel ``i`` samples input ``(i + 0.5) * scale - 0.5``).
"""

from __future__ import annotations

import ast
import sys
from typing import Callable

from onnxport.capture.patches import Patch, SetAttribute, always, register
from onnxport.capture.source_variants import replace_statement, source_variant

MODULE = "transformers.models.mobilevit.modeling_mobilevit"
_ROUNDED = ("new_height", "orig_height", "patch_height"), ("new_width", "orig_width", "patch_width")
_RESIZE_TEST = "new_width != orig_width or new_height != orig_height"


def _rounding(name: str, size: str, patch: str) -> Callable[[ast.stmt], bool]:
    def matches(node: ast.stmt) -> bool:
        return isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == name and \
            f"int(math.ceil({size} / {patch}) * {patch})" in ast.unparse(node.value)

    return matches


def _every_size(func: ast.FunctionDef) -> bool:
    if func.name != "unfolding":
        return False
    for name, size, patch in _ROUNDED:
        rounded = ast.parse(f"{name} = (({size} + {patch} - 1) // {patch}) * {patch}").body[0]
        if not replace_statement(func.body, _rounding(name, size, patch),
                                 lambda node, new=rounded: [ast.copy_location(new, node)]):
            return False
    return replace_statement(func.body, lambda n: isinstance(n, ast.If) and not n.orelse
                             and ast.unparse(n.test) == _RESIZE_TEST, lambda n: n.body)


def unfolding_at_every_size(fn: Callable) -> Callable | None:
    """MobileViT's ``unfolding`` with the rounding kept symbolic and the resize unconditional (see
    the module docstring); None when its source does not have those statements."""
    return source_variant(fn, _every_size)


def _changes() -> list:
    module = sys.modules.get(MODULE)
    cls = getattr(module, "MobileViTLayer", None) if module is not None else None
    if cls is None or unfolding_at_every_size(cls.unfolding) is None:
        return []
    return [SetAttribute(cls, "unfolding", lambda original: unfolding_at_every_size(original) or original)]


SYMBOLIC_PATCH_GRID = register(Patch(
    "MobileViT patches at every size", _changes,
    "transformers' MobileViTLayer.unfolding: while torch.export traces, the height and width rounded up to whole "
    "patches as integer arithmetic of the sizes (no int() of a size) and the features resized at every size (the "
    "same size where they are whole patches: unchanged); nothing happens where MobileViT is not imported",
    when=always, order=270))
