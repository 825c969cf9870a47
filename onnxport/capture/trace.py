"""Capture: torch.export with a normalized dynamic-shapes spec, the retries it needs, the checks
that no declared dimension was specialized, and the decisions on its shape guards.

Entry point: ``capture(model, args, kwargs, dynamic_shapes, ...) -> Captured``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import warnings
from typing import Any, Callable

import torch

from onnxport.capture.captured import Captured, program_input_names, user_placeholders
from onnxport.capture.classify import (REWRITTEN_HINT, classify, is_size_guard, required_ranges, source_matches,
                                       specialization_error, top_level_name)
from onnxport.capture.dynamic_shapes import (DeclaredDim, declared_dims, flat_names, other_axes_auto,
                                             positive_axes, signature_names, spec_for, string_names, to_dims)
from onnxport.capture.eager_paths import transformer_encoder_as_eager
from onnxport.capture.guard_events import decide_captured, size_vars, violation_ranges
from onnxport.capture.guards import Guard, SizeVar, excluded_text, range_guard
from onnxport.capture.probe import probe_size_one
from onnxport.capture.patches import (defer_range_violations, record_guards, record_specializations, size_oblivious,
                                      symbolic_math)
from onnxport.errors import CaptureError, DynamicShapesError, SpecializationError, user_source_line


def capture(model: Any, args: tuple, kwargs: dict | None, dynamic_shapes: Any, strict: bool = False,
            rewritten: bool = False, other_axes: str = "static",
            hooks: Callable[[], Any] = contextlib.nullcontext) -> Captured:
    """Run ``torch.export.export`` and check that every declared dynamic axis stayed symbolic.

    Args:
        model: ``torch.nn.Module`` or ``torch.export.ExportedProgram`` (taken as is).
        args, kwargs: example inputs (tensors, Python scalars, nested tuples/lists/dicts).
        dynamic_shapes: any form ``torch.export.export`` takes, with plain strings as dim names.
        strict: use torch.export's strict (TorchDynamo) mode.
        rewritten: the model's control flow was already rewritten (the hints then say what is left).
        other_axes: ``"static"`` (axes ``dynamic_shapes`` does not name keep the example's size, as
            in torch.export) or ``"auto"`` (they are ``Dim.AUTO``: dynamic where the model allows).
        hooks: ``() -> context manager`` entered while torch.export traces: the translation
            registry's capture hooks (``Registry.capture_hooks``), keeping whole the ops it translates
            whole (an LSTM, a packed sequence).

    Raises:
        DynamicShapesError: the spec names unknown inputs or axes, or is malformed.
        SpecializationError: a declared dynamic axis came out constant (with the user's line).
        CaptureError: the model's forward raised or torch.export failed otherwise.
    """
    kwargs = dict(kwargs or {})
    args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
    if isinstance(model, torch.export.ExportedProgram):
        if dynamic_shapes is not None:
            raise DynamicShapesError(
                "dynamic_shapes was given with an ExportedProgram, whose dimensions were fixed when it was exported",
                hint="pass dynamic_shapes to torch.export.export, or give to_onnx the module itself")
        top = [(n, None) for n in program_input_names(model)]
        return Captured(model, [n for n, _ in top], _declared_from_program(model), (args, kwargs))
    if not isinstance(model, torch.nn.Module):
        raise CaptureError(f"to_onnx takes a torch.nn.Module or an ExportedProgram, not {type(model).__name__}")
    top = signature_names(model, args, kwargs)
    strings = string_names(dynamic_shapes)
    ranges: dict[str, tuple] = {}  # the range torch.export is given for a dim it narrowed (a conv stack needs time >= 7)
    promised: dict[str, tuple] = {}  # ... and the range the export holds for (torch's 0/1 specializations kept)
    narrowed: dict[str, list[Guard]] = {}

    if other_axes not in ("static", "auto"):
        raise DynamicShapesError(f"other_axes must be 'static' or 'auto', not {other_axes!r}")

    def per_input(spec) -> dict[str, Any]:
        per = spec_for(spec, top)
        normalized = {n: positive_axes(v, per.get(n)) for n, v in top}
        if other_axes == "auto":
            normalized = {n: other_axes_auto(v, normalized[n]) for n, v in top}
        return normalized

    def torch_spec_for(spec):
        normalized = per_input(spec)
        if isinstance(spec, (list, tuple)):
            return type(spec)(normalized[n] for n, _ in top)
        if isinstance(spec, dict) or other_axes == "auto":
            return {n: normalized[n] for n, _ in top}
        return spec

    spec = to_dims(dynamic_shapes, {})
    declared = declared_dims(top, per_input(spec), strings)
    flat = flat_names(top)
    names = [f for f, _, _ in flat]
    records: list = []
    events: list = []
    leaves = {f: leaf for f, leaf, _ in flat}
    small = any(isinstance(leaves.get(d.input_name), torch.Tensor) and leaves[d.input_name].shape[d.axis] in (0, 1)
                for d in declared)

    def export(oblivious: bool) -> torch.export.ExportedProgram:
        torch._dynamo.reset()  # tracer state left by an earlier capture breaks nested control flow
        records.clear()
        events.clear()
        torch_spec = torch_spec_for(to_dims(dynamic_shapes, {}, ranges))
        violations: list = []
        with record_specializations(records), record_guards(events), symbolic_math(), size_oblivious(oblivious), \
                hooks(), transformer_encoder_as_eager(), defer_range_violations(violations):
            program = torch.export.export(model, args, kwargs, dynamic_shapes=torch_spec, strict=strict,
                                          prefer_deferred_runtime_asserts_over_guards=True)
        if violations:
            _adopt_violations(violations[0])
        return program

    def _adopt_violations(e: Exception) -> None:
        """Decide the declared ranges torch found the trace does not hold for; the ones this cannot
        decide are raised as torch raised them."""
        pinned = classify(e, declared, records, top, events)
        if isinstance(pinned, SpecializationError):
            raise e
        decided = violation_ranges(str(e), events, declared, promised)
        named = {n for n, _ in re.findall(r"Not all values of (\w+) = (\S+) in the specified range", str(e))}
        if not decided or named - set(decided):
            raise e
        for n, v in decided.items():
            ranges[n], promised[n], narrowed[n] = v.torch, v.promised, v.guards

    # attempts: as given; with the ranges torch requires of dims named without one; reasoning
    # size-obliviously when a guard is only about sizes 0 and 1
    oblivious, first = small, None
    for _ in range(6):
        try:
            program = export(oblivious)
            break
        except Exception as e:  # noqa: BLE001 - classified below, original chained
            error = classify(e, declared, records, top, events)
            if rewritten and isinstance(error, SpecializationError) and error.hint and \
                    "rewrite_control_flow" in error.hint:
                error = SpecializationError(error.what, where=error.where, hint=REWRITTEN_HINT)
            if not isinstance(error, SpecializationError):
                needed = {n: v for n, v in violation_ranges(str(e), events, declared, promised).items()
                          if ranges.get(n) != v.torch}
                if needed:
                    for n, v in needed.items():
                        ranges[n], promised[n], narrowed[n] = v.torch, v.promised, v.guards
                    continue
            first = first or (error, e)
            suggested = {n: r for n, r in required_ranges(str(e)).items() if n in strings and ranges.get(n) != r}
            if suggested:
                ranges.update(suggested)
            elif not oblivious and (is_size_guard(error) or isinstance(error, SpecializationError)):
                oblivious = True
            else:
                raise first[0] from first[1]
    else:
        raise first[0] from first[1]
    _check_specialization(program, names, declared, records, top)
    for name, r in ranges.items():  # ranges from torch's suggested fixes: adopted as they are
        if name not in narrowed:
            promised[name] = r
            narrowed[name] = [range_guard(SizeVar(None, name, 1, None, True), r[0] or 1, r[1], None)]
    variables = size_vars(user_placeholders(program), names, declared, promised)
    decided, variables = decide_captured(program, variables, events, ranges)
    guards = [g for n in narrowed for g in narrowed[n]] + decided
    captured = Captured(program, names, declared, (args, kwargs), guards, variables)
    probed, variables = probe_size_one(model, captured)
    if probed:
        captured = dataclasses.replace(captured, guards=guards + probed, variables=variables)
    for guard in captured.guards:
        if guard.status == "adopted":
            warnings.warn(adopted_warning(guard), UserWarning, stacklevel=3)
    if model.training:
        _warn_training_ops(program)
    return captured


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
        if any(train.get(k) is True for k in ("train", "training")) or name.startswith(("_native_batch_norm_legit",
                                                                                         "_batch_norm_with_update",
                                                                                         "bernoulli", "native_dropout")):
            where = user_source_line(node)
            warnings.warn("the model is in training mode and exports its training behaviour "
                          f"({name}{f' at {where}' if where else ''}); call model.eval() before to_onnx for "
                          "inference", UserWarning, stacklevel=4)
            return


def adopted_warning(guard: Guard) -> str:
    """The one warning an adopted constraint gets: the constraint, the user's line, what it excludes."""
    where = f" (required at {guard.where})" if guard.where else ""
    names = ", ".join(guard.names)
    return (f"the export holds for {guard.text} only{where}: it excludes {excluded_text(guard.excluded)}; "
            f"onnxport adopted this constraint for {names} (ExportResult.constraints); declare "
            f"Dim(name, min=..., max=...) to set the range yourself")


def _check_specialization(program, names, declared, records, top) -> None:
    placeholders = user_placeholders(program)
    by_name = dict(zip(names, placeholders))
    for d in declared:
        node = by_name.get(d.input_name)
        if node is None or not d.strict:
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and isinstance(val.shape[d.axis], int):
            where = next((f for s, c, f in records if source_matches(s, d.input_name, d.axis, top_level_name(d, top))), None)
            raise specialization_error(d, int(val.shape[d.axis]), where, top_level_name(d, top))


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
