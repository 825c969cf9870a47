"""The constraints stage: the sizes capture left open, run in eager PyTorch and onnxruntime.

Capture decides every condition on sizes from torch.export's trace; three kinds of sizes it cannot
judge from the trace alone are judged here, by running the exported model:

* ``size_one``: size 1 of a dim that only torch.export's default minimum of 2 left out (a kept
  ``n >= 2``, ``verify.default_floor``): where onnxruntime differs from eager PyTorch there, size 1 is
  a piece of its own (``onnxport.pieces``), or, where it cannot be, ``n >= 2`` is adopted;
* the model's own minimum (``verify.model_minimum``): the smallest sizes a kept guard excludes that
  eager PyTorch itself refuses leave the range;
* adopted constraints the ONNX model does not need (``verify.unneeded_constraints``): kept instead;
  except a remainder constraint adopted on trial (``unneeded_constraints.on_trial``), which a few sizes
  can neither drop (the other sizes of their residue classes may differ) nor refuse (the other classes
  may export): it is not tried, and ``onnxport.remainder_sides`` judges it on every residue class by
  exporting them.

Each returns a new ``ExportResult`` (``ExportResult.replace``); what a user should read is appended to
the export's notices, and the constraints finally adopted are warned about once, by ``to_onnx``, from
``result.constraints``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from onnxport.errors import DynamicShapesError, SpecializationError
from onnxport.result import ExportResult

STEPS = ("check size 1", "check the smallest sizes", "check the sizes adopted constraints exclude")  # on_step names


def settle(result: ExportResult, run: Any) -> ExportResult:
    """``result`` after the model's own minimum and the unneeded constraints are judged (``run``:
    the export's ``stages.Run``, its steps timed and its notices appended to). Raises the trace's
    first failure where a constraint of a program traced at a larger example breaks the user's."""
    from onnxport.verify.model_minimum import low_runs
    from onnxport.verify.unneeded_constraints import candidates

    if not _eager(result):
        return result
    if low_runs(result.guards, _minimum(result)):
        with run.step(STEPS[1]):
            result = settle_minimum(result)
    tries = candidates(result.guards, result.rewrite_notes, _examples(result))
    if tries:
        with run.step(STEPS[2]):
            result = settle_unneeded(result, tries, run.notices)
    _hold_at_the_example(result)
    return result


def _eager(result: ExportResult) -> bool:
    """Whether there is an eager model to run: not one exported from its checkpoint, nor a program."""
    return result.weights is None and isinstance(result.module, torch.nn.Module)


# ------------------------------------------------------------------------------ size 1
def size_one(result: ExportResult, splits: bool, run: Any) -> tuple[ExportResult, SpecializationError | None, Any]:
    """``result`` run at size 1 of each dim whose comparison with a number torch.export decided from its
    default minimum of 2 alone (the kept ``n >= 2`` guards of ``verify.default_floor``), in onnxruntime
    against eager PyTorch (the step timed on ``run``): ``(result, None, None)`` where it matches there
    (each such guard marked checked) or where eager PyTorch refuses the made-up inputs there as at the
    example's sizes (marked ``default_floor.untested``: their values, not size 1, are refused); else, where
    ``splits``, the branch ``pieces.export_in_pieces`` cuts at 1 (``pieces.floor_branch``) and the fallback
    ``failed -> result`` taking ``n >= 2`` as a constraint should that fail; without ``splits``, the result
    with that constraint.

    Raises:
        DynamicShapesError: without ``splits``, for a dim whose explicit range holds 1.
    """
    from onnxport.pieces import floor_branch
    from onnxport.verify.default_floor import REFUSED_ALIKE, checked, floors, untested, wrong_below

    if not _eager(result) or not floors(result.guards):
        return result, None, None
    wrong, marked = {}, {}
    with run.step(STEPS[0]):
        for guard in floors(result.guards):
            why = wrong_below(result, guard)
            if why is None:
                marked[id(guard)] = checked(guard)
            elif why == REFUSED_ALIKE:
                marked[id(guard)] = untested(guard)
            else:
                wrong[id(guard)] = (guard, why)
    if marked:
        result = with_guards(result, [marked.get(id(g), g) for g in result.guards], record=False)
    if not wrong:
        return result, None, None

    def fallback(failed: BaseException | None = None) -> ExportResult:
        return _adopt_floors(result, wrong, failed)

    if not splits:
        return fallback(), None, None
    return result, floor_branch(result, next(iter(wrong.values()))[0]), fallback


