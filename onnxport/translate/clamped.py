"""Sizes torch.export read as constants that a slice clamps below them: typed as the clamp.

torch.export traces a dynamic size from 2 on (its 0/1 specialization), so a slice with a constant
bound over a dynamic axis (``x[:2]`` with ``x.shape[0]`` dynamic) comes out of the trace with the
constant size 2 (``min(2, b)`` is 2 for every ``b >= 2``) and no guard recorded. At ``b = 1``
Python slicing clamps, and so does ONNX ``Slice``: the values are right, but the result's static
type ``[2, ...]``, and that of every value computed from it, would let the optimizer fold a
``Shape`` of them to the constant 2, and a slice write (``x[:2, :3] = 1``: a broadcast, then
``slice_scatter``) would scatter two rows into one.

Here such a size is typed as what it is, ``Min(2, b)`` (or ``Max(0, Min(end - start, b - start))``
for a slice starting later), on the slice's result and on every value computed from it whose
traced shape holds that constant (the dims rendered with the user's names), so nothing folds it.
Which dims are the clamp, ONNX inference from the retyped inputs tells (``retype``): a dim it finds
constant (a projection's 2 features, a sum broadcast to ``[2, 2]``) only equals the constant and
keeps it, and a dim it cannot tell is typed unknown.
Sizes the export promises at least as large as the bound (``Dim("b", min=2)``) stay constant.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import sympy
import torch
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from onnxport.translate import symbolic

aten = torch.ops.aten
_SLICES = (aten.slice.Tensor, aten.slice_copy.Tensor)


def _arg(node: torch.fx.Node, i: int, name: str, default: Any) -> Any:
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def _lower(expr: Any, floors: dict) -> Any:
    """The least value of ``expr`` over the sizes the export promises (``floors``: symbol -> least
    size), or None when it cannot be bounded."""
    if not expr.free_symbols <= floors.keys():
        return None
    try:
        low = bound_sympy(expr, {s: ValueRanges(floors[s], int_oo) for s in expr.free_symbols}).lower
    except Exception:  # noqa: BLE001 - an expression torch cannot bound: assume it may clamp
        return None
    return low if low.is_number else None


def slice_clamp(node: torch.fx.Node, floors: dict) -> dict[int, Any]:
    """``{size: expression}`` for a slice node whose constant result size along its axis is a clamp
    of a dynamic input size that may fall below it; empty otherwise."""
    if node.target not in _SLICES or not isinstance(node.args[0], torch.fx.Node):
        return {}
    source, val = node.args[0].meta.get("val"), node.meta.get("val")
    if not isinstance(source, torch.Tensor) or not isinstance(val, torch.Tensor):
        return {}
    axis = _arg(node, 1, "dim", 0) % max(source.dim(), 1)
    size_in, size_out = source.shape[axis], val.shape[axis]
    if not isinstance(size_in, torch.SymInt) or isinstance(size_out, torch.SymInt) or int(size_out) < 2:
        return {}
    expr = symbolic.expr_of(size_in)
    if not getattr(expr, "free_symbols", None):
        return {}
    start, step = _arg(node, 2, "start", None), _arg(node, 4, "step", 1)
    start = 0 if start is None else start
    if isinstance(start, int) and start >= 0 and step == 1:
        low = _lower(expr - start, floors or {})
        if low is not None and low >= int(size_out):
            return {}
        clamp = sympy.Min(expr, int(size_out)) if start == 0 else \
            sympy.Max(0, sympy.Min(expr - start, int(size_out)))
        return {int(size_out): clamp}
    return {int(size_out): None}  # a clamp of another form: an unknown size


def clamped_sizes(node: torch.fx.Node, known: dict, own: dict[int, Any]) -> dict[int, Any]:
    """The clamped sizes ``node``'s result may hold: a slice's own (``own``: ``slice_clamp``), and
    those of its inputs (``known``: FX node -> clamped sizes) that its traced shape holds."""
    if not known:  # no clamp so far (every model without one): nothing to inherit
        return own
    inherited: dict[int, Any] = {}
    for arg in node.all_input_nodes:
        inherited.update(known.get(arg, {}))
    if not inherited:
        return own
    held = {int(d) for v in _tensors(node.meta.get("val")) for d in v.shape if not isinstance(d, torch.SymInt)}
    return {**{size: e for size, e in inherited.items() if size in held}, **own}


def _tensors(val: Any) -> list[torch.Tensor]:
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        return [v for v in val if isinstance(v, torch.Tensor)]
    return []


def retype(value: ir.Value, sizes: dict[int, Any], dim_name: Any, inferred: ir.Shape | None = None,
           own: dict[int, Any] | None = None) -> None:
    """``value``'s constant dims found in ``sizes`` typed as their clamp (``dim_name`` renders it;
    None: an unknown dim). ``inferred``: the value's shape before it was typed from the trace (ONNX
    inference from its inputs, which carry the clamp, or the shape it was translated with): a dim
    constant there is a size of its own that only equals the clamped constant (a projection to 2
    features, a sum broadcast to ``[2, 2]``) and keeps it; a dim it names as the clamp is the
    clamp; a dim it does not know is unknown, but for the slice's own clamp (``own``). Without
    ``inferred`` every such dim is the clamp."""
    if value.shape is None or not sizes:
        return
    dims = list(value.shape)
    known = list(inferred) if inferred is not None and len(inferred) == len(dims) else None
    changed = False
    for i, d in enumerate(dims):
        if not isinstance(d, int) or d not in sizes or known is not None and isinstance(known[i], int):
            continue
        clamp = dim_name(sizes[d]) if sizes[d] is not None else None
        named = clamp is not None and known is not None and str(known[i]) == str(clamp)
        dims[i] = clamp if known is None or named or d in (own or {}) else None
        changed = True
    if changed:
        value.shape = ir.Shape(dims)
