"""The capture steps, in the order ``capture()`` runs them (``STEPS``).

Each step takes the ``CaptureState`` and returns a new one, or a string saying why it does not
apply. ``capture()`` runs the list in order (``run_steps``); a step that asks for torch.export to
be called again (``state.retrace(...)``: a range, a relation, size-oblivious reasoning changed)
sends the loop back to ``Trace``. Each step run is recorded in ``Captured.attempts``.

- ``Fallback`` steps recover from a failed trace: each reads the failure and changes what
  torch.export is asked (at most ``MAX_TRACES`` calls in all).
- ``Decision`` steps run once a program is captured: specialization check, relations torch
  derived, the shape guards decided, size 1 probed in eager PyTorch.

A new fallback is one ``Fallback`` subclass with a ``retry(state)`` method, listed in ``STEPS``
where it should be tried; a patch it needs while torch traces is registered
(``capture.patches.register``) and added with ``state.retrace(why, patches=state.patches + (P,))``.
"""

from __future__ import annotations

import dataclasses
import re
import warnings

import sympy
import torch

from onnxport.capture.captured import Captured, user_placeholders
from onnxport.capture.classify import (classify, derived_dims, is_size_guard, required_ranges, source_matches,
                                       specialization_error, static_axes_of_size, top_level_name)
from onnxport.capture.guards import decide_program, violation_ranges
from onnxport.capture.guards.conditions import EAGER_RUNS, GuardStatus
from onnxport.capture.guards.events import declared_var
from onnxport.capture.guards.far_bounds import FarBound, far_bound, far_side
from onnxport.capture.guards.probe import REFUSES, eager_refusal_on, probe_size_one
from onnxport.capture.meta_weights import has_meta_weights
from onnxport.capture.refused_sides import EAGER_TRIES, eager_runs_at, other_side_refused, without_branch
from onnxport.capture.relations import candidates, symbol
from onnxport.capture.state import CaptureState, Traced
from onnxport.capture.symbolic_builtins import SYMBOLIC_BUILTINS, shadowed, shadows_for
from onnxport.capture.tracing import describe, failed, trace
from onnxport.errors import CaptureTimeoutError, DynamicShapesError, ExportError, SpecializationError
from onnxport.rewrite.left_branches import left_as_python

MAX_TRACES = 6  # torch.export calls in one capture, the first included


class Step:
    """One capture step: ``step(state) -> new state | why it does not apply``."""

    name = "step"

    def __call__(self, state: CaptureState) -> CaptureState | str:
        raise NotImplementedError


class Trace(Step):
    """The plain capture: torch.export with the state's ranges, relations and patches."""

    name = "trace"

    def __call__(self, state):
        if state.trace is not None:
            return "torch.export already ran for this state"
        traced = trace(state)
        if isinstance(traced.error, CaptureTimeoutError):  # a fallback out of time: the capture stops there
            done = state.after(self.name, state.but(describe(traced), trace=traced, traces=state.traces + 1))
            raise traced.error.with_attempts(done.attempts) from None
        return state.but(describe(traced), trace=traced, traces=state.traces + 1)


class Fallback(Step):
    """A step that recovers from a failed trace by changing what torch.export is asked."""

    def __call__(self, state):
        if not state.failed:
            return "the trace succeeded"
        if state.traces >= MAX_TRACES:
            return f"torch.export was called {MAX_TRACES} times"
        return self.retry(state)

    def retry(self, state: CaptureState) -> CaptureState | str:
        raise NotImplementedError


class Decision(Step):
    """A step that decides on a captured program."""

    def __call__(self, state):
        if state.program is None:
            return "no program was captured"
        return self.decide(state)

    def decide(self, state: CaptureState) -> CaptureState | str:
        raise NotImplementedError


# ------------------------------------------------------------------------------ after a trace
class DecideDeferredViolations(Step):
    """Decide the declared ranges torch found violated after tracing, keeping the traced program;
    a violation this cannot decide (or refuses: a branch on the size) becomes the trace's failure,
    for the fallbacks."""

    name = "decide the range violations found after tracing"

    def __call__(self, state):
        violation = state.trace.violation if state.trace is not None else None
        if violation is None:
            return "torch found no declared range violated after tracing"
        try:
            state, decided = _unless_eager_refuses(state, lambda s: _decide_violation(s, violation))
        except ExportError as refused:
            return state.but(f"refused: {refused.summary}", trace=failed(state, state.trace, refused))
        if decided is None:
            return state.but("undecided: " + describe_violation(violation),
                             trace=failed(state, state.trace, violation))
        return state.but(f"adopted the ranges of {', '.join(sorted(decided))}" if decided else
                         "left to the guards' decision: " + describe_violation(violation),
                         trace=_without_violation(state.trace), **_narrowed(state, decided))


