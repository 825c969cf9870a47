"""Symbolic dimensions: SymInts as int64 values, each computed once, and dim names.

A SymInt in the FX graph (``x.shape[0]``, ``2 * x.shape[1] - 1``) becomes a 0-d int64 ONNX value.
Each sympy expression is computed once per graph: a second ``sym_size`` of the same symbol, from
any input that carries it, reuses the first value. Sizes taken from a ``Shape`` keep their 1-D
``[1]`` form next to the 0-d one so that shape lists concatenate without Unsqueeze chains.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import sympy

from onnxport.capture.captured import expr_of  # noqa: F401  (translations read it from here)

_INT64 = ir.DataType.INT64


def _typed(v: ir.Value, dims: list[int]) -> ir.Value:
    v.type = ir.TensorType(_INT64)
    v.shape = ir.Shape(dims)
    return v


def dim_of(ctx, x: ir.Value, axis: int) -> ir.Value:
    """0-d int64 size of ``x`` along ``axis`` (negative axes allowed)."""
    rank = ctx.rank(x)
    axis = axis % rank if rank else axis
    key = ("dim", x, axis)
    hit = ctx.sym_values.get(key)
    if hit is not None:
        return hit
    d = x.shape[axis] if x.shape is not None else None
    if isinstance(d, int):
        val = ctx.const(np.array(d, dtype=np.int64))
        ctx.sym_values[key] = val
        return val
    one_d = _typed(ctx.op.Shape(x, start=axis, end=axis + 1), [1])
    val = _typed(ctx.op.Squeeze(one_d, ctx.const(np.array([0], dtype=np.int64))), [])
    ctx.as_1d[val] = one_d
    ctx.sym_values[key] = val
    return val


def as_1d(ctx, v: ir.Value) -> ir.Value:
    """``[1]``-shaped form of a 0-d int64 value."""
    hit = ctx.as_1d.get(v)
    if hit is not None:
        return hit
    if v.const_value is not None:
        out = ctx.const(v.const_value.numpy().reshape(1).astype(np.int64))
    else:
        out = _typed(ctx.op.Unsqueeze(ctx.cast(v, _INT64), ctx.const(np.array([0], dtype=np.int64))), [1])
    ctx.as_1d[v] = out
    return out


def shape_list(ctx, items: Sequence[Any]) -> ir.Value:
    """1-D int64 value from ints and 0-d int64 values; runs of ints become one constant."""
    if isinstance(items, ir.Value):
        return items
    if all(isinstance(i, (int, np.integer)) for i in items):
        return ctx.const(np.array([int(i) for i in items], dtype=np.int64))
    parts: list[ir.Value] = []
    run: list[int] = []
    for item in items:
        if isinstance(item, (int, np.integer)):
            run.append(int(item))
            continue
        if run:
            parts.append(ctx.const(np.array(run, dtype=np.int64)))
            run = []
        if item.shape is not None and len(item.shape) == 1:
            parts.append(item)
        else:
            parts.append(as_1d(ctx, item))
    if run:
        parts.append(ctx.const(np.array(run, dtype=np.int64)))
    if len(parts) == 1:
        return parts[0]
    out = ctx.op.Concat(*parts, axis=0)
    n = sum(p.shape[0] if p.shape is not None and isinstance(p.shape[0], int) else 0 for p in parts)
    return _typed(out, [n]) if all(p.shape is not None and isinstance(p.shape[0], int) for p in parts) else out


def dim_names_for(symbol_names: dict[sympy.Symbol, str], expr: Any) -> str | int:
    """Render a dimension expression with the user's dim names: ``2*time``, ``time - 2``."""
    if isinstance(expr, (int, np.integer)):
        return int(expr)
    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, sympy.Symbol) and expr in symbol_names:
        return symbol_names[expr]
    subs = {s: sympy.Symbol(symbol_names[s], integer=True, positive=True)
            for s in expr.free_symbols if s in symbol_names}
    try:
        text = str(expr.xreplace(subs))
    except Exception:  # noqa: BLE001 - an exotic expression keeps torch's own symbol names
        text = str(expr)
    return text
