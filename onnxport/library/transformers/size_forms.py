"""transformers' code that turns a size into a Python int, captured in a form that keeps it symbolic.

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

Semantics: transformers' ``utils/generic.py`` (``torch_int``, ``torch_float``); Python's ``len``.
"""

from __future__ import annotations

import builtins
import sys

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register
from onnxport.library.transformers import MODELS


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
            if name.startswith(MODELS) and module is not None
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
