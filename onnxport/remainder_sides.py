"""A branch on a remainder of sizes, each residue class exported where the example's trace does not hold.

diffusers' UNet reads ``for dim in sample.shape[-2:]: if dim % default_overall_up_factor != 0:
forward_upsample_size = True; break``: where a latent size is not a multiple, the upsampling is asked
for the skip's size; where it is, a scale of 2 gives that same size. Capture adopts such a branch's
condition on trial (``capture.steps.remainder_branch``), on the side the example takes. A few sizes the
condition excludes where onnxruntime matches eager PyTorch say nothing of the others (the other side
may differ at ``w >= 40`` only), so the constraints stage does not drop it on that trial
(``settle.settle_unneeded``): it is dropped, or the export made to hold beyond it, here, on evidence
that holds at every size.

An installed package's branch on a remainder whose example side torch records as its kind of condition
(``if w % 4 == 1:`` traced at ``w = 16`` leaves ``w % 4 != 1``, which the capture keeps: ``Guard.branched``)
is the model's branch all the same, whose other side may compute anything: its residue classes are
traced too (``unsettled``), and where they cannot be, it is adopted and stated as a constraint.

``either_side(result, export_at, notices, budget)``: for the remainder constraints ``result`` adopts on trial
(``flipped``) and the package's branches it keeps (``unsettled``), the residue classes of their dims
(``residues.residues_of``: the sizes modulo the least common multiple of their divisors) they leave out are
each exported (``export_at``, at the first sizes above the example in a class no export covers yet, the
classes where the most of them are false first), each export covering the classes where its own remainder
constraints hold. Each export's graph is right on the classes it covers. Then:

* every export's graph the same as the example's (``same_graph``): that one graph is right on every
  class; the constraints are dropped (kept: ``SAME``), with a notice;
* otherwise the graphs that are the same are taken once, and joined under ONNX ``If`` on the residue
  classes each covers (``residues.condition_model``, ``join_pieces.join_on``), the example's first;
  the constraints are dropped (kept: ``JOINED``), with a notice;
* where that cannot be done (a divisor is not a number, an export fails or is refused, one adopts
  other constraints than the example's besides its remainder ones, the exports left, ``budget``, run
  out, the sides' outputs cannot be one ``If``'s), the constraints stay adopted and stated, or, for a
  dim with an explicit range, the export is refused (``DynamicShapesError``).

In a piece (a range cut by ``onnxport.pieces``), only the classes with sizes in its range are exported.

Each export's ``example`` is the user's inputs, as the first export's (``export_at`` builds it so).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from onnxport.capture.guards.conditions import Guard, GuardStatus

SAME = "traced on each residue class it excludes, the ONNX graph is the same: it holds on every class"
JOINED = "each residue class exported on its own, the exports joined under ONNX If on the class"


def flipped(result: Any) -> list[Guard]:
    """The remainder constraints (``h % 2 == 0``) ``result`` adopts on trial (``EAGER_RUNS``: eager PyTorch
    runs beyond them). A remainder constraint is one whose condition takes a remainder of sizes
    (``Guard.remainder``: a ``Mod`` in torch's expression)."""
    from onnxport.verify.unneeded_constraints import on_trial

    return [g for g in result.constraints if on_trial(g)]


def unsettled(result: Any) -> list[Guard]:
    """The remainder conditions ``result`` keeps where an installed package's ``if`` branched on them
    (``w % 4 != 1``, ``(w // 4) * 4 != w``; ``Guard.branched``, holding on whole residue classes:
    ``residues.on_classes``): torch's kind of condition, so the sizes they exclude stay in the
    export's range, but the branch is the model's, whose other side may compute anything. Their residue
    classes are traced as the flipped constraints' are; where that cannot be done they are adopted and
    stated as constraints (refused for an explicit range). So is such a condition on a remainder by
    another size or a bitwise mask of one (``w % h != 1``, ``(w & h) != 1``), whose classes cannot be
    listed: it is stated."""
    from onnxport.residues import divisors, on_classes, reads_remainder

    return [g for g in result.guards if g.status is GuardStatus.KEPT and g.branched
            and g.method not in (SAME, JOINED)
            and (on_classes(g) or (reads_remainder(g) and divisors(g) is None))]


def either_side(result: Any, export_at: Callable[[tuple, dict], Any], notices: list[str],
                budget: list[int]) -> Any:
    """``result``, or a result right on the residue classes its flipped remainder constraints exclude
    too (see the module's docstring). ``export_at(args, kwargs)`` exports the model traced at other
    inputs (the same stages and constraints stage), its result's ``example`` the user's inputs;
    ``budget[0]``: the exports left, decremented by each.

    Raises:
        DynamicShapesError: the constraints cannot be dropped and one reads a dim with an explicit
            range (``Dim(name, min=...)``), which the export cannot hold.
    """
    from onnxport.capture.inputs import dim_examples, dim_names, inputs_like_example
    from onnxport.residues import residues_of

    guards, kept = flipped(result), unsettled(result)
    if not guards and not kept:
        return result
    examples = dict(dim_examples(result.captured, dim_names(result.captured))[0])
    related = set(result.captured.relations or ())
    lows = {v.name: v.lo for v in result.captured.variables.values()}
    highs = {v.name: v.hi for v in result.captured.variables.values() if v.hi is not None}  # a piece's range
    others = [g for g in result.constraints if g not in guards]
    exports = [(result, guards + kept)]  # each export and its own remainder conditions, the example's first
    tried: list[dict] = []  # the sizes of each other export
    while True:
        residues = residues_of([g for _, own in exports for g in own], examples, lows)
        if residues is None or any(d in related for d in residues.dims):
            return _stated(result, guards, kept, "its residue classes cannot be listed (a divisor other than a "
                                                 "number, a dim related to others, more classes than the export "
                                                 "takes, or a condition that does not hold alike on a class)")
        covers = [(export, residues.where(own)) for export, own in exports]
        covered = frozenset().union(*(c for _, c in covers))
        left = [c for c in residues.classes() if c not in covered and _within(residues.sizes(c, start=residues.low),
                                                                              highs)]
        if not left:
            break
        if budget[0] < 1:
            return _stated(result, guards, kept, "the exports of the other residue classes ran out")
        target = min(left, key=lambda c: sum(g.holds(residues.sizes(c)) for g in guards + kept))
        first = residues.sizes(target)
        sizes = {**examples, **(first if _within(first, highs) else residues.sizes(target, start=residues.low))}
        tried.append(sizes)
        at = ", ".join(f"{d}={sizes[d]}" for d in residues.dims)
        budget[0] -= 1
        try:
            args, kwargs = inputs_like_example(result.captured, dim_names(result.captured), sizes, seed=0)
            other = export_at(args, kwargs)
        except Exception as failed:  # noqa: BLE001 - any failure of another trace leaves the example's export
            why = getattr(failed, "summary", None) or (str(failed).splitlines() or [""])[0]
            return _stated(result, guards, kept, f"the export at {at} failed: {type(failed).__name__}: {why[:200]}")
        own = flipped(other) + unsettled(other)
        extra = [g for g in other.constraints if g not in own and all(g.text != o.text for o in others)]
        if extra:
            said = ", ".join(str(g) for g in extra)
            return _stated(result, guards, kept, f"the export at {at} adopts other constraints ({said})")
        if not all(g.holds(sizes) for g in own):
            return _stated(result, guards, kept, f"the export at {at} does not hold there")
        exports.append((other, own))
    shown = "; ".join(", ".join(f"{d}={s[d]}" for d in residues.dims) for s in tried)
    return _taken(result, guards, kept, residues, covers, shown, notices)


def _taken(result: Any, trial: list[Guard], kept: list[Guard], residues: Any, covers: list, shown: str,
           notices: list[str]) -> Any:
    """``result`` made right on every class of ``residues``: ``covers`` (``(export, classes)``, the
    example's first) as one graph where they are the same, else joined under ``If`` on the classes; its
    remainder constraints on ``trial`` and package conditions ``kept`` dropped (``_stated`` where it cannot)."""
    from onnxport.join_pieces import join_on, joined_model
    from onnxport.residues import condition_model
    from onnxport.same_graph import same_graph
    from onnxport.settle import with_guards

    guards = trial + kept
    groups: list[tuple[Any, set]] = []  # (export, classes it is taken on), each graph once
    for export, cover in covers:
        proto = export.model_proto
        group = next((g for g in groups if same_graph(g[0].model_proto, proto)), None)
        taken = cover - set().union(*(c for _, c in groups))
        if group is None:
            groups.append((export, set(taken)))
        else:
            group[1].update(taken)
    text = " and ".join(g.text for g in guards)
    if len(groups) == 1:
        notices.append(f"{text} (at {guards[0].where}) is not a constraint of the export: traced at {shown}, on "
                       f"the residue classes it excludes, the ONNX graph is the same as at the example, so it holds "
                       f"on every class")
        return with_guards(result, [_kept(g, SAME) if g in guards else g for g in result.guards])
    base = result.model_proto
    joined = groups[-1][0].model_proto
    try:
        for export, classes in reversed(groups[:-1]):
            condition = condition_model(residues, frozenset(classes), base)
            if condition is None:
                return _stated(result, trial, kept, "a dim it reads is not an input axis of the ONNX model")
            joined = join_on(condition, export.model_proto, joined)
    except ValueError as e:  # the sides' outputs differ in dtype or rank: no one If holds them
        return _stated(result, trial, kept, f"the exports of its residue classes cannot be joined: {e}")
    model = joined_model(joined, result.dim_names)
    notices.append(f"the trace at the example holds only where {text} (at {guards[0].where}); traced at {shown}, "
                   f"on the residue classes it excludes, the ONNX graphs differ: onnxport exported "
                   f"{len(groups)} graphs and joined them under ONNX If on the sizes' remainders modulo "
                   f"{residues.period}, each taken on the classes its trace holds on")
    return with_guards(result.replace(model=model), [_kept(g, JOINED) if g in guards else g for g in result.guards])


def _kept(guard: Guard, method: str) -> Guard:
    return dataclasses.replace(guard, status=GuardStatus.KEPT, method=method)


def _within(sizes: dict[str, int], highs: dict[str, int]) -> bool:
    """Whether ``sizes`` are at most the range's maxima ``highs`` (a piece's, ``capture.capture``'s ``within``):
    a residue class with no size in the range needs no export."""
    return all(s <= highs.get(d, s) for d, s in sizes.items())


def _stated(result: Any, guards: list[Guard], kept: list[Guard], why: str) -> Any:
    """``result``, its remainder constraints ``guards`` stated (``why`` they are not dropped, in their
    note), its conditions ``kept`` from a package's branch adopted as constraints too: the example's trace
    holds on their classes only, and the other classes could not be exported. Raises
    ``DynamicShapesError`` where one reads a dim with an explicit range."""
    from onnxport.settle import noted, range_refusal, with_guards

    every = guards + kept
    variables = [v for v in result.captured.variables.values() if any(v.name in g.names for g in every)]
    if not all(v.adoptable for v in variables):
        raise range_refusal(every[0], variables, f", and it cannot be exported on the other residue classes: {why}")
    return with_guards(result, [noted(g, f"not dropped: {why}") if g in guards else
                                noted(dataclasses.replace(g, status=GuardStatus.ADOPTED),
                                      f"an installed package's branch; not dropped: {why}") if g in kept else g
                                for g in result.guards])


def sides_taken(result: Any) -> bool:
    """Whether ``either_side`` took other residue classes' traces for ``result`` (its remainder conditions
    dropped: the same graph on every class, or the classes joined under If)."""
    return any(g.method in (SAME, JOINED) for g in result.guards)
