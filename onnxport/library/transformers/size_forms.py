"""Library code that turns a size into a Python int, captured in a form that keeps it symbolic.

transformers' ``torch_int`` / ``torch_float`` (``transformers.utils.generic``, used by 150 model
files for sizes: position-embedding interpolation, anchor grids, patch counts) call ``int(x)`` /
``float(x)``, which fix a symbolic size to the example's; ``SYMBOLIC_TORCH_INT`` gives the traced
modules versions that return a ``SymInt`` / ``SymFloat`` as it is (``torch.sym_int`` /
``torch.sym_float`` across the two), the same value eager computes.

transformers' detectors count a batch with Python's ``len`` of a tensor (RT-DETR, RT-DETRv2, D-FINE:
``batch_size = len(source_flatten)``), which must return an int and so fixes a dynamic batch to the
example's; ``SYMBOLIC_LEN`` gives every loaded transformers module a ``len`` that returns a tensor's
first size as it is (a ``SymInt`` while traced, the same value eager computes) and is the builtin for
everything else.

transformers' MobileNet v1 / v2 compute TensorFlow's "SAME" padding with ``int(features.shape[-2])``
and a branch on ``in_height % stride == 0`` (``apply_tf_padding``): torch.export fixes the image size
there. The padding is one formula at every size, TensorFlow's own
``max((ceil(size / stride) - 1) * stride + kernel - size, 0)``: ``max(kernel - stride, 0)`` where
``size % stride == 0``, ``max(kernel - size % stride, 0)`` elsewhere, the two branches of
transformers' code. ``TF_SAME_PADDING`` (a registered capture patch) gives the traced modules
that formula; eager execution outside the trace is unchanged.
Semantics: TensorFlow's padding notes (https://www.tensorflow.org/api_docs/python/tf/nn#notes_on_padding_2),
transformers' ``apply_tf_padding``.
"""

from __future__ import annotations

import builtins
import sys

import torch
from torch import nn

from onnxport.capture.patches import Patch, SetAttribute, always, register

MODULES = ("transformers.models.mobilenet_v1.modeling_mobilenet_v1",
           "transformers.models.mobilenet_v2.modeling_mobilenet_v2")


def tf_same_padding(features: torch.Tensor, conv_layer: nn.Conv2d) -> torch.Tensor:
    """``features`` (N, C, H, W) padded with zeros as TensorFlow's "SAME" convolution pads before
    ``conv_layer`` (its stride, kernel size and dilation), H and W kept symbolic."""
    height, width = features.shape[-2], features.shape[-1]
    stride_height, stride_width = conv_layer.stride
    kernel_height, kernel_width = conv_layer.kernel_size
    dilation_height, dilation_width = conv_layer.dilation
    along_height = _along(height, kernel_height, stride_height)
    along_width = _along(width, kernel_width, stride_width)
    left, top = along_width // 2, along_height // 2
    padding = (left * dilation_width, (along_width - left) * dilation_width,
               top * dilation_height, (along_height - top) * dilation_height)
    return nn.functional.pad(features, padding, "constant", 0.0)


def _along(size, kernel: int, stride: int):
    """The padding along one axis, TensorFlow's ``max((ceil(size / stride) - 1) * stride + kernel - size, 0)``
    (equal to both branches of transformers' code); constant for stride 1."""
    if stride == 1:
        return max(kernel - 1, 0)
    return torch.sym_max(((size + stride - 1) // stride - 1) * stride + kernel - size, 0)


def _passing(same: type, other: type, convert):
    """A replacement of transformers' ``torch_int`` / ``torch_float`` (``original``) returning a symbolic
    value of kind ``same`` as it is, one of kind ``other`` through ``convert``, anything else as before."""
    def make(original):
        def keep_symbolic(x):
            if isinstance(x, same):
                return x
            if isinstance(x, other):
                return convert(x)
            return original(x)

        return keep_symbolic

    return make


def _torch_int_changes() -> list:
    generic = sys.modules.get("transformers.utils.generic")
    if generic is None:
        return []
    changes = []
    for attribute, make in (("torch_int", _passing(torch.SymInt, torch.SymFloat, torch.sym_int)),
                            ("torch_float", _passing(torch.SymFloat, torch.SymInt, torch.sym_float))):
        original = getattr(generic, attribute, None)
        if original is None:
            continue
        for name, module in list(sys.modules.items()):
            if name.startswith("transformers") and module is not None and vars(module).get(attribute) is original:
                changes.append(SetAttribute(module, attribute, make))
    return changes


SYMBOLIC_TORCH_INT = register(Patch(
    "transformers' torch_int symbolic", _torch_int_changes,
    "transformers' torch_int / torch_float in every loaded transformers module that holds them: while torch.export "
    "traces, a symbolic size passes through as it is instead of int() / float() fixing it; nothing happens where "
    "transformers is not imported", when=always, order=120))


def symbolic_len(obj) -> "int | torch.SymInt":
    """``len(obj)``; for a tensor of rank >= 1 whose first size is symbolic, that size as it is (a
    ``SymInt``, where the builtin would fix it to an int)."""
    if isinstance(obj, torch.Tensor) and obj.dim() > 0 and isinstance(obj.shape[0], torch.SymInt):
        return obj.shape[0]
    return builtins.len(obj)


def _transformers_modules() -> list:
    """The loaded modules of transformers' model code (packages, lazily loaded, left out)."""
    return [module for name, module in list(sys.modules.items())
            if name.startswith("transformers.models.") and module is not None
            and not str(getattr(module, "__file__", "") or "").endswith("__init__.py")]


def _len_changes() -> list:
    if "transformers" not in sys.modules:
        return []
    return [SetAttribute(module, "len", lambda original: symbolic_len) for module in _transformers_modules()
            if "len" not in vars(module)]


SYMBOLIC_LEN = register(Patch(
    "len of a tensor symbolic", _len_changes,
    "len in every loaded transformers.models module: while torch.export traces, len(tensor) returns the tensor's "
    "first size as it is (a dynamic batch stays dynamic: RT-DETR's batch_size = len(source_flatten)); the builtin "
    "for anything else; nothing happens where transformers is not imported", when=always, order=130))


def _changes() -> list:
    return [SetAttribute(sys.modules[name], "apply_tf_padding", lambda original: tf_same_padding)
            for name in MODULES if name in sys.modules and hasattr(sys.modules[name], "apply_tf_padding")]


TF_SAME_PADDING = register(Patch(
    "TF SAME padding symbolic", _changes,
    "transformers' MobileNet v1/v2 apply_tf_padding: while torch.export traces, the same padding as one formula "
    "of the size (no int() of a size, no branch on its parity); nothing happens where those modules are not "
    "imported", when=always, order=110))
