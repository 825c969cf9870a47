"""Sizes of RETURNN dims as torch sizes while torch.export traces a RETURNN model.

RETURNN's value of a dynamic dim is the maximum of its lengths (``Dim.get_dim_value_tensor``:
``rf.reduce_max(dyn_size_ext)``), which torch.export can only take as a data-dependent size: a
``reshape`` by it (``pool``, ``merge_dims``) cannot be traced. RETURNN pads every batch to its
longest sequence, so that maximum is the padded tensor's size along the dim: ``DimValues`` holds
those sizes (``torch.SymInt``), noted from the raw inputs (``assign_recording``) and derived for
dims made by dim math (``⌈time/2⌉``); ``dim_value_methods`` answers RETURNN's dim values from them.
Used by ``onnxport.integrations.returnn.capture_hooks``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

# Dim ops whose value is the same op on the inputs' values when every dynamic input derives from one
# dim (the maximum over the batch commutes with them: they do not decrease in any input); ops after
# which only static inputs may follow the first (a dynamic divisor or subtrahend would not commute).
_MONOTONE = ("add", "mul")
_STATIC_RIGHT = ("sub", "floordiv", "truediv", "truediv_left", "ceildiv", "ceildiv_left")


class DimValues:
    """The sizes of RETURNN dims as torch sizes (``torch.SymInt`` while tracing), for one trace:
    ``record`` notes a size, ``value`` tells it, deriving the sizes of dims made by dim math."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[Any, Any, frozenset]] = {}  # id(dim) -> (dim, size, ids of its root dims)

    def record(self, dim, size) -> None:
        """Note ``size`` (int or SymInt) as the value of the dynamic ``dim``."""
        if dim.dimension is None:
            self.known[id(dim)] = (dim, size, frozenset([id(dim)]))

    def value(self, dim) -> Any:
        """The size of ``dim`` (an int or a SymInt), or None when it cannot be told from the shapes."""
        got = self._lookup(dim)
        return got[0] if got is not None else None

    def _lookup(self, dim, depth: int = 0) -> tuple[Any, frozenset] | None:
        if dim.dimension is not None:
            return dim.dimension, frozenset()
        if depth > 64:
            return None
        for d in (dim, dim.get_same_base()):
            hit = self.known.get(id(d))
            if hit is not None:
                return hit[1], hit[2]
        op = dim.derived_from_op or dim.get_same_base().derived_from_op
        if op is None or not op.inputs:
            return None
        kind = op.kind
        parts = [self._lookup(x, depth + 1) for x in op.inputs]
        if any(p is None for p in parts):
            return None
        roots = frozenset().union(*(r for _, r in parts))
        if kind in _MONOTONE:
            if len({r for _, r in parts if r}) > 1:
                return None  # two dynamic dims of their own: max(a + b) is not max(a) + max(b)
        elif kind in _STATIC_RIGHT:
            if any(r for _, r in parts[1:]):
                return None
        else:
            return None
        size = parts[0][0]
        for other, _ in parts[1:]:
            size = _size_op(kind, size, other)
        self.known[id(dim)] = (dim, size, roots)
        return size, roots


def _size_op(kind: str, a: Any, b: Any) -> Any:
    """``a <kind> b`` on sizes as RETURNN's ``Dim.complete_dyn_size`` computes lengths: a sum with a
    negative term and a difference clipped at 0 (``relu``); ceil-division in torch's form
    ``(a - 1) // b + 1`` (RETURNN's ``-(-a // b)`` is the same number for ``a >= 0, b > 0``; torch's
    form is the one torch's own shape formulas use, so that the two sizes compare equal)."""
    if kind == "mul":
        return a * b
    if kind in ("add", "sub"):
        out = a + b if kind == "add" else a - b
        if kind == "sub" or (isinstance(b, int) and b < 0) or (isinstance(a, int) and a < 0):
            return max(out, 0) if isinstance(out, int) else torch.sym_max(out, 0)
        return out
    if kind.startswith("ceildiv"):
        return (a - 1) // b + 1
    return a // b  # floordiv; truediv, which RETURNN computes as floordiv too


def dim_value_methods(values: DimValues, get_dim_value: Callable, get_dim_value_tensor: Callable):
    """``Dim.get_dim_value`` and ``Dim.get_dim_value_tensor`` answering from ``values`` where it
    knows the size, as RETURNN's own otherwise.

    Replace ``returnn.tensor._dim_extra._DimMixin.get_dim_value`` / ``get_dim_value_tensor``, whose
    value of a dynamic dim is ``rf.reduce_max`` of its lengths: a data-dependent size when used in a
    ``reshape`` (``pool``, ``merge_dims``), which torch.export cannot trace. The size here is the
    same number on every batch padded to its longest sequence."""
    import returnn.frontend as rf
    from returnn.tensor import Tensor

    def dim_value(self):
        if self.dimension is None and self.capacity is None:
            v = values.value(self)
            if v is not None:
                return v
        return get_dim_value(self)

    def dim_value_tensor(self):
        if self.dimension is None and self.capacity is None:
            v = values.value(self)
            if isinstance(v, int):
                return v
            if v is not None:
                dtype = rf.get_default_array_index_dtype()
                raw = torch.full((), v, dtype=getattr(torch, dtype), device=rf.get_default_dim_size_device())
                return Tensor(f"{self.description}:value", dims=(), dtype=dtype, raw_tensor=raw)
        return get_dim_value_tensor(self)

    return dim_value, dim_value_tensor


def assign_recording(values: DimValues, original: Callable) -> Callable:
    """``TensorDict.assign_from_raw_tensor_dict_`` that also records, for each dynamic dim of the
    assigned tensors (the batch, a time axis), the raw tensor's size along it.

    Wraps ``returnn.tensor.tensor_dict.TensorDict.assign_from_raw_tensor_dict_``, with which
    ``ForwardModuleRF`` / ``ForwardModulePT`` hand the raw inputs to RETURNN."""

    def assign(self, raw_tensor_dict, *args, **kwargs):
        out = original(self, raw_tensor_dict, *args, **kwargs)
        for value in self.data.values():
            raw = value.raw_tensor
            if not isinstance(raw, torch.Tensor):
                continue
            for axis, dim in enumerate(value.dims):
                if dim.dimension is None and id(dim) not in values.known:
                    values.record(dim, raw.shape[axis])
        return out

    return assign
