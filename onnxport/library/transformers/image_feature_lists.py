"""A vision-language model's per-image feature list, captured as one tensor of the batch's features.

transformers' Llava (``LlavaModel.get_image_features``), called without ``image_sizes``, turns the
projected features ``[batch, patches, hidden]`` into a list of one tensor per image
(``image_features = list(image_features)``), and its ``forward`` concatenates that list again
(``torch.cat(image_features, dim=0)``) before scattering it into the token embeddings at the image
tokens (``masked_scatter``). A list as long as the batch fixes the batch size in torch.export. The
concatenation of the per-image tensors is the features flattened over the batch, ``[batch * patches,
hidden]``, so the one-element list ``[image_features.reshape(-1, hidden)]`` gives the same
concatenation at every batch size.

``FEATURES_AS_ONE_TENSOR`` (a registered capture patch) gives each loaded transformers class whose own
``get_image_features`` holds that statement, while torch.export traces, a ``get_image_features``
compiled from transformers' own source with the statement replaced (the function under its
decorators, so that they still apply). The list it returns while traced has one element: code that
reads one image's features from it (rather than concatenating them) is not served.

Semantics: transformers' ``models/llava/modeling_llava.py`` (``LlavaModel.get_image_features``,
``LlavaModel.forward``).
"""

from __future__ import annotations

import ast

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import replace_statement
from onnxport.library.transformers import method_variants

_LIST = "image_features = list(image_features)"
_ONE_TENSOR = "image_features = [image_features.reshape(-1, image_features.shape[-1])]"


def _one_tensor(func: ast.FunctionDef) -> bool:
    """Replace ``image_features = list(image_features)`` by the one-element list of the flattened
    features; False where ``func`` is not a ``get_image_features`` holding exactly one such statement."""
    if func.name != "get_image_features":
        return False
    return replace_statement(func.body, lambda s: ast.unparse(s) == _LIST,
                             lambda s: [ast.copy_location(ast.parse(_ONE_TENSOR).body[0], s)])


def _changes() -> list:
    return method_variants("get_image_features", _one_tensor)


FEATURES_AS_ONE_TENSOR = register(Patch(
    "vision-language per-image feature list as one tensor", _changes,
    "transformers' get_image_features of Llava-like models: while torch.export traces, the per-image list "
    "list(image_features), which fixes the batch size, is the one-element list of the features flattened over the "
    "batch, which torch.cat(..., dim=0) concatenates to the same tensor; nothing happens where no loaded "
    "transformers model holds that statement", when=always, order=231))
