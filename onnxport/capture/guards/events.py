"""Guards met during capture, decided: the conditions torch.export deferred to run time, the ranges
it narrowed, and the range violations it raised for named dimensions.

``capture`` records ``GuardEvent``s while torch.export traces (``guards.record.RECORD_GUARDS``);
the functions here turn them into ``Guard`` decisions (see ``guards.conditions``):

* ``violation_ranges``: torch refused a declared range (``Not all values of time ... satisfy 4 <=
  time``): the range to retry torch with, and what onnxport promises in it (a condition the model
  needs, adopted; one of torch's 0/1 specializations, kept for validation to check); an error
  naming the user's branch or line when the dimension has an explicit range;
* ``decide_captured``: after capture, every range torch narrowed without saying (``Dim.DYNAMIC``,
  ``Dim.AUTO``) compared with the declared one, then every deferred condition decided over the
  sizes the export promises.

A condition torch met while computing strides or contiguity (``GuardEvent.layout``) picks a memory
layout, which ONNX tensors do not have: it is kept (validation looks on both sides of it), never
adopted as a constraint on the sizes.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import sympy
import torch

from onnxport.capture.guards import conditions as G
from onnxport.capture.guards.record import GuardEvent
from onnxport.capture.dynamic_shapes import DeclaredDim, int_oo_or_none
from onnxport.capture.relations import resolve, symbol
from onnxport.errors import CaptureError, DynamicShapesError, SpecializationError

_VIOLATION = re.compile(r"Not all values of (\w+) = (\S+) in the specified range")


@dataclasses.dataclass
class Narrowing:
    """How torch narrowed one dimension's range, split by why."""

    promised: tuple  # (lo, hi) the export holds for: declared, cut by the conditions the model needs
    torch: tuple  # (lo, hi) torch.export traced with
    guards: list  # the adopted range (if any) and the kept 0/1 specialization (if any)


def declared_var(d: DeclaredDim, symbol: Any, promised: dict[str, tuple]) -> G.SizeVar:
    """The ``SizeVar`` of the declared dim ``d`` (torch's ``symbol``), its range cut to what the export
    promises so far (``promised``: dim name -> ``(lo, hi)``)."""
    lo, hi = d.min, d.max
    if d.name in promised:
        p_lo, p_hi = promised[d.name]
        lo, hi = max(lo, p_lo or 0), p_hi if hi is None else (hi if p_hi is None else min(hi, p_hi))
    return G.SizeVar(symbol, d.name, lo, hi, adoptable=not d.ranged)


def size_vars(placeholders: list, names: list[str], declared: list[DeclaredDim],
              promised: dict[str, tuple]) -> dict[sympy.Symbol, G.SizeVar]:
    """torch's symbol -> the declared dimension it stands for (``promised``: ranges narrowed so far)."""
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
            out[expr] = declared_var(d, expr, promised)
    for d in declared:  # a derived Dim's root (``T`` of ``4*T``), unless declared itself
        node = by_input.get(d.input_name)
        val = node.meta.get("val") if node is not None else None
        if d.root is None or not isinstance(val, torch.Tensor) or d.axis >= val.dim():
            continue
        size = val.shape[d.axis]
        expr = size.node.expr if isinstance(size, torch.SymInt) else None
        if isinstance(expr, sympy.Expr) and len(expr.free_symbols) == 1:
            (sym,) = expr.free_symbols
            if sym not in out and d.root not in {v.name for v in out.values()}:
                root = DeclaredDim(d.input_name, d.axis, d.root, True, "dim", d.root_min, d.root_max)
                out[sym] = declared_var(root, sym, promised)
    return out


def _default_floor(event: GuardEvent) -> bool:
    """The event's lower bound is torch.export's default minimum of 2 for a backed size, not a
    condition of the model: its cause bounds the size from above only (``seq <= 512`` at
    ``position_ids[:, :seq]``). The sizes below stay promised; validation looks at 1."""
    cause = event.cause
    return (int(event.lower) <= 2 and cause is not None and event.symbol is not None
            and isinstance(cause, (sympy.LessThan, sympy.StrictLessThan)) and cause.lhs == event.symbol
            and not cause.rhs.free_symbols)


