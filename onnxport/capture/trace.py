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

import sympy
import torch

from onnxport.capture.captured import Captured, program_input_names, user_placeholders
from onnxport.capture.classify import (REWRITTEN_HINT, classify, derived_dims, is_size_guard, required_ranges,
                                       source_matches, specialization_error, top_level_name)
from onnxport.capture.caches import register_caches, sliding_window_as_full
from onnxport.capture.dynamic_shapes import (DeclaredDim, declared_dims, expand_caches, flat_names, other_axes_auto,
                                             positive_axes, signature_names, spec_for, string_names, to_dims)
from onnxport.capture.eager_paths import transformer_encoder_as_eager
from onnxport.capture.guard_events import decide_captured, size_vars, violation_ranges
from onnxport.capture.guards import Guard, SizeVar, excluded_text, range_guard
from onnxport.capture.probe import probe_size_one
from onnxport.capture.patches import (defer_range_violations, record_guards, record_specializations, size_oblivious,
                                      symbolic_math)
from onnxport.capture.relations import broken, candidates, parse_relations, symbol
from onnxport.capture.signature import explicit_signature
from onnxport.errors import CaptureError, DynamicShapesError, SpecializationError, user_source_line


def capture(model: Any, args: tuple, kwargs: dict | None, dynamic_shapes: Any, strict: bool = False,
            rewritten: bool = False, other_axes: str = "static",
            hooks: Callable[[], Any] = contextlib.nullcontext, relations: dict | None = None) -> Captured:
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
        relations: dim name -> expression over other dim names (``{"total": "past + seq"}``,
            ``onnxport.capture.relations``): the shape guards are decided with them substituted.

    Raises:
        DynamicShapesError: the spec names unknown inputs or axes, or is malformed; a relation
            names unknown dims or does not hold at the example.
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
    register_caches()
    top = signature_names(model, args, kwargs)
    strings = string_names(dynamic_shapes)
    ranges: dict[str, tuple] = {}  # the range torch.export is given for a dim it narrowed (a conv stack needs time >= 7)
    promised: dict[str, tuple] = {}  # ... and the range the export holds for (torch's 0/1 specializations kept)
    derived: dict[str, tuple] = {}  # dims torch.export relates to another (u = t + 1): name -> (base, k, c)
    narrowed: dict[str, list[Guard]] = {}

    if other_axes not in ("static", "auto"):
        raise DynamicShapesError(f"other_axes must be 'static' or 'auto', not {other_axes!r}")

    def per_input(spec) -> dict[str, Any]:
        per = expand_caches(top, spec_for(spec, top))
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
    related = _relations(relations, declared, {f: leaf for f, leaf, _ in flat})
    records: list = []
    events: list = []
    leaves = {f: leaf for f, leaf, _ in flat}
    small = any(isinstance(leaves.get(d.input_name), torch.Tensor) and leaves[d.input_name].shape[d.axis] in (0, 1)
                for d in declared)

    def export(oblivious: bool) -> torch.export.ExportedProgram:
        torch._dynamo.reset()  # tracer state left by an earlier capture breaks nested control flow
        records.clear()
        events.clear()
        torch_spec = torch_spec_for(to_dims(dynamic_shapes, {}, ranges, derived))
        violations: list = []
        with record_specializations(records), record_guards(events), symbolic_math(), size_oblivious(oblivious), \
                hooks(), transformer_encoder_as_eager(), defer_range_violations(violations), \
                explicit_signature(model, args, kwargs), sliding_window_as_full():
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
    implied = _implied_ranges(related, declared)
    ranges.update(implied)
    oblivious, first = small, None
    for _ in range(6):
        try:
            program = export(oblivious)
            break
        except Exception as e:  # noqa: BLE001 - classified below, original chained
            related_now = {n: d for n, d in derived_dims(str(e)).items()
                           if n in strings and d[0] in strings and n not in derived and n not in related}
            if related_now:  # torch.export derives a relation between dims named without a range
                derived.update(related_now)
                continue
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
    for name, (base, k, c) in derived.items():
        related[name] = k * symbol(base) + c
        warnings.warn(f"torch.export relates {name} to {base}: {name} = {related[name]}; onnxport adopted this relation "
                      f"(the ONNX model names the axis {related[name]}); declare relations={{'{name}': "
                      f"'{related[name]}'}} to state it yourself", UserWarning, stacklevel=3)
    for name, r in ranges.items():  # ranges from torch's suggested fixes: adopted as they are
        if name not in narrowed and implied.get(name) != r:
            promised[name] = r
            narrowed[name] = [range_guard(SizeVar(None, name, 1, None, True), r[0] or 1, r[1], None)]
    variables = size_vars(user_placeholders(program), names, declared, promised)
    try:
        decided, variables = decide_captured(program, variables, events, ranges, related)
    except (SpecializationError, DynamicShapesError) as e:
        hint = _relation_hint(e, declared, leaves, related)
        if hint is None:
            raise
        raise type(e)(e.what, where=e.where, hint=hint) from e
    guards = [g for n in narrowed for g in narrowed[n]] + decided
    captured = Captured(program, names, declared, (args, kwargs), guards, variables, related)
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



