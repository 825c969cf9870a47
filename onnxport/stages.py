"""The stages of one export, listed in order, each taking the export's data and handing it on.

``STAGES``: rewrite (``rewrite_control_flow=True``), capture (the model as given, then, after a failure on
Python control flow, the model with its loops and branches rewritten), decompose, translate, optimize,
finalize (the ``ExportResult`` is built there), then the constraints stage (``onnxport.settle``: size 1,
the model's own minimum, adopted constraints the ONNX model does not need). ``export`` runs them for one
range of sizes and, where the trace holds on one side of a branch on a size only, exports each side
on its own and joins them (``onnxport.pieces``): the same stages, once per interval.

Each stage is a function ``Export -> Export``; the ``Export`` is frozen (a stage hands on a new one).
What the whole export shares, however many pieces it has, is one ``Run``: the progress callback and
its timings, the pieces left, and the notices (warnings given once the export is decided).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from typing import Any, Callable, Iterator, Mapping

import torch

from onnxport.errors import CaptureTimeoutError, DataDependentError, ExportError, SpecializationError
from onnxport.options import ExportOptions
from onnxport.result import ExportResult


VALUE_SIDES = 2  # of the pieces ``Run.budget`` counts, a branch on a state's value (``_by_value``) makes its two sides


@dataclasses.dataclass
class Run:
    """What the pieces of one export share: timings reported through ``on_step``, the pieces left
    (``budget``), and the notices to give as warnings once the export is decided."""

    on_step: Callable[[str, float], None] | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    budget: list[int] = dataclasses.field(default_factory=lambda: [4])
    notices: list[str] = dataclasses.field(default_factory=list)
    sides: list[int] = dataclasses.field(default_factory=lambda: [3])  # other residue classes left to trace

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as the step ``name``, reporting it through ``on_step`` as it ends."""
        t0 = time.perf_counter()
        yield
        self.timings[name] = time.perf_counter() - t0
        if self.on_step is not None:
            self.on_step(name, self.timings[name])


@dataclasses.dataclass(frozen=True)
class Export:
    """One export (or one piece of it) as it goes through ``STAGES``: what it was asked, and what
    each stage made so far.

    ``model`` is the model the stages capture (the rewritten one after a rewrite), ``module`` the
    user's (eager PyTorch for validation); ``within``: dim name -> ``(min, max)``, the ranges of one
    piece (``capture.capture``); ``bound``: the checkpoint matched with a model on the meta device
    (``weights.bind``), or None.
    """

    options: ExportOptions
    run: Run
    model: Any
    module: Any
    args: tuple
    kwargs: dict
    bound: Any = None
    within: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    translations: Any = None
    rewrite_notes: tuple = ()
    rewritten: bool = False  # the model's loops and branches were rewritten (on request, or after a failure)
    captured: Any = None
    decomposed: Any = None
    onnx: Any = None  # the onnx_ir.Model from translate on
    optimization: Mapping[str, int] = dataclasses.field(default_factory=dict)  # nodes before and after optimize
    result: ExportResult | None = None
    # ``(args, kwargs)`` the result states as its example where the trace's are others: the user's, for a
    # trace at other sizes (``_either_side``); None: ``args, kwargs``
    example: tuple | None = None

    def but(self, **changes: Any) -> "Export":
        return dataclasses.replace(self, **changes)

    @property
    def splits(self) -> bool:
        """Whether a range may be cut into pieces: an eager model to run, not exported from its
        checkpoint, and control flow not left as written (``rewrite_control_flow=False``)."""
        return self.bound is None and isinstance(self.module, torch.nn.Module) and \
            self.options.rewrite_control_flow is not False

    def piece(self, args: tuple, kwargs: dict, within: Mapping[str, tuple]) -> "Export":
        """The export of one piece: the user's model at ``args, kwargs``, in the ranges ``within``."""
        return Export(self.options, self.run, self.module, self.module, args, kwargs, self.bound, dict(within))


