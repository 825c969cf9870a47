"""timm's MobileViT blocks cutting their feature maps into patches, captured at every image size.

``MobileVitBlock.forward`` and ``MobileVitV2Block.forward`` round the height and width up to whole
patches (``new_h = math.ceil(H / patch_h) * patch_h``) and resize the features only ``if new_h != H or
new_w != W`` (a branch on the sizes' residues). Traced at an example of whole patches, the branch is not
taken and the unrounded size flows into the patch reshapes: torch.export then writes the block's output
width as a quotient of products of every earlier size (the ``reshape(B, C, -1, num_patches)`` infers
one size from the element count), each block nests the last one's expression, and sympy's
simplification of the next ``num_patch_h = new_h // patch_h`` did not end in ten minutes (timm's
``mobilevitv2_050``, batch, height and width dynamic; torch.export alone, without onnxport, as well).
Where the sizes are whole patches the bilinear resize to the same size returns its input unchanged
(``align_corners=True``: source pixel ``i * (H - 1) / (H - 1) = i``; ``False``: ``(i + 0.5) - 0.5 = i``),
so resizing at every size is the same function, and its sizes are ``patch_h * ceil(H / patch_h)``
at every stage. ``TIMM_MOBILEVIT_PATCHES`` (a registered capture patch) gives the traced classes a
``forward`` compiled from timm's own source with that branch's body unconditional (in
``MobileVitBlock`` the resize back, ``if interpolate:``, then runs at every size too). Eager execution
outside the trace is unchanged; a timm whose source lacks that statement is left as it is.

Semantics: timm's ``timm/models/mobilevit.py``; ``torch.nn.functional.interpolate`` (bilinear).
"""

from __future__ import annotations

import ast
import sys

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import forward_variants, replace_statement

MODULE = "timm.models.mobilevit"
CLASSES = ("MobileVitBlock", "MobileVitV2Block")
_RESIZE_TEST = "new_h != H or new_w != W"


def resize_at_every_size(func: ast.FunctionDef) -> bool:
    """``func`` (a block's ``forward``) with the resize to whole patches unconditional; False where
    its source has no such branch."""
    return func.name == "forward" and replace_statement(
        func.body, lambda n: isinstance(n, ast.If) and not n.orelse and ast.unparse(n.test) == _RESIZE_TEST,
        lambda n: n.body)


def _changes() -> list:
    module = sys.modules.get(MODULE)
    classes = [getattr(module, name) for name in CLASSES if hasattr(module, name)] if module is not None else []
    return forward_variants(classes, resize_at_every_size)


TIMM_MOBILEVIT_PATCHES = register(Patch(
    "timm MobileViT patches at every size", _changes,
    "timm's MobileVitBlock / MobileVitV2Block.forward: while torch.export traces, the features resized to whole "
    "patches at every size (the same size where they are whole patches: unchanged), so that every block's sizes "
    "are patch * ceil(size / patch); nothing happens where timm's MobileViT is not imported",
    when=always, order=380))