class KeepSizesSymbolic(Fallback):
    """A declared size became a constant at a line calling ``len(`` / ``int(`` (``len(lengths)``), or a
    data-dependent size was needed as a Python number there (``int(lengths.max().item())``): retrace with
    that module's ``len`` / ``int`` returning the size as it is (``capture.symbolic_builtins``). Where
    the retrace fails too, its failure is the one the later steps answer and the error names: the
    ``len()`` / ``int()`` line no longer fixes the size."""

    name = "keep len() and int() of a size symbolic"

    def retry(self, state):
        done = shadowed(state.patches)
        new = tuple(pair for pair in shadows_for(state.trace) if pair not in done)
        if not new:
            return "no size was fixed by len() or int() in a module not yet given symbolic ones"
        said = ", ".join(f"{b}() in {m}" for m, b in new)
        return state.retrace(f"{said} symbolic", patches=state.patches + (SYMBOLIC_BUILTINS.using(new),))


class RelateDerivedDims(Fallback):
    """torch.export derives a relation between dims named without a range (``u = t + 1``): give it."""

    name = "relate dims torch derived"

    def retry(self, state):
        strings, related = state.request.strings, state.related
        found = {n: d for n, d in derived_dims(state.trace.text).items()
                 if n in strings and d[0] in strings and n not in state.derived and n not in related}
        if not found:
            return "torch derived no relation between dims named without a range"
        text = ", ".join(f"{n} = {k}*{b} + {c}" for n, (b, k, c) in found.items())
        return state.retrace(f"torch.export relates {text}", derived={**state.derived, **found})


class NarrowViolatedRanges(Fallback):
    """torch refused a declared range: decide each violation (adopt, keep, or refuse) and retrace
    with the range torch needs."""

    name = "decide range violations"

    def retry(self, state):
        if isinstance(state.trace.error, SpecializationError):
            return "the failure is a specialization"
        request = state.request
        needed = {n: v for n, v in violation_ranges(state.trace.text, state.trace.events, request.declared,
                                                    state.promised).items() if state.ranges.get(n) != v.torch}
        if not needed:
            return "no declared range violation to decide"
        return state.retrace(f"narrowed {', '.join(f'{n} to {v.torch}' for n, v in needed.items())}",
                             **_narrowed(state, needed))


class AdoptRequiredRanges(Fallback):
    """torch's suggested fixes give a range to a dim named without one (a conv stack needs
    ``time >= 7``): retrace with it (adopted as a constraint once captured)."""

    name = "adopt the ranges torch requires of unnamed-range dims"

    def retry(self, state):
        strings = state.request.strings
        suggested = {n: r for n, r in required_ranges(state.trace.text).items()
                     if n in strings and state.ranges.get(n) != r}
        if not suggested:
            return "torch suggests no range for a dim named without one"
        return state.retrace(f"ranges {suggested}", ranges={**state.ranges, **suggested},
                             first_failure=state.first_failure or state.trace)


class ReasonSizeObliviously(Fallback):
    """A failure about sizes being 0 or 1 (or a specialization): retrace reasoning size-obliviously
    (``backed_size_oblivious``), so torch does not specialize them."""

    name = "reason size-obliviously about 0/1"

    def retry(self, state):
        error = state.trace.error
        if state.oblivious:
            return "already reasoning size-obliviously"
        if not (is_size_guard(error) or isinstance(error, SpecializationError)):
            return "the failure is not about sizes 0 and 1"
        if _far_bound(state, error, adoptable=False) is not None:
            return "the refused branch's other side starts far above the example, not at sizes 0 and 1"
        if getattr(error, "layout_bound", False) and state.request.given is None:
            return "a size computed from the dim is 1 at the example: traced at a larger example first"
        return state.retrace("retrace with backed_size_oblivious", oblivious=True,
                             first_failure=state.first_failure or state.trace)


