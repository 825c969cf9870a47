"""``to_onnx``: the export's options frozen (``options.ExportOptions``), the checkpoint bound, the
stages run (``stages.STAGES``, then the constraints stage, in pieces where a branch on a size asks for
it: ``stages.export``), and the export's warnings given once it is decided."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable

import torch

from onnxport.options import FALLBACK_SECONDS, MAX_OPSET, MIN_OPSET, ExportOptions, StepCallback
from onnxport.pieces import MAX_PIECES
from onnxport.result import ExportResult
from onnxport.stages import step_names
from onnxport.targets import DEFAULT_TARGET
from onnxport.translate.registry import Registry

STEPS = step_names()  # the names on_step reports, in order

__all__ = ["MAX_OPSET", "MIN_OPSET", "STEPS", "ExportOptions", "StepCallback", "print_step", "to_onnx"]


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
    fallback_seconds: float | None = FALLBACK_SECONDS,
    target: str = DEFAULT_TARGET,
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
            decompose, translate, optimize, finalize, then the constraints stage's checks where they
            run: "check size 1" (a size only torch.export's default minimum left out, run in
            onnxruntime against eager), "check the smallest sizes", "check the sizes adopted
            constraints exclude"); a step runs once per piece of a model exported in pieces.
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
        fallback_seconds: the time one capture fallback may take (default ``FALLBACK_SECONDS``,
            300 s; None: no bound). After a failed capture, onnxport traces the model again
            another way (a range narrowed or adopted, size-oblivious reasoning, a larger example,
            the control flow rewritten, strict mode, one piece of a range: ``Captured.attempts``);
            one such torch.export call that runs longer is stopped with a ``CaptureTimeoutError``
            (a ``CaptureError``) naming the line of the model it was tracing and the failure it
            answered. The first trace is not bounded.
        target: the runtime the model is for (``onnxport.targets``): ``"onnxruntime"`` (default,
            the export as it is), ``"portable"`` (no local functions, no Scan/Loop body reading a
            value of its enclosing graph but initializers, standard operators only) or
            ``"openvino"`` (portable, and an LSTM, GRU or RNN with sequence lengths masked and read at
            the lengths explicitly, which OpenVINO computes right). A rewrite after the export (step
            ``"target"``), checked in onnxruntime against eager PyTorch at the example;
            ``result.validate()`` then runs on the target's runtime by default (``ExportResult.target``).

    Returns:
        ``ExportResult`` with ``.model`` (onnx_ir.Model), ``.model_proto``, ``.save()``, ``.validate()``.

    Raises:
        DynamicShapesError, SpecializationError, CaptureError, UnsupportedOpError,
        TranslationError, ControlFlowError, CheckpointError, RuntimeTargetError (all
        ``onnxport.ExportError``).
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
    from onnxport.stages import Export, Run, export, retarget
    from onnxport.targets import target as runtime_target

    options = ExportOptions(dynamic_shapes=dynamic_shapes, input_names=input_names, output_names=output_names,
                            output_dims=output_dims, opset=opset, optimize=optimize, inline=inline, strict=strict,
                            rewrite_control_flow=rewrite_control_flow, other_axes=other_axes, relations=relations,
                            capture_hooks=capture_hooks, registry=registry, weights=weights, cast_weights=cast_weights,
                            fallback_seconds=fallback_seconds,
                            target=target,
                            on_step=on_step if on_step is not None else (print_step if verbose else None))
    runtime_target(options.target)  # an unknown name: RuntimeTargetError, with the names of TARGETS
    if isinstance(model, torch.export.ExportedProgram) and not args and not kwargs and model.example_inputs:
        args, kwargs = model.example_inputs
    args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
    kwargs = dict(kwargs or {})
    if isinstance(model, torch.nn.Module):
        check_inputs(model, args, kwargs)
    bound = _bind_weights(model, options)
    run = Run(options.on_step, budget=[MAX_PIECES])
    # torch.export is not thread-safe and the capture patches change torch for the whole process:
    # one export at a time; another thread's export waits here
    with exclusive_capture():
        restore_leftovers()
        result = retarget(export(Export(options, run, model, model, args, kwargs, bound)), options, run)
    _warn(run.notices, result)
    return result


def _warn(notices: list[str], result: ExportResult) -> None:
    """The export's warnings, once it is decided: its notices (what was rewritten, exported in pieces,
    found not to be a constraint), then each constraint it adopted (``capture.trace.adopted_warning``)."""
    from onnxport.capture.trace import adopted_warning

    for text in dict.fromkeys(notices):
        warnings.warn(text, UserWarning, stacklevel=3)
    for guard in result.constraints:
        warnings.warn(adopted_warning(guard), UserWarning, stacklevel=3)


def _bind_weights(model: Any, options: ExportOptions):
    """The model's tensors matched with the checkpoint ``options.weights`` (``onnxport.weights.bind``),
    or None without one; ``CheckpointError`` for a model on the meta device and no checkpoint,
    ``CaptureError`` for one to capture with ``strict=True``."""
    from onnxport.errors import CaptureError, CheckpointError
    from onnxport.weights import bind, on_meta, open_checkpoint

    meta = on_meta(model) if isinstance(model, torch.nn.Module) else []
    if meta and options.strict:
        raise CaptureError("strict=True cannot capture a model whose weights are on the meta device: TorchDynamo "
                           "fakes them on the meta device, away from the inputs",
                           hint="export it with strict=False (the default), which fakes them on the CPU")
    if options.weights is None:
        if meta:
            raise CheckpointError(f"the model has {len(meta)} parameters or buffers on the meta device (no values), "
                                  f"{', '.join(meta[:4])}{', ...' if len(meta) > 4 else ''}",
                                  hint="pass weights=<the checkpoint> (safetensors file, sharded index, or torch.save "
                                       "state dict)")
        return None
    if not isinstance(model, torch.nn.Module):
        raise CheckpointError("weights= needs the model as a torch.nn.Module (built on the meta device), not an "
                              "ExportedProgram", hint="pass the module")
    return bind(model, open_checkpoint(options.weights), cast=options.cast_weights)


def print_step(name: str, seconds: float) -> None:
    """The ``verbose=True`` progress line of one step: ``[onnxport] capture: 1.23s``."""
    print(f"[onnxport] {name}: {seconds:.2f}s", flush=True)