# ------------------------------------------------------------------------------ the stages
def rewrite(job: Export) -> Export:
    """Python loops and branches over sizes rewritten into scan / while_loop / cond (``onnxport.rewrite``)."""
    from onnxport.rewrite import rewrite_module

    model = rewrite_module(job.model, job.args, job.kwargs)
    return job.but(model=model, rewritten=True, rewrite_notes=tuple(getattr(model, "onnxport_rewrite_notes", [])))


def capture(job: Export) -> Export:
    """``capture.capture`` of the model as given (``STRATEGIES[0]``); after a failure, the other capture
    strategies that answer it, in order (``retries``), the first that captures winning: how it captured
    on ``Captured.strategy`` (``_capture_with``), a notice saying what was done. Raises the first failure,
    its fix saying what was tried, when none captures."""
    from onnxport.capture.values import check_outputs
    from onnxport.translate.registry import Translations

    job = job.but(translations=Translations(job.options.opset, job.options.registry))
    first, tried = None, []
    try:
        captured = _capture_with(job, job.model, job.options.strict, job.rewritten)
    except ExportError as error:
        first = error
    if isinstance(first, CaptureTimeoutError):  # a fallback of the capture ran out of time: no other strategy
        raise first
    # each retry runs outside the handler: an exception raised while capturing again would otherwise carry
    # the first failure as its context, which classifying it reads
    if first is not None:
        for strategy in retries(job, first):
            try:
                model, notes, strict = strategy.prepare(job, first)
            except ExportError as cannot:
                tried.append((strategy, cannot.summary))
                continue
            try:
                captured = _capture_with(job, model, strict, job.rewritten or strategy.rewrites, strategy.remainders,
                                         fallback=True, enlarged_after=first)
            except CaptureTimeoutError as slow:
                raise slow.with_hint(f"the capture failed first ({first.summary}) and this strategy ({strategy.name}) "
                                     f"was tried after it: {slow.hint}") from None
            except ExportError as again:
                tried.append((strategy, f"the rewritten model failed too: {again.summary}" if strategy.rewrites
                               else again.summary))
                continue
            job.run.notices.append(strategy.notice(first, notes))
            job = job.but(model=model, rewritten=job.rewritten or strategy.rewrites,
                          rewrite_notes=tuple(notes) if strategy.rewrites else job.rewrite_notes)
            break
        else:
            raise _tried(first, tried) from first.__cause__
    check_outputs(captured.program, job.module)
    return job.but(captured=captured)


def _capture_with(job: Export, model: Any, strict: bool, rewritten: bool, remainders: bool = False,
                  fallback: bool = False, enlarged_after: Any = None) -> Any:
    """``capture.capture`` of ``model`` with the export's options, in ``strict`` mode or not, branches on
    remainders adopted on trial or not; its ``strategy`` says how: ``"non-strict"``, ``"strict"``,
    ``"rewritten"``, ``"rewritten, strict"``, ``"remainder adopted"``... A ``fallback`` capture (a strategy
    tried after a failure) or one piece of a range has every torch.export call bounded by
    ``options.fallback_seconds``, any other capture its retraces only. A capture of a module not yet
    rewritten, where a failure would be answered by rewriting its control flow (``rewrite_control_flow``
    None), adopts on trial at once a branch on a remainder that the rewrite would leave as Python
    (``capture.capture``'s ``rewrite_later``). ``enlarged_after``: a failed capture of the model
    that traced it at a larger example (``ExportError.traced_at``), where a strategy tried after it starts."""
    from onnxport.capture import capture as capture_program

    o = job.options
    later = not rewritten and o.rewrite_control_flow is None and isinstance(model, torch.nn.Module)
    captured = capture_program(model, job.args, job.kwargs, o.dynamic_shapes, rewritten=rewritten, strict=strict,
                               other_axes=o.other_axes, ops=job.translations, hooks=o.capture_hooks,
                               relations=o.relations, within=job.within, remainders=remainders,
                               fallback_seconds=o.fallback_seconds, fallback=fallback or bool(job.within),
                               rewrite_later=later, enlarged_after=enlarged_after)
    how = ", ".join(name for name, used in (("rewritten", rewritten), ("strict", strict),
                                            ("remainder adopted", remainders)) if used)
    return dataclasses.replace(captured, strategy=how or "non-strict")