class TraceLargerExample(Fallback):
    """A size computed from a declared dim that is 1 at the example (a length padded to whole
    chunks of 256 that is one chunk): torch.export specializes it, so the model is traced again with
    that dim one above the largest chunk (modulus or divisor) its size expressions use, where the
    count is 2 (the example's inputs tiled along the dim's axes, ``Request.enlarged``). The user's
    example stays the example handed forward; a condition that trace adopts and the example breaks
    is then checked where it excludes (``verify.unneeded_constraints``)."""

    name = "trace at a larger example where a size computed from a dim is 1"

    def retry(self, state):
        found = getattr(state.trace.error, "computed_one", None) or _solver_specialized(state)
        if found is None:
            return "no size computed from a declared dim was 1 at the example"
        if state.request.given is not None:
            return "the example was already enlarged"
        d, example = found
        example = example if example is not None else state.request.example_size(d)
        if example is None:
            return f"the example's size of {d.name} is not known"
        chunks = [k for ev in state.trace.events for k in _chunks(getattr(ev, "expr", None)) if k > example]
        if chunks:
            size, why = max(chunks) + 1, f"whole chunks of {max(chunks)} are one"
        elif example >= 2:  # strides and divisors below the example took it down to 1: twice as large
            size, why = 2 * example, "a size computed through smaller strides is one"
        else:
            return f"no chunk larger than the example's {d.name} = {example} in the size expressions"
        top = state.request.within.get(d.name, (None, None))[1]
        if top is not None and size > top:
            return f"{d.name} = {size} is outside the piece's sizes (up to {top})"
        return state.retrace(f"traced at {d.name} = {size} (at {example}, {why})",
                             request=state.request.enlarged(d.name, size), oblivious=False,
                             first_failure=state.first_failure or state.trace)


def _solver_specialized(state) -> tuple | None:
    """``(dim, None)`` for the declared dim torch's solver of guards pinned
    (``Specializations unexpectedly required (seq)``) where no guard read says why: a count of
    chunks that is 1 at the example can show only there once a loop over it is a scan."""
    m = re.search(r"Specializations unexpectedly required \(([^)]*)\)", state.trace.text or "")
    names = {n.strip() for n in m.group(1).split(",")} if m else set()
    d = next((d for d in state.request.declared if d.name in names), None)
    return (d, None) if d is not None else None


def _chunks(expr) -> list[int]:
    """The integer moduli and divisors of sizes in ``expr`` (``Mod(seq, 256)``, ``seq // 256``)."""
    if not isinstance(expr, sympy.Basic):
        return []
    out = []
    for node in sympy.preorder_traversal(expr):
        name = type(node).__name__
        if name in ("Mod", "FloorDiv", "CeilDiv", "PythonMod") and len(node.args) == 2 \
                and node.args[0].free_symbols and getattr(node.args[1], "is_Integer", False):
            out.append(int(node.args[1]))
    return out


# ------------------------------------------------------------------------------ decisions
class CheckSpecialization(Decision):
    """Every axis declared dynamic stayed symbolic (else ``SpecializationError`` with the user's line)."""

    name = "check no declared dim was specialized"

    def decide(self, state):
        request = state.request
        by_name = dict(zip(request.names, user_placeholders(state.program)))
        for d in request.declared:
            node = by_name.get(d.input_name)
            val = node.meta.get("val") if node is not None and d.strict else None
            if isinstance(val, torch.Tensor) and isinstance(val.shape[d.axis], int):
                top = top_level_name(d, request.top)
                where = next((r.where for r in state.trace.records if source_matches(r.sources, d.input_name, d.axis,
                                                                                      top)), None)
                value = int(val.shape[d.axis])
                raise specialization_error(d, value, where, top,
                                           static_axes_of_size(value, request.top, request.declared, d))
        return state.but("every declared dim stayed symbolic")


