"""Capture: the capture steps (``capture.steps.STEPS``, run by ``run_steps`` there) from a request to a
``Captured``.

Entry point: ``capture(model, args, kwargs, dynamic_shapes, ...) -> Captured``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import torch

from onnxport.capture.captured import Captured, program_input_names, user_placeholders
from onnxport.capture.caches import register_caches
from onnxport.capture.dynamic_shapes import DeclaredDim
from onnxport.capture.guards import Guard, excluded_text
from onnxport.capture.patches import user_hooks
from onnxport.capture.state import CaptureState, OpSupport, Request
from onnxport.capture.steps import captured_of, implied_ranges, run_steps
from onnxport.errors import CaptureError, DynamicShapesError, ExportError, user_source_line


def capture(model: Any, args: tuple, kwargs: dict | None, dynamic_shapes: Any, strict: bool = False,
            rewritten: bool = False, other_axes: str = "static", ops: OpSupport | None = None,
            hooks: Callable[[], Any] | None = None, relations: dict | None = None,
            within: dict | None = None, remainders: bool = False, fallback_seconds: float | None = None,
            fallback: bool = False, rewrite_later: bool = False,
            enlarged_after: ExportError | None = None) -> Captured:
    """Capture ``model`` with torch.export and decide its shape guards: the steps of
    ``capture.steps.STEPS`` in order, back to the trace whenever a step changed what torch.export
    is asked. ``Captured.attempts`` lists the steps as they ran.

    Args:
        model: ``torch.nn.Module`` or ``torch.export.ExportedProgram`` (taken as is).
        args, kwargs: example inputs (tensors, Python scalars, nested tuples/lists/dicts).
        dynamic_shapes: any form ``torch.export.export`` takes, with plain strings as dim names.
        strict: use torch.export's strict (TorchDynamo) mode.
        rewritten: the model's control flow was already rewritten (the hints then say what is left).
        other_axes: ``"static"`` (axes ``dynamic_shapes`` does not name keep the example's size, as
            in torch.export) or ``"auto"`` (they are ``Dim.AUTO``: dynamic where the model allows).
        ops: the export's translations (``translate.registry.Translations``): the patches their
            families need while torch.export traces (an LSTM kept whole).
        hooks: ``() -> context manager``, the user's ``capture_hooks``, entered while torch.export
            traces (each trace).
        relations: dim name -> expression over other dim names (``{"total": "past + seq"}``,
            ``onnxport.capture.relations``): the shape guards are decided with them substituted.
        within: dim name -> ``(min, max)`` (max None: unbounded): the sizes of one piece of a model
            exported in pieces (``onnxport.pieces``): torch.export is given that range and the
            export holds there, the dim's conditions decided as for the declared dim (adopted where
            it was named without a range, a branch refused).
        remainders: a branch on a remainder of sizes (``if h % 8 != 0:``) is read as a condition the model
            needs, adopted on trial (``capture.steps.remainder_branch``), as it is once ``rewritten``.
        fallback_seconds: the time bound of one capture fallback (None: none): a retrace after a failed
            trace (and with ``fallback``, every trace) longer than that is stopped (``capture.time_bound``).
        fallback: this capture is itself a fallback (another strategy after a failed capture, one piece
            of a range): its first trace is bounded too.
        rewrite_later: the caller rewrites the model's control flow and captures it again where this
            capture fails (``rewrite_control_flow=None``): a branch on a remainder of sizes that rewrite would
            leave as Python (``rewrite.left_branches``) is adopted on trial here already, as after it.
        enlarged_after: the failure of an earlier capture of the same model that traced it at a larger
            example (``ExportError.traced_at``): this capture traces there from its first trace (a size
            outside ``within`` skipped), the user's example kept as the one handed forward, and that
            failure is the one raised where a constraint of the result breaks the example
            (``Captured.enlarged_from``).

    Raises:
        DynamicShapesError: the spec names unknown inputs or axes, or is malformed; a relation
            names unknown dims or does not hold at the example.
        SpecializationError: a declared dynamic axis came out constant (with the user's line).
        DataDependentError: the model's code needs a size known only from the data (names it).
        CaptureError: the model's forward raised or torch.export failed otherwise.
        CaptureTimeoutError: a bounded trace ran longer than ``fallback_seconds`` (the user's line it
            was tracing, the failure it answered).
    """
    args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
    if isinstance(model, torch.export.ExportedProgram):
        return _as_captured(model, args, dict(kwargs or {}), dynamic_shapes)
    if not isinstance(model, torch.nn.Module):
        raise CaptureError(f"to_onnx takes a torch.nn.Module or an ExportedProgram, not {type(model).__name__}")
    register_caches()
    request = Request.make(model, args, dict(kwargs or {}), dynamic_shapes, relations=relations, strict=strict,
                           rewritten=rewritten, remainders=remainders, other_axes=other_axes, ops=ops,
                           hooks=(user_hooks(hooks),) if hooks is not None else (), within=dict(within or {}),
                           fallback_seconds=fallback_seconds, fallback=fallback, rewrite_later=rewrite_later)
    for name, size in getattr(enlarged_after, "traced_at", ()):
        low, high = request.within.get(name, (None, None))
        if (low is None or size >= low) and (high is None or size <= high):
            request = dataclasses.replace(request.enlarged(name, size), enlarged_after=enlarged_after)
    state = run_steps(start(request))
    return finish(state)


def start(request: Request) -> CaptureState:
    """The state before the first trace: the user's relations, the ranges they imply, the range of
    the piece (``Request.within``), and size-oblivious reasoning when an example size of a declared
    axis is 0 or 1."""
    state = CaptureState(request, related=request.related, oblivious=request.small)
    implied = implied_ranges(state)
    within = dict(request.within)
    # a piece's range is given to torch and promised, not adopted: ``implied`` (a range given, no condition)
    return state.but("", ranges={**implied, **within}, implied={**implied, **within}, promised=within)


def finish(state: CaptureState) -> Captured:
    """The ``Captured`` of the final state; raises the failure no step resolved,
    the steps as they ran and what torch printed while failing kept on the error's detail, the
    steps on its ``attempts`` too."""
    if state.program is None:
        failure = state.first_failure or state.trace
        error = failure.error.with_output(debug_text(state.attempts, failure.output))
        raise error.with_attempts(state.attempts).with_traced_at(state.request.traced_at) from failure.exception
    captured = captured_of(state)  # its adopted constraints are warned once the export is decided
    if state.request.model.training:
        _warn_training_ops(captured.program)
    return captured


def debug_text(attempts: tuple, printed: str = "") -> str:
    """The capture steps as they ran, one a line, then what torch printed (``--debug``)."""
    lines = ["capture steps:"] + [f"  {a}" for a in attempts]
    if printed.strip():
        lines += ["torch printed while tracing:", printed.rstrip()]
    return "\n".join(lines)


_TRAINING_OPS = ("dropout", "dropout_", "native_dropout", "feature_dropout", "feature_dropout_", "alpha_dropout",
                  "alpha_dropout_", "feature_alpha_dropout", "_native_batch_norm_legit", "_batch_norm_with_update",
                  "batch_norm", "rrelu_with_noise", "bernoulli", "bernoulli_")


def _warn_training_ops(program: torch.export.ExportedProgram) -> None:
    """One warning, with the user's line, when the model left in training mode exports its
    training behaviour: a dropout or a batch norm that computes in training mode."""
    for node in program.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        name = target._schema.name.split("::")[-1]
        if name not in _TRAINING_OPS:
            continue
        train = dict(zip((a.name for a in target._schema.arguments), node.args)) | dict(node.kwargs)
        if any(train.get(k) is True for k in ("train", "training")) or name.startswith(
                ("_native_batch_norm_legit", "_batch_norm_with_update", "bernoulli", "native_dropout")):
            where = user_source_line(node)
            warnings.warn("the model is in training mode and exports its training behaviour "
                          f"({name}{f' at {where}' if where else ''}); call model.eval() before to_onnx for "
                          "inference", UserWarning, stacklevel=5)
            return


ADOPTED_PREFIX = "the export holds for "  # the start of an adopted constraint's warning


def adopted_warning(guard: Guard) -> str:
    """The one warning an adopted constraint gets: the constraint, the user's line, what it excludes."""
    where = f" (required at {guard.where})" if guard.where else ""
    names = ", ".join(guard.names)
    return (f"{ADOPTED_PREFIX}{guard.text} only{where}: it excludes {excluded_text(guard.excluded)}; "
            f"onnxport adopted this constraint for {names} (ExportResult.constraints); declare "
            f"Dim(name, min=..., max=...) to set the range yourself" + (f"; {guard.note}" if guard.note else ""))


def _as_captured(program: torch.export.ExportedProgram, args: tuple, kwargs: dict, dynamic_shapes: Any) -> Captured:
    """An ExportedProgram taken as it is, its named dims read from torch's shape environment."""
    if dynamic_shapes is not None:
        raise DynamicShapesError(
            "dynamic_shapes was given with an ExportedProgram, whose dimensions were fixed when it was exported",
            hint="pass dynamic_shapes to torch.export.export, or give to_onnx the module itself")
    return Captured(program, program_input_names(program), _declared_from_program(program), (args, kwargs))


def _declared_from_program(program: torch.export.ExportedProgram) -> list[DeclaredDim]:
    """The named dims of an ExportedProgram: torch's shape environment keeps each ``Dim``'s name
    (``L['x'].size()[0]`` -> ``rows``); the program's placeholder names are the input names."""
    declared = []
    for name, node in zip(program_input_names(program), user_placeholders(program)):
        val = node.meta.get("val") if node is not None else None
        if not isinstance(val, torch.Tensor):
            continue
        for axis, size in enumerate(val.shape):
            if not isinstance(size, torch.SymInt):
                continue
            env = size.node.shape_env
            debug = getattr(env, "source_name_to_debug_name", {})
            for source in env.var_to_sources.get(size.node.expr, []):
                user_name = debug.get(source.name)
                if user_name:
                    declared.append(DeclaredDim(name, axis, user_name, True))
                    break
    return declared