@dataclasses.dataclass(frozen=True)
class Strategy:
    """One way to capture the model after the way before it failed: its name, whether it rewrites
    the model's Python control flow, and the failures it answers (``answers``)."""

    name: str
    rewrites: bool
    answers: tuple[type, ...]
    remainders: bool = False  # the model as given, a branch on a remainder of sizes adopted on trial

    def applies(self, job: Export, error: ExportError) -> bool:
        """Whether this strategy may capture what ``error`` refused: a module (not a program), control
        flow rewritten unless the user said (``rewrite_control_flow``), strict mode unless asked already,
        the weights are on the meta device (TorchDynamo fakes them there, away from the inputs) or
        ``error`` is a branch on a size (exported in pieces instead)."""
        if not isinstance(error, self.answers) or not isinstance(job.model, torch.nn.Module):
            return False
        if self.remainders:  # what the rewrite cannot carry as torch.cond (capture.steps.remainder_branch)
            from onnxport.capture.steps import remainder_branch

            return job.options.rewrite_control_flow is not False and remainder_branch(error)
        if self.rewrites:
            return job.options.rewrite_control_flow is None
        if job.options.strict or job.bound is not None:
            return False
        # a size the user's code made constant is the control-flow error rewrite_control_flow=False asks for,
        # and a branch on a size is exported in pieces (onnxport.pieces), each side as written, where strict
        # mode would keep one side of it as a constraint
        return isinstance(error, DataDependentError) or (
            job.options.rewrite_control_flow is not False and getattr(error, "branch", None) is None)

    def prepare(self, job: Export, error: ExportError) -> tuple[Any, list, bool]:
        """The model to capture, the rewrite's notes, and the mode (strict or not). Raises an
        ``ExportError`` saying why the strategy cannot capture (the rewrite changed nothing)."""
        if self.rewrites:
            model, notes = _rewritten_after(error, job.model, job.args, job.kwargs)
            return model, notes, job.options.strict
        return job.model, [], not self.remainders or job.options.strict

    def notice(self, error: ExportError, notes: list) -> str:
        """The warning saying how the model was captured after ``error``."""
        failed = str(error).splitlines()[0]
        if self.remainders:
            return (f"capture failed ({failed}); a branch on a remainder of sizes is no torch.cond onnxport's rewrite "
                    "can make: onnxport read its condition as one the model needs, adopted on trial (each residue "
                    "class it excludes exported too: dropped where the graphs are the same, joined under ONNX If "
                    "where they differ, else listed in result.constraints)")
        if self.rewrites:
            done = sorted((n for n in notes if n.rewritten), key=lambda n: n.construct == "if")  # loops first
            shown = "; ".join(f"the {n.construct} at {n.where}" for n in done[:3])
            more = f" and {len(done) - 3} more (ExportResult.rewrite_notes)" if len(done) > 3 else ""
            return (f"capture failed on Python control flow ({failed}); onnxport rewrote {shown}{more}, and checked "
                    "the rewritten model against yours in eager PyTorch; pass rewrite_control_flow=False to get the "
                    "error instead")
        return (f"capture failed ({failed}); onnxport captured the model with torch.export's strict mode "
                "(TorchDynamo) instead, and checked it as any capture (ExportResult.captured.strategy); pass "
                "strict=True to start there")


STRATEGIES = (  # after the model as given (non-strict, or strict=True), in the order retries() tries them
    Strategy("rewritten", rewrites=True, answers=(SpecializationError, DataDependentError)),
    Strategy("strict", rewrites=False, answers=(SpecializationError, DataDependentError)),
    Strategy("remainder adopted", rewrites=False, answers=(SpecializationError,), remainders=True),
)


def retries(job: Export, error: ExportError) -> list[Strategy]:
    """The strategies of ``STRATEGIES`` that answer ``error``, in order: a size read from the data
    (``DataDependentError``) tries strict mode first, where TorchDynamo keeps it symbolic; a branch or
    loop over a size tries the rewrite first."""
    applying = [s for s in STRATEGIES if s.applies(job, error)]
    if isinstance(error, DataDependentError):
        applying.sort(key=lambda s: s.rewrites)
    return applying


