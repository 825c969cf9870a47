"""Axes declared under one name are one size from the start of the trace.

torch.export gives every dynamic axis a symbol of its own, also where one ``Dim`` (or one name)
stands for several (an image's height and width, ``{2: "image", 3: "image"}``), and ties them only
when a guard of the model equates them. A condition read before that (MobileViT's rounding of height
and width to whole patches compared with each other) then holds two symbols, and torch narrows
the range of one of them from the other's example size (``image <= 64``): the program computes some
sizes as constants of that range, and the ONNX model fails at larger images. ``SAME_NAME_AXES`` (a
registered capture patch) states the equalities the declaration makes between the axes of one
input, ``torch._check(a == b)``, in a forward pre-hook of the user's module, before anything else is
traced: the axes share one symbol throughout.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from onnxport.capture.dynamic_shapes import DeclaredDim, flat_names, signature_names
from onnxport.capture.patches import Enter, Patch, register


def tie_axes(module: torch.nn.Module, args: tuple, kwargs: dict, declared: list[DeclaredDim]) -> None:
    """``torch._check(size == first size)`` for each declared axis whose name an earlier axis of the
    same input has (inputs as ``module`` is called with ``args`` / ``kwargs``); axes of one symbol
    already, not symbolic, or of another size in the example are left. Axes of different inputs
    (a batch of features and its mask) are tied where the model's code meets them, as torch does:
    tied earlier, torch's size-one assumptions on one of them (a pooled mask of one frame) would
    narrow the shared range instead of being kept."""
    leaves = {name: leaf for name, leaf, _ in flat_names(signature_names(module, args, kwargs))}
    first: dict[tuple[str, str], torch.SymInt] = {}
    for d in declared:
        leaf = leaves.get(d.input_name)
        if not isinstance(leaf, torch.Tensor) or d.axis >= leaf.dim():
            continue
        size = leaf.shape[d.axis]
        if not isinstance(size, torch.SymInt):
            continue
        key = (d.input_name, d.name)
        if key not in first:
            first[key] = size
        elif size.node.expr != first[key].node.expr and size.node.hint == first[key].node.hint:
            torch._check(size == first[key])  # examples of other sizes are reported where they are checked


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
    names = [(d.input_name, d.name) for d in declared]
    if not isinstance(module, torch.nn.Module) or len(set(names)) == len(names):
        return []
    return [Enter(_hooked(module, declared))]


SAME_NAME_AXES = register(Patch(
    "axes of one name tied", _changes,
    "a forward pre-hook on the user's module while torch.export traces: torch._check(a == b) for the axes of one input "
    "declared under one name (an image's height and width), so they share one symbol before the model's code "
    "compares them", None, when=lambda trace: (trace.request.model, trace.request.declared), order=260))