class StaticAutoAxes(Decision):
    """A ``Dim.AUTO`` axis the model fixes to one size (torch traced it symbolic with a runtime
    assert ``s == 3``, its range pinned) is traced again static, as torch.export does with
    ``Dim.AUTO``: no constraint, the ONNX input keeps the size. So is one traced as the same size as
    an axis of another size in the example (an input of 1 row broadcast against the batch, traced
    size-obliviously because an example size is 1)."""

    name = "make static the Dim.AUTO axes the model fixes"

    def decide(self, state):
        request = state.request
        tops = {n for n, _ in request.top}
        by_name = dict(zip(request.names, user_placeholders(state.program)))
        pinned = []
        sizes = {}  # declared axis -> its traced size
        examples: dict = {}  # a size's expression -> the example sizes of the declared axes that have it
        for i, d in enumerate(request.declared):
            node = by_name.get(d.input_name)
            val = node.meta.get("val") if node is not None else None
            sizes[i] = val.shape[d.axis] if isinstance(val, torch.Tensor) and d.axis < val.dim() else None
            if isinstance(sizes[i], torch.SymInt):
                examples.setdefault(sizes[i].node.expr, set()).add(request.example_size(d))
        for i, d in enumerate(request.declared):
            if d.kind != "auto" or d.input_name not in tops:
                continue
            size = sizes[i]
            vr = state.program.range_constraints.get(size.node.expr) if isinstance(size, torch.SymInt) else None
            if vr is not None and vr.lower == vr.upper:
                pinned.append(d)
            elif isinstance(size, torch.SymInt) and len(examples.get(size.node.expr, ())) > 1:
                pinned.append(d)  # one size for axes of different sizes in the example: a broadcast axis of 1
        if not pinned:
            return "no Dim.AUTO axis was fixed"
        if state.traces >= MAX_TRACES:
            return f"torch.export was called {MAX_TRACES} times"
        static = request.static | {(d.input_name, d.axis) for d in pinned}
        declared = [d for d in request.declared if d not in pinned]
        return state.retrace(", ".join(f"{d.name} static" for d in pinned),
                             request=dataclasses.replace(request, static=frozenset(static), declared=declared))


class AdoptDerivedRelations(Decision):
    """The relations torch derived become the export's, with a warning saying how to state them."""

    name = "adopt the relations torch derived"

    def decide(self, state):
        if not state.derived:
            return "torch derived no relation"
        related = dict(state.related)
        for name, (base, k, c) in state.derived.items():
            related[name] = k * symbol(base) + c
            warnings.warn(f"torch.export relates {name} to {base}: {name} = {related[name]}; onnxport adopted this "
                          f"relation (the ONNX model names the axis {related[name]}); declare relations={{'{name}': "
                          f"'{related[name]}'}} to state it yourself", UserWarning, stacklevel=5)
        return state.but(", ".join(f"{n} = {related[n]}" for n in state.derived), related=related)


class DecideGuards(Decision):
    """Every condition on sizes the trace relies on, decided over the declared sizes
    (``guards.decide_program``): proved, kept, adopted, or refused with the user's line."""

    name = "decide the shape guards"

    def decide(self, state):
        request = state.request
        try:
            state, (guards, variables) = _unless_eager_refuses(state, lambda s: decide_program(
                s.program, user_placeholders(s.program), request.names, request.declared,
                list(s.trace.events), ranges=s.ranges, promised=s.promised, narrowed=s.narrowed,
                implied=s.implied, relations=s.related))
        except (SpecializationError, DynamicShapesError) as e:
            hint = _relation_hint(e, state)
            if hint is None:
                raise
            raise type(e)(e.what, where=e.where, hint=hint) from e
        counts = {s: sum(g.status == s for g in guards) for s in {g.status for g in guards}}
        return state.but(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no guard",
                         guards=tuple(guards), variables=variables)


class ProbeSizeOne(Decision):
    """The dims the export would promise from size 1 on, run at size 1 in eager PyTorch
    (``guards.probe``): a size PyTorch refuses is excluded (adopted ``>= 2``) or refused."""

    name = "probe size 1 in eager PyTorch"

    def decide(self, state):
        if has_meta_weights(state.request.model):
            return "not run: the model's weights are on the meta device (eager PyTorch cannot run it)"
        probed, variables = probe_size_one(state.request.model, captured_of(state))
        if not probed:
            return "eager PyTorch takes size 1 (or no dim starts at 1)"
        return state.but(", ".join(g.text for g in probed), guards=state.guards + tuple(probed), variables=variables)