def decompose(job: Export) -> Export:
    """The ops without a translation decomposed (``capture.decompose``)."""
    from onnxport.capture import decompose as decompose_program

    decomposed = decompose_program(job.captured.program, job.translations, job.options.capture_hooks)
    captured = job.captured if decomposed.program is job.captured.program else \
        dataclasses.replace(job.captured, program=decomposed.program)
    return job.but(captured=captured, decomposed=decomposed)


def translate(job: Export) -> Export:
    """The program translated into an ``onnx_ir.Model`` (``translate.program.build_model``)."""
    from onnxport.translate.program import build_model

    o = job.options
    model = build_model(job.captured, opset=o.opset, registry=job.translations, input_names=o.input_names,
                        output_names_=o.output_names, output_dims=o.output_dims,
                        options={"inline": o.inline,
                                 "rewritten_loops": True if job.rewritten else o.rewrite_control_flow},
                        weights=job.bound)
    return job.but(onnx=model)


def optimize(job: Export) -> Export:
    """The optimization passes (``optimize.pipeline``), in place on the model; the nodes counted
    before and after (``ExportResult.optimization``)."""
    from onnxport.optimize.pipeline import node_count, optimize as run_passes

    before = node_count(job.onnx)
    run_passes(job.onnx, job.options.opset)
    return job.but(optimization={"nodes_before": before, "nodes_after": node_count(job.onnx)})


def finalize(job: Export) -> Export:
    """Names, opsets, the adopted constraints as metadata, the checker (``finalize``); the ``ExportResult``."""
    from onnxport.finalize import finalize as finalize_model

    finalize_model(job.onnx, inline=job.options.inline, constraints=[str(g) for g in job.captured.adopted()])
    module = job.module.module() if isinstance(job.module, torch.export.ExportedProgram) else job.module
    result = ExportResult(job.onnx, program=job.captured.program, module=module,
                          example=job.example or (job.args, job.kwargs), captured=job.captured, timings=job.run.timings,
                          dim_names=dict(job.onnx.meta.get("dim_names", {})), rewrite_notes=list(job.rewrite_notes),
                          weights=job.bound, decomposed={"local": list(job.decomposed.local),
                                                         "whole_program": list(job.decomposed.whole_program)},
                          optimization=job.optimization)
    return job.but(result=result)


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage: its name (the ``on_step`` name), its function, and when it runs (default: always)."""

    name: str
    run: Callable[[Export], Export]
    when: Callable[[Export], bool] | None = None


STAGES = (
    Stage("rewrite", rewrite, lambda job: bool(job.options.rewrite_control_flow) and
          isinstance(job.model, torch.nn.Module)),
    Stage("capture", capture),
    Stage("decompose", decompose),
    Stage("translate", translate),
    Stage("optimize", optimize, lambda job: job.options.optimize),
    Stage("finalize", finalize),
)


def step_names() -> tuple[str, ...]:
    """The names ``on_step`` reports, in order: ``STAGES``, the constraints stage's checks, then the
    runtime target's rewrite (``retarget``)."""
    from onnxport.settle import STEPS as SETTLE_STEPS

    return tuple(s.name for s in STAGES) + SETTLE_STEPS + (TARGET_STEP,)


def run_stages(job: Export, stages: tuple[Stage, ...] = STAGES) -> Export:
    """``stages`` in order, each timed under its name (``Run.step``)."""
    for stage in stages:
        if stage.when is None or stage.when(job):
            with job.run.step(stage.name):
                job = stage.run(job)
    return job