def _adopt_floors(result: ExportResult, wrong: dict, failed: BaseException | None) -> ExportResult:
    """``result`` with ``n >= 2`` adopted for each kept guard of ``wrong`` (``id -> (guard, why)``: the
    export differs from eager PyTorch at size 1); ``failed``: why size 1 could not be exported on its
    own. Raises ``DynamicShapesError`` for a dim whose explicit range holds 1."""
    from onnxport.verify.default_floor import adopted

    explicit = {v.name for v in result.captured.variables.values() if not v.adoptable}
    why_failed = None if failed is None else (getattr(failed, "split_why", None) or getattr(failed, "summary", None)
                                              or str(failed).splitlines()[0])
    changed = {}
    for key, (guard, why) in wrong.items():
        new = adopted(guard, why)
        name = new.names[0] if new.names else ""
        if name in explicit:
            reason = "" if why_failed is None else f"; exporting size 1 on its own failed: {why_failed}"
            raise DynamicShapesError(
                f"the export is wrong at {name} = 1, which the declared range holds: torch.export traces sizes "
                f"from 2 on, and the model's code decides on {name} there ({why}){reason}", where=guard.where,
                hint=f"declare Dim({name!r}, min=2, ...) if size 1 never occurs, or export with an example of "
                     f"size 1 for {name!r} to get the size-1 side")
        changed[key] = new if why_failed is None else \
            dataclasses.replace(new, note=f"exporting size 1 on its own failed: {why_failed}")
    return with_guards(result, [changed.get(id(g), g) for g in result.guards])


# ------------------------------------------------------------------------------ the model's own minimum
def _minimum(result: ExportResult) -> dict[str, int]:
    """dim name -> the smallest size the export promises."""
    return {v.name: max(1, v.lo) for v in result.captured.variables.values()}


def settle_minimum(result: ExportResult) -> ExportResult:
    """``result``, or a new one where the smallest sizes a kept guard excludes, which eager PyTorch
    itself refuses, are out of the range (``verify.model_minimum``): ``n >= m`` adopted (``constraints``,
    metadata), the narrower ``n >= k`` it supersedes dropped.

    Raises:
        DynamicShapesError: for a dim whose explicit range starts below the model's own minimum.
    """
    from onnxport.verify.model_minimum import adopted_minimum, low_runs, smallest_taken, superseded

    changed = {}
    explicit = {v.name for v in result.captured.variables.values() if not v.adoptable}
    for guard, name, sizes in low_runs(result.guards, _minimum(result)):
        adopted = [g for g in result.guards if g.adopted]
        found = smallest_taken(result.module, result.captured, name, sizes[0],
                               lambda point: all(g.holds(point) for g in adopted))
        if found is None:
            continue
        smallest, error, start = found
        if name in explicit:
            raise DynamicShapesError(
                f"dimension {name!r} is declared from {sizes[0]}, but the model takes {smallest} and up only: eager "
                f"PyTorch raises below it ({error.split(': ', 1)[-1][:160]})", where=guard.where,
                hint=f"declare Dim({name!r}, min={smallest}, ...), or give {name!r} as a name without a range")
        new = adopted_minimum(guard, name, start, smallest, error)
        changed[id(guard)] = dataclasses.replace(new, note=new.method)
    if not changed:
        return result
    guards = [changed.get(id(g), g) for g in result.guards]
    adopted = [g for g in guards if g.adopted]
    return with_guards(result, [g for g in guards if not superseded(g, adopted)])


# ------------------------------------------------------------------------------ unneeded constraints
def settle_unneeded(result: ExportResult, tries: list, notices: list[str]) -> ExportResult:
    """``result``, or a new one where an adopted constraint the ONNX model does not need (it matches
    eager PyTorch at sizes the constraint excludes, ``verify.unneeded_constraints``) is kept instead,
    a notice saying so appended to ``notices``. ``tries``: ``(guard, sizes)`` of
    ``unneeded_constraints.candidates``. Each is tried with the candidates not yet judged kept too, so
    that two of them excluding each other's sizes (a remainder ``h % 2 == 1`` and a ratio of sizes broken
    at ``h = 2``) do not keep each other adopted; one the ONNX model differs at stays adopted. A remainder
    constraint adopted on trial (``unneeded_constraints.on_trial``) is not tried (set aside in the others'
    trials still): a few sizes say nothing of the rest of their residue classes, whether onnxruntime
    matches there or not, and ``remainder_sides.either_side`` judges it on every class, exporting the
    classes it excludes."""
    from onnxport.capture.guards.conditions import EAGER_RUNS
    from onnxport.verify.unneeded_constraints import kept, on_trial, right_at

    pending = {id(g): (g, sizes) for g, sizes in tries}
    for guard, sizes in tries:
        if on_trial(guard):  # judged on every residue class (remainder_sides), relaxed in the others' trials
            continue
        relaxed = {key: kept(g, s) for key, (g, s) in pending.items()}
        trial_guard = relaxed[id(guard)]
        trial = with_guards(result, [relaxed.get(id(g), g) for g in result.guards],
                            _lowered(result, [(g, s) for g, s in pending.values()]), record=False)
        shown = "; ".join(", ".join(f"{k}={v}" for k, v in s.items() if k in guard.names) for s in sizes[:6])
        del pending[id(guard)]
        right = right_at(trial, trial_guard)
        if right:
            result = with_guards(result, [trial_guard if g is guard else g for g in result.guards],
                                 _lowered(result, [(guard, sizes)]), record=False)
            notices.append(f"{guard.text} is not a constraint of the export after all: at {shown} onnxruntime "
                           f"matches eager PyTorch (the ONNX model computes those sizes alike)")
        elif guard.method == EAGER_RUNS:
            result = with_guards(result, [_differs(result, g, shown) if g is guard else g for g in result.guards],
                                 record=False)
    return with_guards(result, result.captured.guards)  # the metadata, once, for the guards decided


