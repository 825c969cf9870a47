"""Tensors built from sizes: ``torch.as_tensor`` of a list of sizes, ``torch.linspace`` to a size.

Detection transformers gather their feature maps' sizes into a tensor and lay reference points over
each map (Deformable DETR: ``spatial_shapes = torch.as_tensor(spatial_shapes_list, dtype=torch.long)``
with ``spatial_shapes_list`` the ``(height, width)`` of every level, then ``torch.linspace(0.5, height
- 0.5, height)``). Both factories ask for concrete numbers (``as_tensor`` reads each element as a
Python number; ``linspace`` takes an ``int`` count), so torch.export fixes the image size at the
example (``torch.tensor`` of sizes it traces as they are). ``SIZE_TENSORS`` (a registered capture
patch) builds them, while torch.export traces, from the sizes as they are:

* ``torch.as_tensor(data)`` where the nested lists / tuples of ``data`` hold a symbolic size
  (``SymInt`` / ``SymFloat``) among Python numbers: ``torch.stack`` of ``torch.scalar_tensor`` per
  element, of the dtype given, else int64 when every element is an integer and the default float
  dtype otherwise (as ``torch.as_tensor`` infers it); placed on ``device`` when given. Other data
  (tensors, arrays, empty lists) keeps the factory as it is.
* ``torch.linspace(start, end, steps)`` where one of them is symbolic and the dtype is floating
  point: ``i = arange(steps)``, ``step = (end - start) / max(steps - 1, 1)``, ``start + i * step``
  for ``i < steps / 2`` and ``end - (steps - 1 - i) * step`` for the rest, PyTorch's own formula
  (``aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp``), so the values agree with eager's to the
  float rounding of that formula; ``steps = 1`` gives ``[start]`` as PyTorch does. Integer dtypes
  and tensor bounds keep the factory as it is.

Semantics: ``torch.as_tensor`` (PyTorch doc: "infers data type from data"), ``torch.linspace``
(PyTorch doc: ``start + (end - start) / (steps - 1) * i``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register

_SYMBOLIC = (torch.SymInt, torch.SymFloat)
_NUMBERS = (int, float, torch.SymInt, torch.SymFloat)


def _elements(data: Any) -> list | None:
    """The leaves of nested, non-empty lists / tuples of numbers (bools left out), or None for any other
    data."""
    if isinstance(data, (list, tuple)):
        if not data:  # an empty list: as_tensor's own shape rules
            return None
        out = []
        for value in data:
            leaves = _elements(value)
            if leaves is None:
                return None
            out.extend(leaves)
        return out
    if isinstance(data, _NUMBERS) and not isinstance(data, bool):
        return [data]
    return None


def _stacked(data: Any, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(data, (list, tuple)):
        return torch.stack([_stacked(value, dtype) for value in data])
    return torch.scalar_tensor(data, dtype=dtype)


def _of_sizes(original: Callable) -> Callable:
    def factory(data, *args, **kwargs):
        leaves = _elements(data) if not args and set(kwargs) <= {"dtype", "device"} else None
        if not leaves or not any(isinstance(v, _SYMBOLIC) for v in leaves):
            return original(data, *args, **kwargs)
        dtype = kwargs.get("dtype")
        if dtype is None:
            floats = any(isinstance(v, (float, torch.SymFloat)) for v in leaves)
            dtype = torch.get_default_dtype() if floats else torch.int64
        out = _stacked(data, dtype)
        device = kwargs.get("device")
        return out if device is None else out.to(device)

    return factory


def _linspace(original: Callable) -> Callable:
    def linspace(start, end, steps, *args, dtype=None, device=None, **kwargs):
        bounds = (start, end, steps)
        kind = dtype if dtype is not None else torch.get_default_dtype()
        if (args or kwargs or not kind.is_floating_point or not any(isinstance(v, _SYMBOLIC) for v in bounds)
                or not all(isinstance(v, _NUMBERS) for v in bounds)):
            return original(start, end, steps, *args, dtype=dtype, device=device, **kwargs)
        work = torch.float64 if kind == torch.float64 else torch.float32
        i = torch.arange(steps, dtype=work, device=device)
        step = (end - start) / torch.sym_max(steps - 1, 1)
        values = torch.where(i < steps / 2, start + i * step, end - (steps - 1 - i) * step)
        return values.to(kind)

    return linspace


def _changes() -> list:
    return [SetAttribute(torch, "as_tensor", _of_sizes), SetAttribute(torch, "linspace", _linspace)]


SIZE_TENSORS = register(Patch(
    "tensors of sizes symbolic", _changes,
    "torch.as_tensor of (nested) lists holding symbolic sizes and torch.linspace to a symbolic "
    "size: while torch.export traces, built from the sizes as they are (stack of scalar_tensor; arange and "
    "PyTorch's linspace formula) instead of fixing them at the example", when=always, order=160))