def narrowing(var: G.SizeVar, events: list[GuardEvent]) -> Narrowing:
    """Split the range ``events`` of one dimension: conditions the model needs (adopted, or refused
    for an explicit range) and torch's 0/1 specializations (kept: validation looks there).

    Raises:
        SpecializationError: the user's code branched on the size (names the ``if``).
        DynamicShapesError: the dimension has an explicit range a condition the model needs cuts.
    """
    def bounds(evs, floors=True):
        lower = max([int(e.lower) for e in evs if floors or not _default_floor(e)] + [var.lo])
        uppers = [u for u in (int_oo_or_none(e.upper) for e in evs) if u is not None] + \
            ([var.hi] if var.hi is not None else [])
        return lower, min(uppers) if uppers else None

    needed = [e for e in events if not e.layout and (e.cause is None or not G.compares_with_one(e.cause))]
    lo, hi = bounds(needed, floors=False)
    t_lo, t_hi = bounds(events)
    guards = []
    branch = next((e.branch for e in needed if e.branch), None)
    if lo > var.lo or (hi is not None and hi != var.hi):
        guard = G.range_guard(var, lo, hi, needed[-1].where if needed else None)
        if branch:
            raise _noting_read(G.branch_error(guard.text, guard.excluded, branch, guard.python, guard.names), events)
        far = next((e.far for e in needed if e.far is not None and e.far.text == guard.text), None)
        if not var.adoptable and far is None:
            raise G.range_error(guard.text, guard.excluded, guard.where, [var])
        guards.append(far.mark(guard) if far is not None else guard)
    if t_lo > lo or (t_hi is not None and t_hi != hi):
        kept = [e for e in events if e not in needed]
        guard = G.kept_range_guard(dataclasses.replace(var, symbol=events[0].symbol, lo=lo, hi=hi), t_lo, t_hi,
                                   kept[-1].cause if kept else None, kept[-1].where if kept else None)
        if t_lo == 2 > lo and (t_hi is None or t_hi == hi) and all(
                _default_floor(e) for e in events if int(e.lower) == 2):
            guard = dataclasses.replace(guard, method=G.DEFAULT_FLOOR, text=f"{var.name} >= 2",
                                        excluded=tuple({var.name: s} for s in range(max(1, lo), 2)))
        branch = next((e.branch for e in kept if e.branch), None)
        if branch and not G.in_installed_package(branch):
            raise _noting_read(G.branch_error(guard.text, guard.excluded, branch), events)
        guards.append(guard)
    return Narrowing((lo, hi), (t_lo, t_hi), guards)


def violation_ranges(text: str, events: list[GuardEvent], declared: list[DeclaredDim],
                     promised: dict[str, tuple]) -> dict[str, Narrowing]:
    """For each dimension torch says cannot take its declared range: how to retry (the range torch
    narrowed it to) and what the export promises (see ``narrowing``)."""
    out = {}
    for name, source in _VIOLATION.findall(text):
        dims = [d for d in declared if d.name == name]
        mine = [e for e in events if e.kind == "range" and source in e.sources]
        if not dims or not mine:
            continue
        if any(int_oo_or_none(e.upper) is not None and int(e.lower) >= int_oo_or_none(e.upper) for e in mine):
            continue  # pinned to one size: a specialization, reported as such
        out[name] = narrowing(declared_var(dims[0], None, promised), mine)
    return out