def _lowered(result: ExportResult, tries: list) -> dict:
    """The capture's variables, each dim's lower bound lowered to the smallest size ``tries`` (``(guard,
    sizes)``) try for it."""
    low: dict[str, int] = {}
    for guard, sizes in tries:
        for n in guard.names:
            low[n] = min([low.get(n, 1 << 62)] + [s[n] for s in sizes if n in s])
    return {s: dataclasses.replace(v, lo=min(v.lo, low[v.name])) if v.name in low else v
            for s, v in result.captured.variables.items()}


def _differs(result: ExportResult, guard, shown: str):
    """``guard`` (adopted on trial: eager PyTorch runs at sizes it excludes) where onnxruntime differs from
    eager PyTorch at ``shown``: adopted, saying so, for dims named without a range.

    Raises:
        DynamicShapesError: a dim it reads has an explicit range (``Dim(name, min=...)``), which the
            export cannot hold.
    """
    variables = [v for v in result.captured.variables.values() if v.name in guard.names]
    if not all(v.adoptable for v in variables):
        raise range_refusal(guard, variables, f": eager PyTorch runs at {shown}, where the ONNX model differs from it")
    return noted(guard, f"eager PyTorch runs at {shown}, where the ONNX model traced under it differs")


def range_refusal(guard, variables: list, why: str) -> DynamicShapesError:
    """The error of a constraint ``guard`` the export keeps adopted though ``variables`` (the dims it reads)
    include one of an explicit range, which it does not guarantee; ``why`` (from ": ...") says why it stays."""
    from onnxport.capture.guards.conditions import range_error

    error = range_error(guard.text, guard.excluded, guard.where, variables)
    declared = ", ".join(f"{v.name} in [{v.lo}, {v.hi if v.hi is not None else 'inf'}]" for v in variables)
    return DynamicShapesError(f"the ONNX model torch.export traced holds only where {guard.text}, which the "
                              f"declared range ({declared}) does not guarantee{why}", where=guard.where,
                              hint=error.hint)


def noted(guard, note: str):
    """``guard`` with ``note`` appended to its note."""
    return dataclasses.replace(guard, note=f"{guard.note}; {note}" if guard.note else note)


def _hold_at_the_example(result: ExportResult) -> None:
    """Raise the trace's first failure where the program traced at a larger example keeps a
    constraint the user's example breaks (Deformable DETR's feature-map sizes, constants of the
    larger trace): such an export would not hold at the example itself."""
    from onnxport.verify.unneeded_constraints import breaks_example

    captured = result.captured
    if captured.enlarged_from is not None and any(breaks_example(g, _examples(result)) for g in captured.adopted()):
        raise captured.enlarged_from


# ------------------------------------------------------------------------------ shared
def with_guards(result: ExportResult, guards: list, variables: dict | None = None, record: bool = True) -> ExportResult:
    """``result`` with the capture's ``guards`` (and ``variables``) replaced, the model's recorded
    constraints (metadata) the adopted ones among them (``record``; a trial leaves them)."""
    from onnxport.finalize import record_constraints

    captured = dataclasses.replace(result.captured, guards=guards,
                                   variables=result.captured.variables if variables is None else variables)
    if record:
        record_constraints(result.model, [str(g) for g in captured.adopted()])
    return result.replace(captured=captured, model=result.model)


def _examples(result: ExportResult) -> dict[str, int]:
    """dim name -> the example's size."""
    from onnxport.capture.inputs import dim_examples, dim_names

    return dim_examples(result.captured, dim_names(result.captured))[0]