class ProbeAdoptedInEager(Decision):
    """Each constraint the export would adopt, run in eager PyTorch at the first sizes it excludes
    (``refused_sides.eager_runs_at``): where eager runs there, the condition is torch.export's trace's, not
    the model's, and is adopted on trial only (``conditions.EAGER_RUNS``): after the export, onnxruntime is
    compared with eager PyTorch there (``settle``) and the constraint dropped where they match.

    Where eager refuses the first sizes (too small for the model's convolutions), it is run at the sizes the
    constraint excludes beside its boundary, on each side (``Guard.eager_runs``): a range torch read from the
    strides of a map that is 1 x 1 at the example (``image >= 42 and image <= 69`` of a vision tower whose
    stride-2 convolutions take a grid of 3 or 4 patches to one) excludes sizes eager PyTorch runs at both ends."""

    name = "probe adopted constraints in eager PyTorch"

    def decide(self, state):
        model, captured = state.request.model, None
        guards, tried = list(state.guards or ()), []
        for i, g in enumerate(guards):
            if g.status is not GuardStatus.ADOPTED or g.method == EAGER_RUNS or g.method.startswith(REFUSES) \
                    or g.note or not g.excluded:  # eager PyTorch already refused what it excludes (ProbeSizeOne)
                continue
            captured = captured or captured_of(state)
            runs = eager_runs_at(model, captured, g.excluded)
            if runs is not None:
                guards[i] = dataclasses.replace(g, method=EAGER_RUNS)
                tried.append(g.text)
                continue
            beside = tuple(b for b in g.boundary if not g.holds(b) and b not in g.excluded[:EAGER_TRIES])
            runs = eager_runs_at(model, captured, beside)
            if runs is not None:
                guards[i] = dataclasses.replace(g, method=EAGER_RUNS, eager_runs=runs)
                tried.append(g.text)
        if not tried:
            return "eager PyTorch refuses the sizes each adopted constraint excludes (or none was adopted)"
        return state.but("adopted on trial: " + ", ".join(tried), guards=tuple(guards))


class ObliviousForEqualities(Decision):
    """An adopted equality of sizes (not a remainder) can be torch's choice for a size computed from
    the declared ones that is 1 in the example (a feature map one row high, broadcast as such): the
    steps run again with size-oblivious reasoning, and that capture is taken when it adopts fewer
    constraints."""

    name = "capture size-obliviously where an equality of sizes was adopted"

    def decide(self, state):
        if state.oblivious:
            return "torch already reasons size-obliviously"
        adopted = [g for g in state.guards or () if g.adopted]
        if not any(g.python.count("==") == 1 and "%" not in g.text for g in adopted):
            return "no equality of sizes was adopted"
        if state.traces >= MAX_TRACES:
            return f"torch.export was called {MAX_TRACES} times"
        trial = _trial(state.retrace("size-oblivious", oblivious=True, guards=None, variables=None))
        if isinstance(trial, CaptureTimeoutError):
            return f"the size-oblivious capture ran out of time ({trial.summary}): the first one kept"
        if trial.program is None or trial.guards is None:
            return "the size-oblivious capture failed: the first one kept"
        fewer = sum(g.adopted for g in trial.guards)
        if fewer >= len(adopted):
            return f"the size-oblivious capture adopts {fewer} constraints, not fewer: the first one kept"
        return trial.but(f"size-oblivious: {fewer} constraints adopted instead of {len(adopted)}")


