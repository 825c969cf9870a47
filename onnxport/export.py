"""``to_onnx``: rewrite (on request) -> capture -> decompose -> translate -> optimize -> finalize,
each step handing its result to the next, and nothing else."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
import warnings
from typing import Any, Callable, Iterator

import torch

from onnxport.errors import DataDependentError, DynamicShapesError, ExportError, SpecializationError
from onnxport.pieces import MAX_PIECES
from onnxport.result import ExportResult
from onnxport.translate.registry import Registry

MIN_OPSET = 18
MAX_OPSET = 23  # the newest opset whose operators onnxport emits and tests
STEPS = ("rewrite", "capture", "decompose", "translate", "optimize", "finalize", "check size 1")

StepCallback = Callable[[str, float], None]  # (step name, seconds), called as each step ends


def to_onnx(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: Any = (),
    kwargs: dict | None = None,
    *,
    dynamic_shapes: Any = None,
    input_names: list[str] | None = None,
    output_names: list[str] | None = None,
    output_dims: dict[str, dict[int, str]] | None = None,
    opset: int = 20,
    optimize: bool = True,
    inline: bool = False,
    strict: bool = False,
    verbose: bool = False,
    rewrite_control_flow: bool | None = None,
    other_axes: str = "static",
    relations: dict[str, str] | None = None,
    on_step: StepCallback | None = None,
    capture_hooks: Callable[[], contextlib.AbstractContextManager] | None = None,
    registry: Registry | None = None,
    weights: Any = None,
    cast_weights: bool = False,
) -> ExportResult:
    """Export a PyTorch model to ONNX, keeping dynamic dimensions symbolic under the user's names.

    Args:
        model: a ``torch.nn.Module`` (put in eval mode by the caller) or a
            ``torch.export.ExportedProgram``.
        args: example positional inputs: tensors, Python scalars, nested tuples/lists/dicts.
        kwargs: example keyword inputs.
        dynamic_shapes: as ``torch.export.export`` takes it (``Dim`` objects, dicts, tuples/lists,
            ``Dim.AUTO``/``Dim.DYNAMIC``), plus plain strings as dimension names
            (``{"x": {0: "batch", 2: "time"}}``). A name used twice is the same dimension.
        input_names, output_names: names of the flat tensor inputs/outputs of the ONNX model.
            Default: forward() parameter names (``x``, nested ``batch_ids``) and ``output``,
            ``output_0``..., dict keys or attribute names of the returned structure.
        opset: ONNX default-domain opset (18 or newer; default 20).
        optimize: run the optimization pipeline (constant folding, CSE, dead code...).
        inline: inline control-flow bodies instead of calling local functions.
        strict: capture with torch.export's strict (TorchDynamo) mode.
        verbose: print one progress line per step with its duration (``on_step`` prints them).
        rewrite_control_flow: rewrite Python loops/branches over dynamic sizes into
            scan/cond/while_loop before capture (``True``), never (``False``: a loop over a
            dynamic size is a ``SpecializationError``), or, by default (``None``), only after
            capture fails on one (``SpecializationError``, ``DataDependentError``), with a
            warning naming each construct rewritten and its line. A branch on a size that neither
            capture nor the rewrite can keep, both sides of which eager PyTorch runs, is exported
            in pieces (each side on its own, joined by ONNX ``If`` on the size:
            ``onnxport.pieces``, ``ExportResult.pieces``) unless this is ``False``.
        other_axes: ``"static"`` (default, torch.export's rule: an axis ``dynamic_shapes`` does not
            name keeps the example's size) or ``"auto"`` (such axes are ``Dim.AUTO``: dynamic where
            the model allows it, named ``<input>_dim<axis>``, static where it does not).
        relations: dimension name -> an expression over other dimension names, for sizes the model
            needs related in a way ``dynamic_shapes`` cannot say: ``{"total": "past + seq"}`` for an
            attention mask covering the cached and the new steps. Shape guards are decided with the
            relation substituted, ``validate()`` generates only sizes satisfying it. Relations
            torch.export derives itself (an axis of size ``2*time``) need no statement.
        on_step: called ``(step, seconds)`` as each step ends (``STEPS``: rewrite, capture,
            decompose, translate, optimize, finalize, and "check size 1" where a size only
            torch.export's default minimum left out is run in onnxruntime against eager).
        capture_hooks: ``() -> context manager`` entered while torch.export traces the model (each
            trace, and the whole-program decomposition, which traces the program again), after
            onnxport's own patches: patches a model's framework needs during tracing only
            (``onnxport.integrations.returnn.capture_hooks``), undone on exit.
        registry: the user translations to use (``onnxport.Registry``); default: the one
            ``@onnxport.translates`` registers into. They win over the built-in translations.
        weights: the checkpoint holding the model's values, for a model built without them
            (parameters on the meta device: ``onnxport.weights.empty_weights()`` or
            ``torch.device("meta")``): a safetensors file, a sharded checkpoint's
            ``*.safetensors.index.json`` (or its folder), a ``torch.save`` state dict (read with
            ``weights_only=True, mmap=True``), or a list of such files. Matched with the model's
            parameters and buffers by qualified name before capture; the model is traced with fake
            tensors and every initializer the checkpoint holds is read from it, one tensor at a
            time, when the result is saved (``onnxport.weights``). Buffers the checkpoint lacks
            are taken from the model when it computed them.
        cast_weights: cast checkpoint tensors of another floating dtype to the model's dtype as
            they are written (default: a dtype mismatch is an error).

    Returns:
        ``ExportResult`` with ``.model`` (onnx_ir.Model), ``.model_proto``, ``.save()``, ``.validate()``.

    Raises:
        DynamicShapesError, SpecializationError, CaptureError, UnsupportedOpError,
        TranslationError, ControlFlowError, CheckpointError (all ``onnxport.ExportError``).
        ``CheckpointError`` names every parameter or buffer missing from ``weights``, unexpected
        in it, of another shape or dtype, and a model on the meta device given no ``weights``.
        ``CaptureError`` also for a model on the meta device with ``strict=True``, for an example
        input torch.export cannot take (named) and for a ``forward`` returning a
        string or only ``None`` (with its ``return`` line); Python numbers it returns become scalar
        outputs.

    Threads: torch.export is not thread-safe and capture patches torch for the process, so one
    export runs at a time (``onnxport.capture.patches.CAPTURE_LOCK``); an export started in another
    thread waits for it. Every patch is registered in ``onnxport.capture.patches`` and undone after
    the trace; one left by an interrupted export is undone when the next one starts.

    ``result.captured.attempts`` lists the capture steps as they ran (``onnxport export --debug``
    prints them).

    Every condition on sizes the trace relies on is decided over the declared sizes (see
    ``onnxport.capture.guards``): proved ones are dropped, torch's 0/1 specializations kept
    (validation looks there), conditions a dimension named without a range needs are adopted with a
    warning (``result.constraints``), and conditions cutting an explicit ``Dim`` range are refused.

    Semantics: torch.export (https://pytorch.org/docs/stable/export.html) for capture; each ATen
    overload translated per the ONNX operator specs of the target opset.
    """
    from onnxport.capture.patches import exclusive_capture, restore_leftovers
    from onnxport.capture.values import check_inputs

    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ExportError(f"opset {opset} is not supported",
                          hint=f"use an opset from {MIN_OPSET} to {MAX_OPSET} (default 20)")
    timings: dict[str, float] = {}
    report = on_step if on_step is not None else (print_step if verbose else None)

    @contextlib.contextmanager
    def step(name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        timings[name] = time.perf_counter() - t0
        if report is not None:
            report(name, timings[name])

    if isinstance(model, torch.export.ExportedProgram) and not args and not kwargs and model.example_inputs:
        args, kwargs = model.example_inputs
    args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
    kwargs = dict(kwargs or {})
    if isinstance(model, torch.nn.Module):
        check_inputs(model, args, kwargs)
    bound = _bind_weights(model, weights, cast_weights, strict)
    # the warnings of the export are given once it is decided: an adopted constraint a later check
    # replaced or dropped (torch's "time >= 3" where the model needs 7) is not warned about
    result, recorded = None, []
    try:
        with warnings.catch_warnings(record=True) as held:
            try:
                # torch.export is not thread-safe and the capture patches change torch for the whole process:
                # one export at a time; another thread's export waits here
                with exclusive_capture():
                    restore_leftovers()
                    def run(args: tuple, kwargs: dict, within: dict) -> ExportResult:
                        return _pipeline(model, args, kwargs, dynamic_shapes, input_names, output_names, opset,
                                         optimize, inline, strict, rewrite_control_flow, other_axes, relations,
                                         capture_hooks, registry, step, timings, bound, output_dims, within)

                    notices: list[str] = []
                    result = _in_pieces(run, model, args, kwargs, {}, bound, rewrite_control_flow, [MAX_PIECES],
                                        notices, step)
                    for text in notices:
                        warnings.warn(text, UserWarning, stacklevel=2)
                result = _settle(result, step)
            finally:
                recorded = list(held)
    finally:
        _warn_again(recorded, result)
    return result


def _in_pieces(run: Callable, model: Any, args: tuple, kwargs: dict, within: dict, bound: Any,
               rewrite_control_flow: bool | None, budget: list[int], notices: list[str], step) -> ExportResult:
    """``run(args, kwargs, within)`` (``within``: the piece's ranges, ``capture.capture``); where it
    refuses a branch on one size both sides of which eager PyTorch runs, each side exported on its
    own and joined (``onnxport.pieces``), a piece that branches again cut again while ``budget``
    (pieces left) lasts; the notice of each split is appended to ``notices``; within a piece, a
    condition on its dim adopted where eager PyTorch runs the other side cuts it too
    (``pieces.adopted_split``), and so does size 1 of a dim where the export, which torch.export
    traced from its default minimum of 2, differs from eager PyTorch (``_size_one``). Not with
    ``rewrite_control_flow=False`` (the branch is refused; a size 1 that differs is adopted out of the
    range), nor for a model exported from its checkpoint or given as an ``ExportedProgram``."""
    from onnxport.pieces import adopted_split, export_in_pieces, joined, not_split, notice, splittable

    splits = bound is None and isinstance(model, torch.nn.Module) and rewrite_control_flow is not False
    fallback = None
    try:
        result = run(args, kwargs, within)
    except SpecializationError as error:
        if not splittable(error) or not splits:
            raise
        first = error
    else:
        first = adopted_split(result, within) if within else None
        if first is None:
            result, first, fallback = _size_one(result, splits, step)
            if first is None:
                return result
    try:
        pieces = export_in_pieces(first, args, kwargs, within,
                                  lambda a, k, w: _in_pieces(run, model, a, k, w, bound, rewrite_control_flow,
                                                             budget, notices, step), budget)
        result = joined(pieces)
    except (ExportError, ValueError) as e:  # ValueError: the sides' outputs cannot be one If's
        if fallback is not None:  # size 1 on its own did not export: it leaves the range, as before
            return fallback(e)
        if isinstance(e, ValueError):
            raise not_split(first, str(e)) from None
        raise
    notices.append(notice(first, pieces))
    return result


def _size_one(result: ExportResult, splits: bool, step) -> tuple[ExportResult, SpecializationError | None, Any]:
    """``result`` run at size 1 of each dim whose comparison with a number torch.export decided from its
    default minimum of 2 alone (the kept ``n >= 2`` guards of ``verify.default_floor``), in onnxruntime
    against eager PyTorch: ``(result, None, None)`` where it matches there (each such guard marked
    checked); else, where ``splits``, the branch ``export_in_pieces`` cuts at 1 (``pieces.floor_branch``)
    and the fallback taking ``n >= 2`` as a constraint should that fail; without ``splits``, the
    result with that constraint."""
    from onnxport.pieces import floor_branch
    from onnxport.verify.default_floor import checked, floors, wrong_below

    if result.weights is not None or not isinstance(result.module, torch.nn.Module) or not floors(result.guards):
        return result, None, None
    wrong, marked = {}, {}
    with step("check size 1"):
        for guard in floors(result.guards):
            why = wrong_below(result, guard)
            if why is None:
                marked[id(guard)] = checked(guard)
            else:
                wrong[id(guard)] = (guard, why)
    if marked:
        result = _with_guards(result, [marked.get(id(g), g) for g in result.guards], record=False)
    if not wrong:
        return result, None, None
    first_wrong = next(iter(wrong.values()))[0]

    def fallback(failed: BaseException | None = None) -> ExportResult:
        return _adopt_floors(result, wrong, failed)

    if not splits:
        return fallback(), None, None
    return result, floor_branch(result, first_wrong), fallback


def _adopt_floors(result: ExportResult, wrong: dict, failed: BaseException | None) -> ExportResult:
    """``result`` with ``n >= 2`` adopted for each kept guard of ``wrong`` (``id -> (guard, why)``: the
    export differs from eager PyTorch at size 1), one warning each; ``failed``: why size 1 could not
    be exported on its own. Raises ``DynamicShapesError`` for a dim whose explicit range holds 1."""
    from onnxport.capture.trace import adopted_warning
    from onnxport.verify.default_floor import adopted

    explicit = {v.name for v in result.captured.variables.values() if not v.adoptable}
    why_failed = None if failed is None else (getattr(failed, "split_why", None) or getattr(failed, "summary", None)
                                              or str(failed).splitlines()[0])
    reason = "" if failed is None else f"; exporting size 1 on its own failed: {why_failed}"
    changed = {}
    for key, (guard, why) in wrong.items():
        new = adopted(guard, why)
        name = new.names[0] if new.names else ""
        if name in explicit:
            raise DynamicShapesError(
                f"the export is wrong at {name} = 1, which the declared range holds: torch.export traces sizes "
                f"from 2 on, and the model's code decides on {name} there ({why}){reason}", where=guard.where,
                hint=f"declare Dim({name!r}, min=2, ...) if size 1 never occurs, or export with an example of "
                     f"size 1 for {name!r} to get the size-1 side")
        warnings.warn(adopted_warning(new) + reason, UserWarning, stacklevel=5)
        changed[key] = new
    return _with_guards(result, [changed.get(id(g), g) for g in result.guards])


def _warn_again(recorded: list, result: ExportResult | None) -> None:
    """The warnings ``recorded`` during the export, given again where they were raised, once each,
    without those of adopted constraints ``result`` no longer holds (all of them when the export
    failed)."""
    from onnxport.capture.trace import ADOPTED_PREFIX

    # a piece's constraint reads "time % 2 == 0 (where time >= 17)": warned as adopted in the piece
    final = {str(g).split(" (where ")[0] for g in result.constraints} if result is not None else None
    seen = set()
    for w in recorded:
        text = str(w.message)
        key = (text, w.category, w.filename, w.lineno)
        if key in seen:
            continue
        seen.add(key)
        if final is not None and text.startswith(ADOPTED_PREFIX) and \
                text[len(ADOPTED_PREFIX):].split(" only", 1)[0] not in final:
            continue
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _settle(result: ExportResult, step) -> ExportResult:
    """``result`` after the checks of sizes the capture left open, each run in eager PyTorch and
    onnxruntime (the model's own minimum, adopted constraints the ONNX model may not need; size 1 is
    checked per piece, ``_size_one``)."""
    from onnxport.verify.unneeded_constraints import candidates
    from onnxport.verify.model_minimum import low_runs

    if result.weights is not None or not isinstance(result.module, torch.nn.Module):  # no eager model to run
        return result
    if low_runs(result.guards, _minimum(result)):
        with step("check the smallest sizes"):
            result = _settle_minimum(result)
    tries = candidates(result.guards, result.rewrite_notes, _examples(result))
    if tries:
        with step("check the sizes adopted constraints exclude"):
            result = _settle_unneeded(result, tries)
    _hold_at_the_example(result)
    return result


def _hold_at_the_example(result: ExportResult) -> None:
    """Raise the trace's first failure where the program traced at a larger example keeps a
    constraint the user's example breaks (Deformable DETR's feature-map sizes, constants of the
    larger trace): such an export would not hold at the example itself."""
    from onnxport.verify.unneeded_constraints import breaks_example

    captured = result.captured
    if captured.enlarged_from is not None and any(breaks_example(g, _examples(result)) for g in captured.adopted()):
        raise captured.enlarged_from


def _minimum(result: ExportResult) -> dict[str, int]:
    """dim name -> the smallest size the export promises."""
    return {v.name: max(1, v.lo) for v in result.captured.variables.values()}


def _settle_minimum(result: ExportResult) -> ExportResult:
    """``result``, or a new one where the smallest sizes a kept guard excludes, which eager PyTorch
    itself refuses, are out of the range (``verify.model_minimum``): ``n >= m`` adopted (warning,
    ``constraints``, metadata), the narrower ``n >= k`` it supersedes dropped."""
    from onnxport.capture.trace import adopted_warning
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
        changed[id(guard)] = adopted_minimum(guard, name, start, smallest, error)
    if not changed:
        return result
    guards = [changed.get(id(g), g) for g in result.guards]
    adopted = [g for g in guards if g.adopted]
    for guard in changed.values():
        warnings.warn(f"{adopted_warning(guard)}; {guard.method}", UserWarning, stacklevel=4)
    return _with_guards(result, [g for g in guards if not superseded(g, adopted)])


def _with_guards(result: ExportResult, guards: list, variables: dict | None = None, record: bool = True) -> ExportResult:
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


def _settle_unneeded(result: ExportResult, tries: list) -> ExportResult:
    """``result``, or a new one where an adopted constraint the ONNX model does not need (it matches
    eager PyTorch at sizes the constraint excludes, ``verify.unneeded_constraints``) is kept instead,
    with one warning saying so. ``tries``: ``(guard, sizes)`` of ``unneeded_constraints.candidates``."""
    from onnxport.verify.unneeded_constraints import kept, right_at

    for guard, sizes in tries:
        trial_guard = kept(guard, sizes)
        guards = [trial_guard if g is guard else g for g in result.guards]
        low = {n: min(s[n] for s in sizes if n in s) for n in guard.names}
        variables = {s: dataclasses.replace(v, lo=min(v.lo, low[v.name])) if v.name in low else v
                     for s, v in result.captured.variables.items()}
        trial = _with_guards(result, guards, variables, record=False)
        if right_at(trial, trial_guard):
            result = trial
            shown = "; ".join(", ".join(f"{k}={v}" for k, v in s.items() if k in guard.names) for s in sizes[:3])
            warnings.warn(f"{guard.text} is not a constraint of the export after all: at {shown} onnxruntime "
                          f"matches eager PyTorch (the ONNX model computes those sizes alike)", UserWarning,
                          stacklevel=4)
    return _with_guards(result, result.captured.guards)  # the metadata, once, for the guards decided


def _bind_weights(model: Any, weights: Any, cast: bool, strict: bool):
    """The model's tensors matched with the checkpoint ``weights`` (``onnxport.weights.bind``), or
    None without one; ``CheckpointError`` for a model on the meta device and no checkpoint,
    ``CaptureError`` for one to capture with ``strict=True``."""
    from onnxport.errors import CaptureError, CheckpointError
    from onnxport.weights import bind, on_meta, open_checkpoint

    meta = on_meta(model) if isinstance(model, torch.nn.Module) else []
    if meta and strict:
        raise CaptureError("strict=True cannot capture a model whose weights are on the meta device: TorchDynamo "
                           "fakes them on the meta device, away from the inputs",
                           hint="export it with strict=False (the default), which fakes them on the CPU")
    if weights is None:
        if meta:
            raise CheckpointError(f"the model has {len(meta)} parameters or buffers on the meta device (no values), "
                                  f"{', '.join(meta[:4])}{', ...' if len(meta) > 4 else ''}",
                                  hint="pass weights=<the checkpoint> (safetensors file, sharded index, or torch.save "
                                       "state dict)")
        return None
    if not isinstance(model, torch.nn.Module):
        raise CheckpointError("weights= needs the model as a torch.nn.Module (built on the meta device), not an "
                              "ExportedProgram", hint="pass the module")
    return bind(model, open_checkpoint(weights), cast=cast)


def _pipeline(model, args, kwargs, dynamic_shapes, input_names, output_names, opset, optimize, inline, strict,
              rewrite_control_flow, other_axes, relations, capture_hooks, registry, step, timings,
              bound=None, output_dims=None, within=None) -> ExportResult:
    """The steps of ``to_onnx`` in order, each timed by ``step`` into ``timings`` (``within``: the
    ranges of one piece, ``onnxport.pieces``)."""
    from onnxport.capture import capture, decompose
    from onnxport.capture.values import check_outputs
    from onnxport.finalize import finalize
    from onnxport.optimize.pipeline import optimize as run_passes
    from onnxport.translate.program import build_model
    from onnxport.translate.registry import Translations

    module, rewrite_notes = model, []
    if rewrite_control_flow and isinstance(model, torch.nn.Module):
        from onnxport.rewrite import rewrite_module

        with step("rewrite"):
            model = rewrite_module(model, args, kwargs)
        rewrite_notes = list(getattr(model, "onnxport_rewrite_notes", []))
    translations = Translations(opset, registry)
    options = dict(strict=strict, other_axes=other_axes, ops=translations, hooks=capture_hooks, relations=relations,
                   within=within)
    with step("capture"):
        first = None
        try:
            captured = capture(model, args, kwargs, dynamic_shapes, rewritten=bool(rewrite_control_flow), **options)
        except (SpecializationError, DataDependentError) as error:
            if rewrite_control_flow is not None or not isinstance(model, torch.nn.Module):
                raise
            first = error
        # the rewritten model is captured outside the handler: an exception raised while capturing it
        # would otherwise carry the first failure as its context, which classifying it reads
        if first is not None:
            model, rewrite_notes, notice = _rewritten_after(first, model, args, kwargs)
            rewrite_control_flow = True
            try:
                captured = capture(model, args, kwargs, dynamic_shapes, rewritten=True, **options)
            except ExportError as again:  # the rewrite did not help: the first failure is the user's to fix
                raise _tried(first, f"the rewritten model failed too: {again.summary}") from None
            warnings.warn(notice, UserWarning, stacklevel=3)
        check_outputs(captured.program, module)
    with step("decompose"):
        decomposed = decompose(captured.program, translations, capture_hooks)
        if decomposed.program is not captured.program:
            captured = dataclasses.replace(captured, program=decomposed.program)
    with step("translate"):
        ir_model = build_model(captured, opset=opset, registry=translations, input_names=input_names,
                               output_names_=output_names, output_dims=output_dims,
                               options={"inline": inline, "rewritten_loops": rewrite_control_flow}, weights=bound)
    if optimize:
        with step("optimize"):
            run_passes(ir_model, opset)
    with step("finalize"):
        finalize(ir_model, inline=inline, constraints=[str(g) for g in captured.adopted()])
    if isinstance(module, torch.export.ExportedProgram):
        module = module.module()
    return ExportResult(ir_model, program=captured.program, module=module, example=(args, kwargs),
                        captured=captured, timings=timings, dim_names=dict(ir_model.meta.get("dim_names", {})),
                        rewrite_notes=rewrite_notes, weights=bound,
                        decomposed={"local": list(decomposed.local), "whole_program": list(decomposed.whole_program)})


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


def print_step(name: str, seconds: float) -> None:
    """The ``verbose=True`` progress line of one step: ``[onnxport] capture: 1.23s``."""
    print(f"[onnxport] {name}: {seconds:.2f}s", flush=True)
