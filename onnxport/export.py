"""``to_onnx``: rewrite (on request) -> capture -> decompose -> translate -> optimize -> finalize,
each step handing its result to the next, and nothing else."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Callable, Iterator

import torch

from onnxport.errors import ExportError
from onnxport.result import ExportResult
from onnxport.translate.registry import Registry

MIN_OPSET = 18
MAX_OPSET = 23  # the newest opset whose operators onnxport emits and tests
STEPS = ("rewrite", "capture", "decompose", "translate", "optimize", "finalize")

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
    rewrite_control_flow: bool = False,
    other_axes: str = "static",
    relations: dict[str, str] | None = None,
    on_step: StepCallback | None = None,
    capture_hooks: Callable[[], contextlib.AbstractContextManager] | None = None,
    registry: Registry | None = None,
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
            scan/cond/while_loop before capture (when available).
        other_axes: ``"static"`` (default, torch.export's rule: an axis ``dynamic_shapes`` does not
            name keeps the example's size) or ``"auto"`` (such axes are ``Dim.AUTO``: dynamic where
            the model allows it, named ``<input>_dim<axis>``, static where it does not).
        relations: dimension name -> an expression over other dimension names, for sizes the model
            needs related in a way ``dynamic_shapes`` cannot say: ``{"total": "past + seq"}`` for an
            attention mask covering the cached and the new steps. Shape guards are decided with the
            relation substituted, ``validate()`` generates only sizes satisfying it. Relations
            torch.export derives itself (an axis of size ``2*time``) need no statement.
        on_step: called ``(step, seconds)`` as each step ends (``STEPS``: rewrite, capture,
            decompose, translate, optimize, finalize).
        capture_hooks: ``() -> context manager`` entered while torch.export traces the model (each
            trace, and the whole-program decomposition, which traces the program again), after
            onnxport's own patches: patches a model's framework needs during tracing only
            (``onnxport.integrations.returnn.capture_hooks``), undone on exit.
        registry: the user translations to use (``onnxport.Registry``); default: the one
            ``@onnxport.translates`` registers into. They win over the built-in translations.

    Returns:
        ``ExportResult`` with ``.model`` (onnx_ir.Model), ``.model_proto``, ``.save()``, ``.validate()``.

    Raises:
        DynamicShapesError, SpecializationError, CaptureError, UnsupportedOpError,
        TranslationError, ControlFlowError (all ``onnxport.ExportError``). ``CaptureError`` also
        for an example input torch.export cannot take (named) and for a ``forward`` returning a
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
    # torch.export is not thread-safe and the capture patches change torch for the whole process:
    # one export at a time; another thread's export waits here
    with exclusive_capture():
        restore_leftovers()
        return _pipeline(model, args, kwargs, dynamic_shapes, input_names, output_names, opset, optimize, inline,
                         strict, rewrite_control_flow, other_axes, relations, capture_hooks, registry, step, timings,
                         output_dims)


def _pipeline(model, args, kwargs, dynamic_shapes, input_names, output_names, opset, optimize, inline, strict,
              rewrite_control_flow, other_axes, relations, capture_hooks, registry, step, timings,
              output_dims=None) -> ExportResult:
    """The steps of ``to_onnx`` in order, each timed by ``step`` into ``timings``."""
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
    with step("capture"):
        captured = capture(model, args, kwargs, dynamic_shapes, strict=strict, rewritten=rewrite_control_flow,
                           other_axes=other_axes, ops=translations, hooks=capture_hooks, relations=relations)
        check_outputs(captured.program, module)
    with step("decompose"):
        decomposed = decompose(captured.program, translations, capture_hooks)
        if decomposed.program is not captured.program:
            captured = dataclasses.replace(captured, program=decomposed.program)
    with step("translate"):
        ir_model = build_model(captured, opset=opset, registry=translations, input_names=input_names,
                               output_names_=output_names, output_dims=output_dims,
                               options={"inline": inline, "rewritten_loops": rewrite_control_flow})
    if optimize:
        with step("optimize"):
            run_passes(ir_model, opset)
    with step("finalize"):
        finalize(ir_model, inline=inline, constraints=[str(g) for g in captured.adopted()])
    if isinstance(module, torch.export.ExportedProgram):
        module = module.module()
    return ExportResult(ir_model, program=captured.program, module=module, example=(args, kwargs),
                        captured=captured, timings=timings, dim_names=dict(ir_model.meta.get("dim_names", {})),
                        rewrite_notes=rewrite_notes,
                        decomposed={"local": list(decomposed.local), "whole_program": list(decomposed.whole_program)})


def print_step(name: str, seconds: float) -> None:
    """The ``verbose=True`` progress line of one step: ``[onnxport] capture: 1.23s``."""
    print(f"[onnxport] {name}: {seconds:.2f}s", flush=True)