class LargerExampleForNarrowedRange(Decision):
    """An adopted range of one dim whose upper bound is at or above the example, below twice it: torch's choice
    for a size computed from the dim that is 1 at the example and kept so (Deformable DETR's smallest feature
    map, one by one at an image of 32, broadcast as such; a vision tower's last stride-2 map, 1 x 1 for a grid
    of 3 or 4 patches: ``image >= 42 and image <= 69`` at 64), where
    eager PyTorch runs the model at twice the example (a model's own limit, BERT's positions, is kept;
    ``guards.probe.eager_refusal_on`` asks, on a copy where the program writes into buffers).
    The steps run again with the model traced at twice the example's size of that dim
    (``Request.enlarged``, as ``TraceLargerExample`` does for a failure), and that capture is taken
    when it adopts fewer constraints, or as many with fewer bounding the dim above the example, none of
    them excluding the example (``torch.fft.rfft(x, n=12)`` pads below 12 and crops above: traced at twice
    the example it holds for ``time >= 13`` only, the model's own other side); the user's example stays the
    one handed forward."""

    name = "trace at a larger example where torch narrowed a range above it"

    def decide(self, state):
        request = state.request
        if request.given is not None:
            return "the example was already enlarged"
        adopted = [g for g in state.guards or () if g.adopted]
        examples = {d.name: request.example_size(d) for d in request.declared if request.example_size(d) is not None}
        for g in adopted:
            d = next((d for d in request.declared if len(g.names) == 1 and d.name == g.names[0]), None)
            example = examples.get(d.name) if d is not None else None
            if example is None or example < 2:
                continue
            above = [s[d.name] for s in g.excluded if d.name in s and s[d.name] > example]
            if not above or min(above) > 2 * example:
                continue
            if state.traces >= MAX_TRACES:
                return f"torch.export was called {MAX_TRACES} times"
            larger = request.enlarged(d.name, 2 * example)
            if has_meta_weights(request.model) or eager_refusal_on(
                    request.model, captured_of(state), larger.args, larger.kwargs) is not None:
                return f"eager PyTorch does not run the model at {d.name} = {2 * example}: the range kept"
            ranges = {k: v for k, v in state.ranges.items() if k != d.name}  # the narrowed range dropped
            if d.name in state.implied:
                ranges[d.name] = state.implied[d.name]
            promised = {k: v for k, v in state.promised.items() if k != d.name}  # as the range: dropped
            narrowed = {k: v for k, v in state.narrowed.items() if k != d.name}
            trial = _trial(state.retrace(f"traced at {d.name} = {2 * example} (a range narrowed above "
                                         f"{example})", request=larger, ranges=ranges, promised=promised,
                                         narrowed=narrowed, oblivious=False, guards=None, variables=None))
            if isinstance(trial, CaptureTimeoutError):
                return f"the capture at the larger example ran out of time ({trial.summary}): the first one kept"
            if trial.program is None or trial.guards is None:
                return "the capture at the larger example failed: the first one kept"
            fewer = sum(t.adopted for t in trial.guards)
            capped = _capped(adopted, d.name, example)
            if fewer > len(adopted) or (fewer == len(adopted) and _capped(trial.guards, d.name, example) >= capped):
                return f"the capture at the larger example adopts {fewer} constraints, not fewer: the first one kept"
            broken = [t.text for t in trial.guards if t.adopted and not t.holds(examples)]
            if broken:  # the other side of the model's own condition (rfft's n = 12: pad or crop)
                return f"the capture at the larger example adopts {', '.join(broken)}, which the example breaks: " \
                       "the first one kept"
            return trial.but(f"traced at {d.name} = {2 * example}: {fewer} constraints adopted instead of "
                             f"{len(adopted)}" + (f", none bounding {d.name} above" if fewer == len(adopted) else ""))
        return "no range torch narrowed ends at the example"


def _capped(guards, name: str, example: int) -> int:
    """How many of ``guards`` are adopted and exclude a size of dim ``name`` above ``example``."""
    return sum(g.adopted and any(s.get(name, 0) > example for s in g.excluded) for g in guards)


STEPS: tuple[Step, ...] = (
    Trace(),
    DecideDeferredViolations(),
    KeepSizesSymbolic(),
    RelateDerivedDims(),
    NarrowViolatedRanges(),
    AdoptRequiredRanges(),
    ReasonSizeObliviously(),
    TraceLargerExample(),
    CheckSpecialization(),
    StaticAutoAxes(),
    AdoptDerivedRelations(),
    DecideGuards(),
    ProbeSizeOne(),
    ObliviousForEqualities(),
    LargerExampleForNarrowedRange(),
    ProbeAdoptedInEager(),
)


def run_steps(state: CaptureState, steps: tuple = STEPS) -> CaptureState:
    """Run ``steps`` in order, from the first again whenever a step left torch.export to be called."""
    i = 0
    while i < len(steps):
        try:
            outcome = steps[i](state)
        except ExportError as refused:  # a later capture strategy starts at the larger example this one reached
            if not state.request.traced_at or refused.traced_at or isinstance(refused, CaptureTimeoutError):
                raise
            raise refused.with_traced_at(state.request.traced_at) from refused.__cause__
        state = state.after(steps[i].name, outcome)
        i = 0 if state.trace is None else i + 1
    return state


# ------------------------------------------------------------------------------ helpers
def _trial(state: CaptureState) -> CaptureState | CaptureTimeoutError:
    """``run_steps(state)`` for a decision's trial capture (the program captured already is kept where it
    fails): a trial stopped at its time bound (``capture.time_bound``) is such a failure, its error returned."""
    try:
        return run_steps(state)
    except CaptureTimeoutError as slow:
        return slow


def captured_of(state: CaptureState) -> Captured:
    """The ``Captured`` the state describes (its program, decisions and attempts)."""
    request = state.request
    enlarged_from = None  # what failed at the user's example, where the program was traced at a larger one
    if request.given is not None:
        enlarged_from = state.first_failure.error if state.first_failure else request.enlarged_after
    return Captured(state.program, request.names, request.declared, request.given or (request.args, request.kwargs),
                    list(state.guards or ()), dict(state.variables or {}), dict(state.related), state.attempts,
                    enlarged_from)


