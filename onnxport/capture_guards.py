"""Guards met during capture, decided: the conditions torch.export deferred to run time, the ranges
it narrowed, and the range violations it raised for named dimensions.

``capture`` records ``GuardEvent``s while torch.export traces (``capture_patches.record_guards``);
the functions here turn them into ``guards.Guard`` decisions (see ``onnxport.guards``):

* ``violation_ranges``: torch refused a declared range (``Not all values of time ... satisfy 4 <=
  time``): the range the model needs, to retry with, for a dimension named without a range; an
  error naming the user's branch or line otherwise;
* ``decide_captured``: after capture, every deferred condition decided over the declared sizes, and
  every range torch narrowed without saying (``Dim.DYNAMIC`` / ``Dim.AUTO``) compared with the
  declared one.
"""

from __future__ import annotations

import re
from typing import Any

import sympy
import torch

from onnxport import guards as G
from onnxport.capture_patches import GuardEvent
from onnxport.dynamic_shapes import DeclaredDim, int_oo_or_none

_VIOLATION = re.compile(r"Not all values of (\w+) = (\S+) in the specified range")


def _declared_var(d: DeclaredDim, symbol: Any, ranges: dict[str, tuple]) -> G.SizeVar:
    lo, hi = d.min, d.max
    if d.name in ranges:
        r_lo, r_hi = ranges[d.name]
        lo, hi = max(lo, r_lo or 0), r_hi if hi is None else (hi if r_hi is None else min(hi, r_hi))
    return G.SizeVar(symbol, d.name, max(1, lo), hi, adoptable=not d.ranged)


def size_vars(program: torch.export.ExportedProgram, placeholders: list, names: list[str],
              declared: list[DeclaredDim], ranges: dict[str, tuple]) -> dict[sympy.Symbol, G.SizeVar]:
    """torch's symbol -> the declared dimension it stands for (``ranges``: ranges adopted so far)."""
    by_input = dict(zip(names, placeholders))
    out: dict[sympy.Symbol, G.SizeVar] = {}
    for d in declared:
        node = by_input.get(d.input_name)
        val = node.meta.get("val") if node is not None else None
        if not isinstance(val, torch.Tensor) or d.axis >= val.dim():
            continue
        size = val.shape[d.axis]
        expr = size.node.expr if isinstance(size, torch.SymInt) else None
        if isinstance(expr, sympy.Symbol) and expr not in out:
            out[expr] = _declared_var(d, expr, ranges)
    return out


def violation_ranges(text: str, events: list[GuardEvent], declared: list[DeclaredDim],
                     ranges: dict[str, tuple]) -> dict[str, tuple[tuple, G.Guard]]:
    """For each dimension torch says cannot take its declared range: the range it narrowed it to
    (``(lo, hi)``) with the adopted Guard, when the user named it without a range.

    Raises:
        SpecializationError: the user's code branched on the size (names the ``if``).
        DynamicShapesError: the dimension has an explicit range the model cannot take.
    """
    out = {}
    for name, source in _VIOLATION.findall(text):
        dims = [d for d in declared if d.name == name]
        narrowed = [e for e in events if e.kind == "range" and source in e.sources]
        if not dims or not narrowed:
            continue
        lower = max(int(e.lower) for e in narrowed)
        uppers = [int_oo_or_none(e.upper) for e in narrowed]
        upper = min((u for u in uppers if u is not None), default=None)
        if upper is not None and upper <= lower:
            continue  # pinned to one size: a specialization, reported as such
        var = _declared_var(dims[0], None, ranges)
        guard = G.range_guard(var, lower, upper, narrowed[-1].where)
        branch = next((e.branch for e in narrowed if e.branch), None)
        if branch:
            raise G.branch_error(guard.text, guard.excluded, branch)
        if not var.adoptable:
            raise G.range_error(guard.text, guard.excluded, guard.where, [var])
        out[name] = ((lower, upper), guard)
    return out


def decide_captured(program: torch.export.ExportedProgram, variables: dict[sympy.Symbol, G.SizeVar],
                    events: list[GuardEvent]) -> list[G.Guard]:
    """Decide every condition torch deferred while tracing, and every range it narrowed beyond the
    declared one (``Dim.DYNAMIC``, ``Dim.AUTO``), over the sizes in ``variables``.

    Raises ``SpecializationError`` (a branch of the user's code on a size) or ``DynamicShapesError``
    (a condition cutting an explicit range), via ``guards.decide``.
    """
    env = _shape_env(program)
    conditions = []
    for e in events:
        if e.kind == "assert":
            expr = e.expr
            if env is not None:
                try:
                    expr = env.simplify(expr)
                except Exception:  # noqa: BLE001 - the expression as recorded is still right
                    pass
            conditions.append((expr, e.where, e.branch))
    decided = G.decide(conditions, variables)
    return _narrowed(program, variables, events) + decided


def _narrowed(program, variables: dict, events: list[GuardEvent]) -> list[G.Guard]:
    out = []
    for symbol, var in variables.items():
        vr = program.range_constraints.get(symbol)
        if vr is None:
            continue
        lower, upper = int(vr.lower), int_oo_or_none(vr.upper)
        narrower = lower > max(var.lo, 2) or (upper is not None and (var.hi is None or upper < var.hi))
        if not narrower:
            continue
        mine = [e for e in events if e.kind == "range" and e.symbol == symbol]
        guard = G.range_guard(var, max(lower, var.lo), upper, mine[-1].where if mine else None)
        branch = next((e.branch for e in mine if e.branch), None)
        if branch:
            raise G.branch_error(guard.text, guard.excluded, branch)
        if not var.adoptable:
            raise G.range_error(guard.text, guard.excluded, guard.where, [var])
        out.append(guard)
    return out


def _shape_env(program):
    for node in program.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for size in val.shape:
                if isinstance(size, torch.SymInt):
                    return size.node.shape_env
    return None