# ------------------------------------------------------------------------------ one range, or its pieces
def export(job: Export) -> ExportResult:
    """``STAGES`` then the constraints stage for ``job``'s range, as one result. Where capture refuses
    a branch on one size both sides of which eager PyTorch runs, or a piece adopts a condition on its
    dim whose other side eager runs (``pieces.adopted_split``), or the export differs from eager at a
    size 1 only torch.export's default minimum left out (``settle.size_one``), each side is exported on
    its own by this function and the results joined (``onnxport.pieces``), while ``Run.budget`` lasts.
    Where a branch on a remainder is kept as a constraint, its other side is traced too, and taken where
    it holds at every size (``_either_side``). Where capture refuses a branch on a state input's value
    (a counter, a flag) that no torch.cond holds, each side is exported on its own and the results
    joined under ``If`` on the condition (``_by_value``)."""
    from onnxport.pieces import adopted_split, splittable
    from onnxport.settle import settle, size_one
    from onnxport.value_sides import applies

    fallback = None
    try:
        job = run_stages(job)
    except SpecializationError as error:
        if not splittable(error) or not job.splits:
            raise
        return _in_pieces(job, error, None)
    except DataDependentError as error:
        if not (applies(error, job.args, job.kwargs) and job.splits) or job.run.budget[0] < VALUE_SIDES:
            raise
        return _by_value(job, error)
    cut = adopted_split(job.result, job.within) if job.within else None
    if cut is None:
        result, cut, fallback = size_one(job.result, job.splits, job.run)
        if cut is None:
            return _either_side(job, settle(result, job.run))
    return _in_pieces(job, cut, fallback)


def _either_side(job: Export, result: ExportResult) -> ExportResult:
    """``result``, or the result right on the residue classes the remainder constraints it adopts on trial exclude,
    and those an installed package's branch on a remainder it keeps excludes (``onnxport.remainder_sides``:
    each class exported, the graphs compared, joined under ``If`` where they differ; in a piece, the classes
    with sizes in its range), while ``Run.sides`` lasts: each other export the model as captured (its control
    flow rewritten where it was), the stages from capture on, size 1 and the constraints stage, its result
    stating the user's inputs as its example. The notices of traces not taken are dropped."""
    from onnxport.remainder_sides import either_side, sides_taken
    from onnxport.settle import settle, size_one

    said = list(job.run.notices)

    def export_at(args: tuple, kwargs: dict) -> ExportResult:
        other = Export(job.options, job.run, job.model, job.module, args, kwargs, job.bound, job.within,
                       rewritten=job.rewritten, rewrite_notes=job.rewrite_notes, example=(job.args, job.kwargs))
        other = run_stages(other, tuple(s for s in STAGES if s.name != "rewrite"))
        return settle(size_one(other.result, False, job.run)[0], job.run)

    taken = either_side(result, export_at, job.run.notices, job.run.sides)
    if not sides_taken(taken):  # the constraints stay: the other traces are not taken
        job.run.notices[:] = said
    return taken


def _in_pieces(job: Export, cut: SpecializationError, fallback: Callable | None) -> ExportResult:
    """Each interval of ``cut``'s dim exported by ``export`` and the results joined; ``fallback``
    (the result without the cut, size 1 adopted out of the range) where a piece fails."""
    from onnxport.pieces import export_in_pieces, joined, not_split, notice
    from onnxport.settle import settle

    try:
        pieces = export_in_pieces(cut, job.args, job.kwargs, job.within,
                                  lambda args, kwargs, within: export(job.piece(args, kwargs, within)), job.run.budget)
        result = joined(pieces)
    except (ExportError, ValueError) as e:  # ValueError: the sides' outputs cannot be one If's
        if fallback is not None:  # size 1 on its own did not export: it leaves the range
            return settle(fallback(e), job.run)
        if isinstance(e, ValueError):
            raise not_split(cut, str(e)) from None
        raise
    job.run.notices.append(notice(cut, pieces))
    return result


def _by_value(job: Export, error: DataDependentError) -> ExportResult:
    """Each side of a branch on a state's value exported by ``export`` and the results joined under
    ``If`` on the condition (``onnxport.value_sides``); the condition's program made by the stages
    up to finalize. Raises ``error``, its fix saying why, where the sides cannot be joined."""
    from onnxport.value_sides import export_by_value, joined, notice, refused

    job.run.budget[0] -= VALUE_SIDES - 1

    def condition_of(model: Any, args: tuple, kwargs: dict) -> ExportResult:
        options = dataclasses.replace(job.options, output_names=None)
        return run_stages(Export(options, job.run, model, model, args, kwargs, job.bound, dict(job.within))).result

    def export_side(model: Any, args: tuple, kwargs: dict) -> ExportResult:
        return export(Export(job.options, job.run, model, model, args, kwargs, job.bound, dict(job.within)))

    condition, sides = export_by_value(error, job.module, job.args, job.kwargs, condition_of, export_side)
    try:
        result = joined(job.module, condition, sides)
    except ValueError as e:  # the sides' outputs differ in structure, dtype or rank: no one If holds them
        raise refused(error, str(e)) from None
    job.run.notices.append(notice(sides))
    return result