def decide_captured(program: torch.export.ExportedProgram, variables: dict[sympy.Symbol, G.SizeVar],
                    events: list[GuardEvent], traced: dict[str, tuple],
                    relations: dict[str, sympy.Expr] | None = None
                    ) -> tuple[list[G.Guard], dict[sympy.Symbol, G.SizeVar]]:
    """Decide every range torch narrowed beyond the declared one (``Dim.DYNAMIC``, ``Dim.AUTO``),
    then every condition it deferred while tracing, over the sizes the export promises
    (``traced``: dim name -> the range torch.export was given, where it differs from the declared one),
    each related dimension replaced by its expression (``relations``: dim name -> sympy expression
    over dim names, ``onnxport.capture.relations``).

    Returns the guards and the variables with their promised ranges. Raises
    ``SpecializationError`` (a branch of the user's code on a size; at a branch whose sides differ only
    by memory layout, a read of the layout after it named in its fix: ``capture.layout_reads``),
    ``DynamicShapesError`` (a condition cutting an explicit range) or ``CaptureError`` (a branch followed
    as layout-only whose copied tensor was changed in place after it).
    """
    _layout_branches_unchanged(events)
    try:
        return _decided(program, variables, events, traced, relations)
    except SpecializationError as error:
        raise _noting_read(error, events) from error.__cause__


def _noting_read(error: SpecializationError, events: list[GuardEvent]) -> SpecializationError:
    """``error``, a branch refused, with its fix naming the read of the memory layout that made the branch,
    whose sides differ only by layout, an ordinary one (``GuardEvent.read``), where one did."""
    read = next((e.read for e in events if e.read and e.where == error.where), None)
    if read is None:
        return error
    return error.with_hint(f"its sides differ only by memory layout, and the layout is read after it (at {read}): "
                           f"without that read the branch needs no guard; else {error.hint}")


def _decided(program: torch.export.ExportedProgram, variables: dict[sympy.Symbol, G.SizeVar],
             events: list[GuardEvent], traced: dict[str, tuple], relations: dict[str, sympy.Expr] | None
             ) -> tuple[list[G.Guard], dict[sympy.Symbol, G.SizeVar]]:
    guards: list[G.Guard] = []
    variables = dict(variables)
    for sym, var in list(variables.items()):
        vr = program.range_constraints.get(sym)
        if vr is None:
            continue
        lower, upper = int(vr.lower), int_oo_or_none(vr.upper)
        given_lo, given_hi = traced.get(var.name, (None, None))
        floor = max(var.lo, 2, given_lo or 0)
        ceiling = min([h for h in (var.hi, given_hi) if h is not None], default=None)
        if not (lower > floor or (upper is not None and (ceiling is None or upper < ceiling))):
            continue
        mine = [_from_replaced(e, events) for e in events if e.kind == "range" and e.symbol == sym]
        if not mine:
            mine = [GuardEvent("range", symbol=sym, lower=lower, upper=vr.upper)]
        n = narrowing(var, mine)
        guards += n.guards
        variables[sym] = dataclasses.replace(var, lo=n.promised[0], hi=n.promised[1])
    env = _shape_env(program)
    subs = relation_substitutions(variables, relations or {})
    conditions, origin = [], {}
    for e in events:
        if e.kind == "assert":
            expr = e.expr
            if env is not None:
                try:
                    expr = env.simplify(expr)
                except Exception:  # noqa: BLE001 - the expression as recorded is still right
                    pass
            if subs and isinstance(expr, sympy.Basic) and expr.free_symbols & subs.keys():
                expr = expr.xreplace(subs)
            conditions.append((expr, e.where, e.branch, e.layout, e.far, e.eager_runs, e.needed))
            origin.setdefault(expr, e)
    try:
        decided = guards + G.decide(conditions, variables)
    except DynamicShapesError as error:
        error.event = origin.get(getattr(error, "condition_expr", None))  # the event to probe in eager PyTorch
        raise
    return decided + floor_guards(events, variables, decided, relations or {}), variables


