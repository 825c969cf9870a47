"""Pixtral's batch of images of one size, captured as one tensor.

transformers' ``PixtralVisionModel.forward`` takes images of different sizes: called without
``image_sizes``, it makes the list ``[(height, width)] * batch_size``, cuts each image's patch grid
from the batch one by one, concatenates them into one sequence, builds each image's 2-D positions in a
Python loop, and an attention mask that is block-diagonal over the images
(``generate_block_attention_mask``: 0 inside an image's block, the dtype's minimum elsewhere). A list
as long as the batch fixes the batch size. Where ``image_sizes`` is None every image has the batch's
size, and each of those steps is a reshape of the batch: the cut ``embed[..., :h // p, :w // p]`` is
the whole grid the patch convolution (kernel and stride ``p``) returns; the concatenation is
``(B, C, h', w') -> (1, B * h' * w', C)``; the positions are one image's meshgrid repeated ``B`` times;
the mask is 0 where two tokens' ``index // (h' * w')`` agree.

``UNIFORM_IMAGE_BATCH`` (a registered capture patch) gives ``PixtralVisionModel``, while torch.export
traces, a ``forward`` compiled from transformers' own source with that batch path put first, for calls
without ``image_sizes`` and without flash attention (whose packed sequence lengths are another
argument); the decorators of the original ``forward`` are applied again. Calls with ``image_sizes``,
and a source without those statements, are left as they are.

Semantics: transformers' ``models/pixtral/modeling_pixtral.py`` (``PixtralVisionModel.forward``,
``generate_block_attention_mask``).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from typing import Callable

from onnxport.capture.patches import Patch, SetAttribute, always, register
from onnxport.capture.source_variants import source_variant
from onnxport.library_functions import library_function

MODULE = "transformers.models.pixtral.modeling_pixtral"

_BATCH_PATH = """
if image_sizes is None and not is_flash_attention_requested(self.config):
    _onnxport_embeds = self.patch_conv(pixel_values.to(dtype=self.patch_conv.weight.dtype))
    _onnxport_rows, _onnxport_cols = _onnxport_embeds.shape[-2], _onnxport_embeds.shape[-1]
    patch_embeds = self.ln_pre(_onnxport_embeds.flatten(2).transpose(1, 2).reshape(1, -1, _onnxport_embeds.shape[1]))
    _onnxport_h, _onnxport_w = torch.meshgrid(
        torch.arange(_onnxport_rows, device=patch_embeds.device),
        torch.arange(_onnxport_cols, device=patch_embeds.device), indexing="ij")
    position_ids = torch.stack([_onnxport_h.flatten(), _onnxport_w.flatten()], dim=-1).repeat(
        _onnxport_embeds.shape[0], 1)
    position_embeddings = self.patch_positional_embedding(patch_embeds, position_ids)
    _onnxport_image = torch.arange(patch_embeds.shape[1], device=patch_embeds.device) // (
        _onnxport_rows * _onnxport_cols)
    attention_mask = torch.zeros((), dtype=patch_embeds.dtype, device=patch_embeds.device).masked_fill(
        _onnxport_image[:, None] != _onnxport_image[None, :], torch.finfo(patch_embeds.dtype).min)
    attention_mask = attention_mask[None, None, :, :].expand(patch_embeds.shape[0], 1, -1, -1)
    return self.transformer(patch_embeds, attention_mask=attention_mask,
                            position_embeddings=position_embeddings, **kwargs)
"""


def _batch_path_first(func: ast.FunctionDef) -> bool:
    """Put the batch path before the body, where the body starts with ``if image_sizes is None:``
    making the per-image list and uses ``generate_block_attention_mask``."""
    source = ast.unparse(func)
    if func.name != "forward" or "[(height, width)] * batch_size" not in source \
            or "generate_block_attention_mask" not in source or "return self.transformer(" not in source:
        return False
    first = func.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):  # a docstring stays first
        first = func.body[1]
    at = func.body.index(first)
    path = ast.parse(textwrap.dedent(_BATCH_PATH)).body
    for node in path:
        ast.copy_location(node, first)
        for child in ast.walk(node):
            ast.copy_location(child, first)
    func.body[at:at] = path
    return True


def _decorated(original: Callable) -> Callable:
    """The variant of ``original`` (a decorated ``forward``) with the decorators of its source applied
    again in the same order; ``original`` when the source or a decorator cannot be read."""
    inner = library_function(original)
    variant = source_variant(inner, _batch_path_first)
    if variant is None:
        return original
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(inner)))
        decorators = [eval(compile(ast.fix_missing_locations(ast.Expression(d)), "<decorator>", "eval"),  # noqa: S307
                           inner.__globals__)
                      for d in tree.body[0].decorator_list]
    except Exception:  # noqa: BLE001 - a source this patch does not know: leave forward as it is
        return original
    out = variant
    for decorator in reversed(decorators):
        out = decorator(out)
    return out


def _changes() -> list:
    module = sys.modules.get(MODULE)
    cls = getattr(module, "PixtralVisionModel", None) if module is not None else None
    if cls is None or "forward" not in vars(cls):
        return []
    if source_variant(vars(cls)["forward"], _batch_path_first) is None:
        return []
    return [SetAttribute(cls, "forward", _decorated)]


UNIFORM_IMAGE_BATCH = register(Patch(
    "Pixtral batch of one image size as one tensor", _changes,
    "transformers' PixtralVisionModel.forward called without image_sizes: while torch.export traces, the batch's "
    "patch grids, positions and block-diagonal attention mask are computed from the batch tensor (reshape, "
    "repeat, index // patches) instead of from the list [(height, width)] * batch_size, which fixes the batch "
    "size; nothing happens where that module is not imported", when=always, order=230))