# ------------------------------------------------------------------------------ the rewrite retried
def _rewritten_after(error: ExportError, model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple:
    """``model`` with its Python loops and branches over sizes rewritten (``onnxport.rewrite``) after
    capture failed on one (``error``), and the rewrite's notes. Raises an ``ExportError`` saying why
    when the rewriter changes nothing or its copy differs from ``model``."""
    from onnxport.rewrite import rewrite_module

    new = rewrite_module(model, args, kwargs, warn=False)
    notes = list(getattr(new, "onnxport_rewrite_notes", []))
    if not any(n.rewritten for n in notes):
        left = next((n for n in notes if not n.rewritten), None)
        raise ExportError(f"{left.construct} at {left.where}: {left.detail}" if left else
                          "no loop or branch it can rewrite")
    return new, notes


_TRIED = {"rewritten": "onnxport's rewrite of Python control flow did not help ({})",
          "strict": "capture in torch.export's strict mode (TorchDynamo) failed too ({})"}


def _tried(error: ExportError, tried: list[tuple[Strategy, str]]) -> ExportError:
    """``error`` with its fix saying what each strategy ``tried`` met, and no longer offering
    ``rewrite_control_flow=True`` where the rewrite was tried."""
    hint = error.hint or ""
    if any(s.rewrites for s, _ in tried):
        hint = re.sub(r"(,? or )?pass rewrite_control_flow=True to (to_onnx|export both sides as an ONNX If, or )",
                      "", hint).strip(" ;,")
    said = "; ".join(_TRIED[s.name].format(why) for s, why in tried)
    if not said:
        return error
    return error.with_hint(f"{hint}; {said}" if hint else said)


# ------------------------------------------------------------------------------ the runtime target
TARGET_STEP = "target"  # the on_step name of the target stage


def retarget(result: ExportResult, options: ExportOptions, run: Run) -> ExportResult:
    """``result`` rewritten for ``options.target`` (``onnxport.targets``; the default, onnxruntime,
    changes nothing), timed as the step ``"target"``: a new result whose model is the rewritten one,
    run in onnxruntime at the example (or ``Target.check_sizes``) against eager PyTorch (an eager
    module to run, not a model exported from its checkpoint; ``verify.rewritten``: a target of contrib
    kernels, ``Target.kernel_factor``, judged against the standard export's distance from float64 too).

    Raises:
        RuntimeTargetError: the target cannot hold the model (``targets.apply_target``), or the
            rewritten model differs from eager PyTorch at the example (an exporter bug).
    """
    if options.target == "onnxruntime" or result.model is None:
        return result
    from onnxport.errors import RuntimeTargetError
    from onnxport.targets import apply_target, target
    from onnxport.verify.rewritten import check_rewritten

    chosen = target(options.target)
    with run.step(TARGET_STEP):
        # a target judged against the standard export keeps it: its rewrites work on a copy (tensors shared)
        model = result.model.clone() if chosen.kernel_factor is not None else result.model
        if chosen.prepare is not None:  # genai-cpu: the rotary's cos/sin caches need the decoder's positions
            chosen.prepare(model, result.module)
        rewritten = result.replace(model=apply_target(model, options.target))
        if result.weights is None and isinstance(result.module, torch.nn.Module):
            sizes = chosen.check_sizes(rewritten.model) if chosen.check_sizes is not None else None
            report = check_rewritten(result, rewritten, sizes, chosen.kernel_factor)
            if not report.ok:
                raise RuntimeTargetError(f"the model rewritten for target {options.target!r} differs from eager "
                                         f"PyTorch at {'the example' if sizes is None else sizes}", detail=str(report),
                                         hint="this is an exporter bug: report it with the model; export with "
                                              "target='onnxruntime' meanwhile")
    return rewritten
