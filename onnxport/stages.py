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

from onnxport.errors import DataDependentError, ExportError, SpecializationError
from onnxport.options import ExportOptions
from onnxport.result import ExportResult


@dataclasses.dataclass
class Run:
    """What the pieces of one export share: timings reported through ``on_step``, the pieces left
    (``budget``), and the notices to give as warnings once the export is decided."""

    on_step: Callable[[str, float], None] | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    budget: list[int] = dataclasses.field(default_factory=lambda: [4])
    notices: list[str] = dataclasses.field(default_factory=list)

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
    result: ExportResult | None = None

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
    """``capture.capture`` of the model; after a failure on Python control flow (when the rewrite was
    neither asked nor refused), the rewritten model captured instead, with a notice naming what was
    rewritten. Raises the first failure, its fix saying the rewrite was tried, when that fails too."""
    from onnxport.capture import capture as capture_program
    from onnxport.capture.values import check_outputs
    from onnxport.translate.registry import Translations

    o = job.options
    job = job.but(translations=Translations(o.opset, o.registry))
    settings = dict(strict=o.strict, other_axes=o.other_axes, ops=job.translations, hooks=o.capture_hooks,
                    relations=o.relations, within=job.within)
    first = None
    try:
        captured = capture_program(job.model, job.args, job.kwargs, o.dynamic_shapes, rewritten=job.rewritten,
                                   **settings)
    except (SpecializationError, DataDependentError) as error:
        if o.rewrite_control_flow is not None or not isinstance(job.model, torch.nn.Module):
            raise
        first = error
    # the rewritten model is captured outside the handler: an exception raised while capturing it
    # would otherwise carry the first failure as its context, which classifying it reads
    if first is not None:
        model, notes, notice = _rewritten_after(first, job.model, job.args, job.kwargs)
        try:
            captured = capture_program(model, job.args, job.kwargs, o.dynamic_shapes, rewritten=True, **settings)
        except ExportError as again:  # the rewrite did not help: the first failure is the user's to fix
            raise _tried(first, f"the rewritten model failed too: {again.summary}") from None
        job.run.notices.append(notice)
        job = job.but(model=model, rewritten=True, rewrite_notes=tuple(notes))
    check_outputs(captured.program, job.module)
    return job.but(captured=captured)


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
    """The optimization passes (``optimize.pipeline``), in place on the model."""
    from onnxport.optimize.pipeline import optimize as run_passes

    run_passes(job.onnx, job.options.opset)
    return job


def finalize(job: Export) -> Export:
    """Names, opsets, the adopted constraints as metadata, the checker (``finalize``); the ``ExportResult``."""
    from onnxport.finalize import finalize as finalize_model

    finalize_model(job.onnx, inline=job.options.inline, constraints=[str(g) for g in job.captured.adopted()])
    module = job.module.module() if isinstance(job.module, torch.export.ExportedProgram) else job.module
    result = ExportResult(job.onnx, program=job.captured.program, module=module, example=(job.args, job.kwargs),
                          captured=job.captured, timings=job.run.timings,
                          dim_names=dict(job.onnx.meta.get("dim_names", {})), rewrite_notes=list(job.rewrite_notes),
                          weights=job.bound, decomposed={"local": list(job.decomposed.local),
                                                         "whole_program": list(job.decomposed.whole_program)})
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
    """The names ``on_step`` reports, in order: ``STAGES``, then the constraints stage's checks."""
    from onnxport.settle import STEPS as SETTLE_STEPS

    return tuple(s.name for s in STAGES) + SETTLE_STEPS


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
    its own by this function and the results joined (``onnxport.pieces``), while ``Run.budget`` lasts."""
    from onnxport.pieces import adopted_split, splittable
    from onnxport.settle import settle, size_one

    fallback = None
    try:
        job = run_stages(job)
    except SpecializationError as error:
        if not splittable(error) or not job.splits:
            raise
        return _in_pieces(job, error, None)
    cut = adopted_split(job.result, job.within) if job.within else None
    if cut is None:
        result, cut, fallback = size_one(job.result, job.splits, job.run)
        if cut is None:
            return settle(result, job.run)
    return _in_pieces(job, cut, fallback)


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


# ------------------------------------------------------------------------------ the rewrite retried
def _rewritten_after(error: ExportError, model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple:
    """``model`` with its Python loops and branches over sizes rewritten (``onnxport.rewrite``) after
    capture failed on one (``error``), the rewrite's notes, and the notice naming what was rewritten
    and where (given once the rewritten model captures). Raises ``error`` when the rewriter
    changes nothing or its copy differs from ``model``."""
    from onnxport.rewrite import rewrite_module

    try:
        new = rewrite_module(model, args, kwargs, warn=False)
    except ExportError as failed:
        raise _tried(error, failed.summary) from None
    notes = list(getattr(new, "onnxport_rewrite_notes", []))
    done = [n for n in notes if n.rewritten]
    if not done:
        left = next((n for n in notes if not n.rewritten), None)
        raise _tried(error, f"{left.construct} at {left.where}: {left.detail}" if left else "no loop or branch it "
                     "can rewrite") from None
    done.sort(key=lambda n: n.construct == "if")  # loops first: what capture failed on, most often
    shown = "; ".join(f"the {n.construct} at {n.where}" for n in done[:3])
    more = f" and {len(done) - 3} more (ExportResult.rewrite_notes)" if len(done) > 3 else ""
    notice = (f"capture failed on Python control flow ({str(error).splitlines()[0]}); onnxport rewrote {shown}{more}, "
              "and checked the rewritten model against yours in eager PyTorch; pass rewrite_control_flow=False to "
              "get the error instead")
    return new, notes, notice


def _tried(error: ExportError, why: str) -> ExportError:
    """``error`` with its fix no longer offering ``rewrite_control_flow=True`` (it was tried: ``why``)."""
    hint = re.sub(r"(,? or )?pass rewrite_control_flow=True to (to_onnx|export both sides as an ONNX If, or )", "",
                  error.hint or "").strip(" ;,")
    tried = f"onnxport's rewrite of Python control flow did not help ({why})"
    return error.with_hint(f"{hint}; {tried}" if hint else tried)
