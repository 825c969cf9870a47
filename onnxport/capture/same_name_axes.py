"""Axes declared under one name are one size from the start of the trace.

torch.export gives every dynamic axis a symbol of its own, also where one ``Dim`` (or one name)
stands for several (an image's height and width, ``{2: "image", 3: "image"}``), and ties them only
when a guard of the model equates them. A condition read before that (MobileViT's rounding of height
and width to whole patches compared with each other) then holds two symbols, and torch narrows
the range of one of them from the other's example size (``image <= 64``): the program computes some
sizes as constants of that range, and the ONNX model fails at larger images. ``SAME_NAME_AXES`` (a
registered capture patch) states the equalities the declaration makes, ``torch._check(a == b)``, in
a forward pre-hook of the user's module, before anything else is traced: the axes share one symbol
throughout.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from onnxport.capture.dynamic_shapes import DeclaredDim, flat_names, signature_names
from onnxport.capture.patches import Enter, Patch, register


def tie_axes(module: torch.nn.Module, args: tuple, kwargs: dict, declared: list[DeclaredDim]) -> None:
    """``torch._check(size == first size)`` for each declared axis whose name an earlier axis has
    (inputs as ``module`` is called with ``args`` / ``kwargs``); axes of one symbol already, not
    symbolic, or of another size in the example are left."""
    leaves = {name: leaf for name, leaf, _ in flat_names(signature_names(module, args, kwargs))}
    first: dict[str, torch.SymInt] = {}
    for d in declared:
        leaf = leaves.get(d.input_name)
        if not isinstance(leaf, torch.Tensor) or d.axis >= leaf.dim():
            continue
        size = leaf.shape[d.axis]
        if not isinstance(size, torch.SymInt):
            continue
        if d.name not in first:
            first[d.name] = size
        elif size.node.expr != first[d.name].node.expr and size.node.hint == first[d.name].node.hint:
            torch._check(size == first[d.name])  # examples of other sizes are reported where they are checked


def _hooked(module: torch.nn.Module, declared: list[DeclaredDim]) -> Any:
    @contextlib.contextmanager
    def hook() -> Iterator[None]:
        handle = module.register_forward_pre_hook(
            lambda m, args, kwargs: tie_axes(m, args, kwargs, declared), with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()

    return hook


def _changes(module: Any, declared: list[DeclaredDim]) -> list:
    names = [d.name for d in declared]
    if not isinstance(module, torch.nn.Module) or len(set(names)) == len(names):
        return []
    return [Enter(_hooked(module, declared))]


SAME_NAME_AXES = register(Patch(
    "axes of one name tied", _changes,
    "a forward pre-hook on the user's module while torch.export traces: torch._check(a == b) for the axes declared "
    "under one name, so they share one symbol before the model's code compares them", None))