def _layout_branches_unchanged(events: list[GuardEvent]) -> None:
    """Each branch the trace followed with no guard as layout-only (``"layout"`` events,
    ``capture.layout_branches``), or ran one side of at every size though it copies
    (``rewrite.size_branches``), had nothing change the tensors its sides start from (and the copies)
    in place after it: the side making a copy would have kept that change from names bound before the
    branch. A side run at every size had no memory layout read after it either (``e.read``,
    ``capture.layout_reads``); a branch followed with no guard that had one was made an ordinary branch
    while tracing, its event's tensors dropped.

    Raises:
        CaptureError: one was changed in place, or a side run at every size was followed by a layout read,
            naming the branch's line.
    """
    from onnxport.capture.layout_branches import changed_in_place

    for e in events:
        if e.kind != "layout" or e.cause is None:
            continue
        if e.read is not None:
            raise CaptureError(
                "a branch on sizes whose sides compute the same values (a copy on one side: a clone, a contiguous, "
                f"a pad by 0) is run at every size by the control-flow rewrite, and the memory layout is read after "
                f"it (at {e.read}): what that read sees depends on the side eager PyTorch takes, beyond the values",
                where=e.where,
                hint="make the copy on both sides (or on neither), or compute without reading is_contiguous(), "
                     "stride() or data_ptr() of the result")
        if changed_in_place(e.cause):
            raise CaptureError(
                "a branch on sizes whose sides compute the same values (a copy on one side: a clone, a contiguous, "
                "a pad by 0) is followed by a change in place of the tensor it copies: the copy keeps the change "
                "from what was bound to that tensor before the branch on one side only, so the export cannot "
                "follow one side", where=e.where,
                hint="make the copy on both sides (or on neither), or write the change in place as an "
                     "out-of-place operation (x = x + 1 for x.add_(1))")
        e.cause = None  # checked: the tensors are not kept past the trace


def _from_replaced(event: GuardEvent, events: list[GuardEvent]) -> GuardEvent:
    """``event`` at the line of the narrowing it carries over: torch traces an input axis declared
    ``4*T`` as a symbol of its own and replaces it by ``4*T`` after tracing (``event.cause``
    ``Eq(s27, 4*s47)``), narrowing ``T``'s range then, at no line of the model; the axis's own last
    narrowing has the line."""
    cause = event.cause
    if not isinstance(cause, sympy.Eq) or not isinstance(cause.lhs, sympy.Symbol) or cause.lhs == event.symbol:
        return event
    before = [e for e in events if e.kind == "range" and e.symbol == cause.lhs and e.where]
    if not before:
        return event
    return dataclasses.replace(event, where=before[-1].where, branch=event.branch or before[-1].branch,
                               layout=before[-1].layout)


def floor_guards(events: list[GuardEvent], variables: dict[sympy.Symbol, G.SizeVar], decided: list[G.Guard],
                 relations: dict) -> list[G.Guard]:
    """A kept ``n >= 2`` (method ``DEFAULT_FLOOR``) for each dimension the export promises at size 1
    whose comparison with a number the user's code decided from torch.export's default minimum of 2
    alone (``"floor"`` events: ``if x.shape[1] == 1:``), at that line, unless ``decided`` has one:
    the export runs size 1 in onnxruntime against eager PyTorch (``verify.default_floor``)."""
    have = {g.text for g in decided if g.method == G.DEFAULT_FLOOR}
    out = []
    for e in events:
        var = variables.get(e.symbol) if e.kind == "floor" else None
        if var is None or var.lo > 1 or (var.hi is not None and var.hi < 2) or var.name in relations:
            continue
        text = f"{var.name} >= 2"
        if text not in have:
            have.add(text)
            out.append(G.Guard(text, G.GuardStatus.KEPT, e.where, ({var.name: 1},), ({var.name: 1}, {var.name: 2}),
                               G.DEFAULT_FLOOR, "True", ()))
    return out


