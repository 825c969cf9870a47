"""Integer inputs that index a table: token ids into an embedding, ids into a lookup table.

Their plausible values are the table's rows (``0..rows - 1``), whatever the example held; validation
makes ids across that range (``capture.inputs``, values ``"range"``).
"""

from __future__ import annotations

from typing import Any

import torch

from onnxport.capture.captured import Captured

aten = torch.ops.aten

# ops that pass ids on unchanged in value: a view, a copy, a cast between integer dtypes
PASS = {aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.flatten.using_ints,
         aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default, aten.clone.default,
         aten.contiguous.default, aten.expand.default, aten.permute.default, aten.transpose.int, aten.t.default,
         aten.alias.default, aten.detach.default, aten.slice.Tensor, aten.select.int, aten._to_copy.default,
         aten.to.dtype, aten.to.dtype_layout}


def indexed_tables(captured: Captured) -> dict[str, int]:
    """``{input name: rows}`` for the integer user inputs the program uses (directly or through
    views and copies) as row indices of a table: ``embedding(weight, ids)``, ``index_select(weight,
    0, ids)``, ``weight[ids]``. An input indexing several tables gets the smallest."""
    out: dict[str, int] = {}
    for inp in captured.inputs:
        val = inp.value
        if not isinstance(val, torch.Tensor) or val.dtype.is_floating_point or val.dtype == torch.bool:
            continue
        rows = [r for r in (_rows(use) for use in _uses(inp.node)) if r is not None]
        if rows:
            out[inp.name] = min(rows)
    return out


def _uses(node: torch.fx.Node) -> list[tuple[torch.fx.Node, torch.fx.Node]]:
    """``(user, value)`` pairs: the nodes reading ``node``'s values, through ops that keep them."""
    out, todo, seen = [], [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for user in n.users:
            if user.op == "call_function" and user.target in PASS and user.args and user.args[0] is n:
                todo.append(user)
            else:
                out.append((user, n))
    return out


def _rows(use: tuple[torch.fx.Node, torch.fx.Node]) -> int | None:
    user, ids = use
    if user.op != "call_function":
        return None
    args = user.args
    if user.target == aten.embedding.default and len(args) >= 2 and args[1] is ids:
        return _size0(args[0])
    if user.target == aten.index_select.default and len(args) >= 3 and args[2] is ids and args[1] == 0:
        return _size0(args[0])
    if user.target == aten.index.Tensor and len(args) >= 2 and args[1] and args[1][0] is ids:
        return _size0(args[0])
    return None


def _size0(table: Any) -> int | None:
    val = table.meta.get("val") if isinstance(table, torch.fx.Node) else None
    if isinstance(val, torch.Tensor) and val.dim() >= 1 and isinstance(val.shape[0], int):
        return int(val.shape[0])
    return None