def _relation_hint(error, declared: list[DeclaredDim], leaves: dict[str, Any], related: dict) -> str | None:
    """The error's hint with the relations the example's sizes satisfy among the dims the failed
    condition reads (``total = past + seq``): sizes related that way may be what the model needs."""
    example = {d.name: int(leaves[d.input_name].shape[d.axis]) for d in declared
               if isinstance(leaves.get(d.input_name), torch.Tensor)}
    named = set(re.findall(r"\w+", error.what))
    found = [(n, e) for n, e in candidates(example) if n not in related and {n, *re.findall(r"[A-Za-z_]\w*", e)} <= named]
    if not found:
        return None
    name, expr = found[0]
    also = "".join(f" or {n} = {e}" for n, e in found[1:3])
    return (f"the example has {name} = {expr}{also}: if the model needs that, declare it with "
            f'relations={{"{name}": "{expr}"}} (to_onnx) or {name} = "{expr}" in a config\'s [dims]; otherwise '
            + (error.hint or ""))


def _implied_ranges(related: dict, declared: list[DeclaredDim]) -> dict[str, tuple]:
    """The range torch.export is given for a related dim: the least value of its expression at the
    sizes torch traces its terms with (2 and up, or the declared minimum), for expressions that grow
    with every term (``past + seq`` -> 4). torch would otherwise narrow the range itself while
    tracing (a mask ``total`` at least ``past + seq``) and report it as a violation; the range
    onnxport promises for the dim stays what its relation gives."""
    by_name = {d.name: d for d in declared}
    out = {}
    for name, expr in related.items():
        poly = sympy.Poly(expr, *expr.free_symbols) if expr.free_symbols else None
        if poly is None or any(c < 0 for c in poly.coeffs()) or name not in by_name:
            continue
        lows = {s: max(2, by_name[str(s)].min) if str(s) in by_name else 2 for s in expr.free_symbols}
        d = by_name[name]
        out[name] = (int(expr.xreplace(lows)), d.max)
    return out


def _relations(relations: dict | None, declared: list[DeclaredDim], leaves: dict[str, Any]) -> dict:
    """The user's relations parsed, checked against the declared dims and the example's sizes."""
    if not relations:
        return {}
    related = parse_relations(relations, {d.name for d in declared})
    example = {d.name: int(leaves[d.input_name].shape[d.axis]) for d in declared
               if isinstance(leaves.get(d.input_name), torch.Tensor)}
    wrong = broken(related, example)
    if wrong:
        sizes = ", ".join(f"{n}={v}" for n, v in example.items())
        raise DynamicShapesError(f"the example inputs do not satisfy the relation {'; '.join(wrong)} ({sizes})",
                                 hint="give example inputs whose sizes satisfy the relations, or correct the relation")
    return related


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