def decide_program(program: torch.export.ExportedProgram, placeholders: list, names: list[str],
                   declared: list[DeclaredDim], events: list[GuardEvent], *, ranges: dict[str, tuple],
                   promised: dict[str, tuple], narrowed: dict[str, tuple], implied: dict[str, tuple],
                   relations: dict[str, sympy.Expr]) -> tuple[list[G.Guard], dict[sympy.Symbol, G.SizeVar]]:
    """The one decision once a program is captured: the ranges torch's suggested fixes gave a dim
    named without one (adopted as they are), the narrowings decided while retrying (``narrowed``),
    then every range torch narrowed and every condition it deferred (``decide_captured``).

    ``ranges``: dim name -> the range torch.export was given; ``promised``: the range the export
    holds for, where it differs; ``implied``: the ranges a relation gave (not adopted);
    ``relations``: dim name -> its expression over other dims.

    Returns the guards in order and torch's symbol -> ``SizeVar`` with its promised range.
    Raises ``SpecializationError`` or ``DynamicShapesError`` (see ``decide_captured``).
    """
    promised, narrowed = dict(promised), dict(narrowed)
    for name, r in ranges.items():  # ranges from torch's suggested fixes: adopted as they are
        if name not in narrowed and implied.get(name) != r:
            promised[name] = r
            narrowed[name] = (G.range_guard(G.SizeVar(None, name, 1, None, True), r[0] or 1, r[1], None),)
    variables = size_vars(placeholders, names, declared, promised)
    replaced, events = replaced_dims(placeholders, names, declared, variables, relations, promised), list(events)
    for sym, (var, expr) in replaced.items():
        variables[sym] = var
        events.append(GuardEvent("assert", expr=sympy.Eq(sym, expr), where=REPLACED))
    decided, variables = decide_captured(program, variables, events, dict(ranges), dict(relations))
    return [g for n in narrowed for g in narrowed[n]] + decided, variables


REPLACED = "torch.export's trace, which made this dim an expression of the others"  # where such an equality is


def replaced_dims(placeholders: list, names: list[str], declared: list[DeclaredDim],
                  variables: dict[sympy.Symbol, G.SizeVar], relations: dict,
                  promised: dict[str, tuple]) -> dict[sympy.Symbol, tuple[G.SizeVar, sympy.Expr]]:
    """Declared dims torch.export replaced by an expression of other declared dims (``chunk`` traced as
    ``16 - cache``, an equality torch took from the example) that no relation declares: a symbol of their
    own -> (its ``SizeVar``, the expression), so that the equality is decided as any condition the trace
    states (adopted with a warning and listed in ``result.constraints``, or refused for an explicit range),
    never a dim silently gone."""
    by_input = dict(zip(names, placeholders))
    out: dict[sympy.Symbol, tuple[G.SizeVar, sympy.Expr]] = {}
    named = {v.name for v in variables.values()}
    for d in declared:
        node = by_input.get(d.input_name)
        val = node.meta.get("val") if node is not None else None
        if d.name in relations or d.name in named or not d.name.isidentifier() or not isinstance(val, torch.Tensor) \
                or d.axis >= val.dim():  # a name that is not an identifier: a derived Dim (n + 1), declared so
            continue
        size = val.shape[d.axis]
        expr = size.node.expr if isinstance(size, torch.SymInt) else None
        if isinstance(expr, sympy.Expr) and not isinstance(expr, sympy.Symbol) and expr.free_symbols \
                and expr.free_symbols <= variables.keys():
            sym = sympy.Symbol(f"onnxport_replaced_{d.name}", integer=True, positive=True)
            out[sym] = (declared_var(d, sym, promised), expr)
            named.add(d.name)
    return out


def relation_substitutions(variables: dict[sympy.Symbol, G.SizeVar],
                           relations: dict[str, sympy.Expr]) -> dict[sympy.Symbol, sympy.Expr]:
    """torch's symbol of each related dimension -> its expression over torch's symbols of the others
    (relations whose dimensions all have a symbol)."""
    by_name = {v.name: s for s, v in variables.items()}
    out = {}
    for name, expr in resolve(relations, dict(relations)).items():
        names = {str(s) for s in expr.free_symbols}
        if name in by_name and names <= by_name.keys():
            out[by_name[name]] = expr.xreplace({symbol(n): by_name[n] for n in names})
    return out


def _shape_env(program):
    for node in program.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for size in val.shape:
                if isinstance(size, torch.SymInt):
                    return size.node.shape_env
    return None