def _narrowed(state: CaptureState, decided: dict) -> dict:
    """The state's ``ranges``, ``promised`` and ``narrowed`` with the ``Narrowing``s ``decided``."""
    return {"ranges": {**state.ranges, **{n: v.torch for n, v in decided.items()}},
            "promised": {**state.promised, **{n: v.promised for n, v in decided.items()}},
            "narrowed": {**state.narrowed, **{n: tuple(v.guards) for n, v in decided.items()}}}


def _unless_eager_refuses(state: CaptureState, decide) -> tuple[CaptureState, object]:
    """``(state, decide(state))``; where ``decide`` refuses a branch on a size whose other side only
    sizes far above the example take (``guards.far_bounds``: the bound it sets adopted, said in its
    warning, no model run) or eager PyTorch refuses (``capture.refused_sides``), decided again with
    that branch read as a condition the model needs (the state's trace events changed accordingly). Where
    ``decide`` refuses a condition that cuts an explicit range and eager PyTorch runs at a size it excludes
    (``refused_sides.eager_runs_at``), decided again with that condition adopted on trial: the export is
    judged in onnxruntime there after it is built (``settle``), not refused on the trace's word. A branch on
    a remainder the rewrite left as Python (``_remainder_left``) is read as a condition the model needs too."""
    seen, probed = set(), []
    while True:
        try:
            return state, decide(state)
        except DynamicShapesError as error:
            event = getattr(error, "event", None)
            if not any(event is e for e in state.trace.events) or any(event is p for p in probed):
                raise  # a condition of no recorded event (a dim torch replaced), or one probed already
            probed.append(event)
            runs = eager_runs_at(state.request.model, captured_of(state), getattr(error, "excluded", ()))
            if runs is None:
                raise
            events = tuple(dataclasses.replace(e, eager_runs=runs) if e is event else e for e in state.trace.events)
            state = state.but(state.why, trace=dataclasses.replace(state.trace, events=events))
        except SpecializationError as error:
            branch = getattr(error, "branch", None)
            far = _far_bound(state, error) if branch is not None and branch not in seen else None
            left = far is None and branch is not None and branch not in seen and _remainder_left(state, error)
            needed = far is not None or left or (branch is not None and branch not in seen and other_side_refused(
                state.request.model, captured_of(state), error.excluded, branch) is not None)
            if not needed:
                error.captured = captured_of(state)  # the other side's inputs are made like its example
                raise
            seen.add(branch)
            # a remainder branch left is the model's condition, whichever side the example takes (a ``!=`` too)
            events = without_branch(state.trace.events, branch, far, needed=left)
            state = state.but(state.why, trace=dataclasses.replace(state.trace, events=events))


def remainder_branch(error: BaseException) -> bool:
    """``error`` refuses a branch of the model's code on a remainder of sizes (``if dim % 8 != 0:``)."""
    condition = getattr(error, "condition", None)
    return isinstance(error, SpecializationError) and condition is not None and "%" in condition[0]


def _remainder_left(state: CaptureState, error: SpecializationError) -> bool:
    """A branch on a remainder of sizes (``if dim % 8 != 0:``, diffusers' UNet forwarding its upsampling
    sizes) once the rewrite of the model's control flow was tried (``request.rewritten``: it left the
    branch as Python), had nothing to rewrite (``request.remainders``), or, where it runs after a failed
    capture (``request.rewrite_later``), would leave that branch and the constructs around it as Python
    (``rewrite.left_branches``: the rewritten model's capture would meet it again, so the model as given
    is captured once): it cannot be carried both ways
    as ``torch.cond`` (it sets a flag read far after it, leaves a loop, or is an expression), nor cut
    into intervals (its value changes every few sizes). It is read as a condition the model needs,
    adopted on trial where eager PyTorch runs the other side (``ProbeAdoptedInEager``): after the
    export, onnxruntime is compared with eager PyTorch at the sizes it excludes (``settle``), and the
    constraint dropped where the traced side is right there too (both sides compute the same), stated
    where it is not."""
    if not remainder_branch(error):
        return False
    request = state.request
    return bool(request.rewritten or request.remainders) or (
        request.rewrite_later and left_as_python(getattr(error, "branch", None)))


def _far_bound(state: CaptureState, error: ExportError, adoptable: bool = True) -> FarBound | None:
    """The bound a refused branch sets where only sizes far above the example take its other side
    (``guards.far_bounds``): where it may be adopted (``far_bound``), or whatever the dim's declared
    maximum (``adoptable=False``: ``far_side``); None for another failure."""
    condition, branch = getattr(error, "condition", None), getattr(error, "branch", None)
    d = next((d for d in state.request.declared if condition and d.name in condition[1]), None)
    if d is None or branch is None:
        return None
    decide = far_bound if adoptable else far_side
    return decide(condition, branch, declared_var(d, None, state.promised), state.request.example_size(d))


def _decide_violation(state: CaptureState, violation: Exception) -> dict | None:
    """The ``Narrowing`` of every dim a deferred violation names, or None when one is undecided."""
    request, traced = state.request, state.trace
    pinned = classify(violation, request.declared, traced.records, request.top, traced.events)
    if isinstance(pinned, SpecializationError):
        return {} if _solver_only(state, violation, pinned) else None
    decided = violation_ranges(str(violation), traced.events, request.declared, state.promised)
    named = {n for n, _ in re.findall(r"Not all values of (\w+) = (\S+) in the specified range", str(violation))}
    return decided if decided and not named - set(decided) else None


def _solver_only(state: CaptureState, violation: Exception, pinned: SpecializationError) -> bool:
    """torch's ``Specializations unexpectedly required`` where only its solver of guards found one
    size (it reads ``Eq((seq + pad) // ((seq + pad) // 64), 64)``, true at every size, as having
    one solution: qwen3_next's chunks traced at 65): the example was already enlarged past the
    chunks (``TraceLargerExample``), the program keeps every declared dim symbolic and no range was
    pinned while tracing. The guards are then decided exactly like any other (``DecideGuards``):
    a condition excluding sizes is adopted and stated, or checked in eager and dropped."""
    if "Specializations unexpectedly required" not in str(violation) or state.request.given is None:
        return False
    if any(ev.kind == "range" and ev.upper == ev.lower for ev in state.trace.events) or state.trace.records:
        return False
    by_name = dict(zip(state.request.names, user_placeholders(state.program)))
    for d in state.request.declared:
        val = by_name[d.input_name].meta.get("val") if d.input_name in by_name else None
        if isinstance(val, torch.Tensor) and isinstance(val.shape[d.axis], int):
            return False
    return True


def _without_violation(traced: Traced) -> Traced:
    return dataclasses.replace(traced, violation=None)


def describe_violation(violation: Exception) -> str:
    first = str(violation).strip().splitlines()
    return first[0][:160] if first else type(violation).__name__


def _relation_hint(error, state: CaptureState) -> str | None:
    """The error's hint with the relations the example's sizes satisfy among the dims the failed
    condition reads (``total = past + seq``): sizes related that way may be what the model needs."""
    request = state.request
    example = {d.name: request.example_size(d) for d in request.declared if request.example_size(d) is not None}
    named = set(re.findall(r"\w+", error.what))
    found = [(n, e) for n, e in candidates(example)
             if n not in state.related and {n, *re.findall(r"[A-Za-z_]\w*", e)} <= named]
    if not found:
        return None
    name, expr = found[0]
    also = "".join(f" or {n} = {e}" for n, e in found[1:3])
    return (f"the example has {name} = {expr}{also}: if the model needs that, declare it with "
            f'relations={{"{name}": "{expr}"}} (to_onnx) or {name} = "{expr}" in a config\'s [dims]; otherwise '
            + (error.hint or ""))


def implied_ranges(state: CaptureState) -> dict[str, tuple]:
    """The range torch.export is given for a related dim: the least value of its expression at the
    sizes torch traces its terms with (2 and up, or the declared minimum), for expressions that grow
    with every term (``past + seq`` -> 4). torch would otherwise narrow the range itself while
    tracing (a mask ``total`` at least ``past + seq``) and report it as a violation; the range
    onnxport promises for the dim stays what its relation gives."""
    by_name = {d.name: d for d in state.request.declared}
    out = {}
    for name, expr in state.related.items():
        poly = sympy.Poly(expr, *expr.free_symbols) if expr.free_symbols else None
        if poly is None or any(c < 0 for c in poly.coeffs()) or name not in by_name:
            continue
        lows = {s: max(2, by_name[str(s)].min) if str(s) in by_name else 2 for s in expr.free_symbols}
        out[name] = (int(expr.xreplace(lows)), by_name[name].max)
    return out
