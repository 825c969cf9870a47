"""Capture: torch.export with a normalized dynamic-shapes spec, decomposition, specialization check.

Entry point: ``capture(model, args, kwargs, dynamic_shapes, strict) -> Captured``.
"""

from __future__ import annotations

import dataclasses
import re
import traceback
import warnings
from typing import Any

import torch

from onnxport.capture_guards import decide_captured, size_vars, violation_ranges
from onnxport.capture_patches import record_guards, record_specializations, size_oblivious, symbolic_math
from onnxport.dynamic_shapes import (DeclaredDim, declared_dims, flat_names, other_axes_auto, positive_axes,
                                     signature_names, spec_for, string_names, to_dims)
from onnxport.eager_paths import transformer_encoder_as_eager
from onnxport.errors import CaptureError, DynamicShapesError, ExportError, SpecializationError, last_user_frame
from onnxport.guards import Guard, SizeVar, excluded_text, range_guard
from onnxport.translate import registry


@dataclasses.dataclass
class Captured:
    """What capture hands to translation."""

    program: torch.export.ExportedProgram
    input_names: list[str]  # flat names of the user inputs, in placeholder order (tensors and constants)
    declared: list[DeclaredDim]
    guards: list[Guard] = dataclasses.field(default_factory=list)  # every size condition decided
    variables: dict = dataclasses.field(default_factory=dict)  # torch's symbol -> SizeVar: the sizes the export holds for

    @property
    def constraints(self) -> list[Guard]:
        """The conditions adopted as constraints of the export (``time % 4 == 0``)."""
        return [g for g in self.guards if g.status == "adopted"]


def _source_matches(sources: list[str], input_name: str, axis: int, top_name: str) -> bool:
    for s in sources:
        if f".size()[{axis}]" in s and (f"['{top_name}']" in s or f"['{input_name}']" in s):
            return True
    return False


_REWRITTEN_HINT = ("rewrite_control_flow=True left this construct as written (see the warning listing what "
                   "it did not rewrite and why): write it with torch.ops.higher_order.scan, torch.cond or "
                   "while_loop, or drop the axis from dynamic_shapes if the size really is fixed")


def _specialization_error(d: DeclaredDim, value: int | None, where: str | None, top_name: str) -> SpecializationError:
    const = f" became the constant {value}" if value is not None else " became a constant"
    if value in (0, 1):
        return SpecializationError(
            f"axis {d.axis} of input {d.input_name!r}, declared dynamic as {d.name!r}, has size {value} in the "
            f"example inputs: torch.export specializes sizes 0 and 1, so the dimension cannot stay dynamic",
            where=where,
            hint=f"give an example input whose axis {d.axis} has size 2 or more; onnxport validates other sizes "
                 f"(1 included) afterwards",
        )
    return SpecializationError(
        f"axis {d.axis} of input {d.input_name!r}, declared dynamic as {d.name!r},{const} during capture: "
        f"the model's code forces it to one size, so the ONNX model would only work for that size",
        where=where,
        hint=(
            "rewrite the Python loop or branch over this size with torch.ops.higher_order.scan "
            "(or torch.cond / while_loop), or pass rewrite_control_flow=True to to_onnx; "
            f"if the size really is fixed, drop axis {d.axis} of {top_name!r} from dynamic_shapes"
        ),
    )


# ---------------------------------------------------------------------------------- capture
def capture(model: Any, args: tuple, kwargs: dict | None, dynamic_shapes: Any, strict: bool = False,
            rewritten: bool = False, other_axes: str = "static") -> Captured:
    """Run ``torch.export.export`` and check that every declared dynamic axis stayed symbolic.

    Args:
        model: ``torch.nn.Module`` or ``torch.export.ExportedProgram`` (taken as is).
        args, kwargs: example inputs (tensors, Python scalars, nested tuples/lists/dicts).
        dynamic_shapes: any form ``torch.export.export`` takes, with plain strings as dim names.
        strict: use torch.export's strict (TorchDynamo) mode.
        rewritten: the model's control flow was already rewritten (the hints then say what is left).
        other_axes: ``"static"`` (axes ``dynamic_shapes`` does not name keep the example's size, as
            in torch.export) or ``"auto"`` (they are ``Dim.AUTO``: dynamic where the model allows).

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
        top = [(n, None) for n in _program_input_names(model)]
        return Captured(model, [n for n, _ in top], _declared_from_program(model))
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
        with record_specializations(records), record_guards(events), symbolic_math(), size_oblivious(oblivious), \
                registry.capture_hooks(), transformer_encoder_as_eager():
            return torch.export.export(model, args, kwargs, dynamic_shapes=torch_spec, strict=strict,
                                       prefer_deferred_runtime_asserts_over_guards=True)

    # attempts: as given; with the ranges torch requires of dims named without one; reasoning
    # size-obliviously when a guard is only about sizes 0 and 1
    oblivious, first = small, None
    for _ in range(6):
        try:
            program = export(oblivious)
            break
        except Exception as e:  # noqa: BLE001 - classified below, original chained
            error = _classify(e, declared, records, top, events)
            if rewritten and isinstance(error, SpecializationError) and error.hint and \
                    "rewrite_control_flow" in error.hint:
                error = SpecializationError(error.what, where=error.where, hint=_REWRITTEN_HINT)
            if not isinstance(error, SpecializationError):
                needed = {n: v for n, v in violation_ranges(str(e), events, declared, promised).items()
                          if ranges.get(n) != v.torch}
                if needed:
                    for n, v in needed.items():
                        ranges[n], promised[n], narrowed[n] = v.torch, v.promised, v.guards
                    continue
            first = first or (error, e)
            suggested = {n: r for n, r in _required_ranges(str(e)).items() if n in strings and ranges.get(n) != r}
            if suggested:
                ranges.update(suggested)
            elif not oblivious and (_is_size_guard(error) or isinstance(error, SpecializationError)):
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
    variables = size_vars(_user_placeholders(program), names, declared, promised)
    decided, variables = decide_captured(program, variables, events, ranges)
    guards = [g for n in narrowed for g in narrowed[n]] + decided
    for guard in guards:
        if guard.status == "adopted":
            warnings.warn(adopted_warning(guard), UserWarning, stacklevel=3)
    return Captured(program, names, declared, guards, variables)


def adopted_warning(guard: Guard) -> str:
    """The one warning an adopted constraint gets: the constraint, the user's line, what it excludes."""
    where = f" (required at {guard.where})" if guard.where else ""
    names = ", ".join(guard.names)
    return (f"the export holds for {guard.text} only{where}: it excludes {excluded_text(guard.excluded)}; "
            f"onnxport adopted this constraint for {names} (ExportResult.constraints); declare "
            f"Dim(name, min=..., max=...) to set the range yourself")


def _top_name(d: DeclaredDim, top: list[tuple[str, Any]]) -> str:
    for n, _ in top:
        if d.input_name == n or d.input_name.startswith(n + "_"):
            return n
    return d.input_name


def _pinned(text: str, declared: list[DeclaredDim], events: list, top) -> SpecializationError | None:
    """A range violation whose narrowed range is one size: the model's code pinned the dimension
    (a Python loop over it, ``int()`` of it)."""
    for name, source in re.findall(r"Not all values of (\w+) = (\S+) in the specified range", text):
        pinned = [ev for ev in events if ev.kind == "range" and source in ev.sources and ev.upper == ev.lower]
        d = next((d for d in declared if d.name == name), None)
        if pinned and d is not None:
            return _specialization_error(d, int(pinned[0].lower), pinned[0].branch or pinned[0].where, _top_name(d, top))
    return None


def _classify(e: Exception, declared: list[DeclaredDim], records: list, top, events: list = ()) -> Exception:
    inner = e
    while inner is not None and not isinstance(inner, ExportError):
        inner = inner.__cause__ or inner.__context__
    if isinstance(inner, ExportError):  # raised on purpose by a capture hook: keep it whole
        return inner
    text = str(e)
    m = re.search(r"tracing inferred a static shape of (\d+) for dimension inputs\['(\w+)'\]\.shape\[(\d+)\]", text)
    if m:  # Dim.DYNAMIC pinned to one size
        value, top_name, axis = int(m.group(1)), m.group(2), int(m.group(3))
        d = next((d for d in declared if d.input_name == top_name and d.axis == axis), None)
        source = f"L['{top_name}'].size()[{axis}]"
        pinned = [ev for ev in events if ev.kind == "range" and source in ev.sources and ev.upper == ev.lower]
        where = (pinned[0].branch or pinned[0].where) if pinned else next(
            (f for srcs, _, f in records if _source_matches(srcs, top_name, axis, top_name)), None)
        if d is not None:
            return _specialization_error(d, value, where, top_name)
    if "Constraints violated" in text or "specialized it to be a constant" in text:
        pinned = _pinned(text, declared, events, top)
        if pinned is not None:
            return pinned
        m = re.search(r"You marked (\S+) as dynamic but your code specialized it to be a constant \((-?\d+)\)", text)
        name, value = (m.group(1), int(m.group(2))) if m else (None, None)
        for d in declared:
            if name is not None and (d.name == name or _source_matches([name], d.input_name, d.axis, _top_name(d, top))):
                where = None
                for sources, const, frame in records:
                    if _source_matches(sources, d.input_name, d.axis, _top_name(d, top)):
                        where, value = frame, const if value is None else value
                        break
                if where is None and records:
                    where = records[0][2]
                return _specialization_error(d, value, where, _top_name(d, top))
        guard = re.search(r"Not all values of (\w+) = (\S+) in the specified range(?: [^\n]*?)? satisfy the generated guard (.+?)\.?\n", text)
        if guard:
            return DynamicShapesError(
                _pretty_sources(f"dimension {guard.group(1)} ({guard.group(2)}) cannot take every size: the model's "
                                f"code requires {guard.group(3).strip()}"),
                hint=(_suggested_fixes(text) or "narrow the dimension's range with Dim(name, min=..., max=...)")
                + "; if the model branches on this size, write the branch with torch.cond (or pass "
                  "rewrite_control_flow=True)",
            )
        return SpecializationError(text.split("\n\nThe error above")[0], hint=_suggested_fixes(text) or None)
    if "dynamic_shapes" in text or "Dim" in type(e).__name__ or "Expected dynamic_shapes" in text:
        return DynamicShapesError(f"torch.export rejected dynamic_shapes: {text.splitlines()[0] if text else e!r}",
                                  hint="check the spec against torch.export's dynamic_shapes documentation")
    where = None
    tb = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
    frames = "".join(traceback.format_list(tb))
    where = last_user_frame(frames)
    first = text.splitlines()[0] if text else repr(e)
    return CaptureError(f"torch.export could not capture the model: {type(e).__name__}: {first}", where=where,
                        hint="make the model's forward run on the example inputs; try strict=False/True, "
                             "or check data-dependent Python control flow (torch.cond, scan)")


def _required_ranges(text: str) -> dict[str, tuple]:
    """``{name: (min, max)}`` from torch's suggested fixes ``time = Dim('time', min=7)``."""
    out = {}
    for m in re.finditer(r"(\w+) = Dim\('(\w+)'(?:, min=(\d+))?(?:, max=(\d+))?\)", text):
        if m.group(3) or m.group(4):
            out[m.group(2)] = (int(m.group(3)) if m.group(3) else None, int(m.group(4)) if m.group(4) else None)
    return out


def _is_size_guard(error: Exception) -> bool:
    """A guard error about a size being 0 or 1 (``!= 1``, ``!= 0``, ``>= 2``)."""
    text = getattr(error, "what", "")
    return isinstance(error, DynamicShapesError) and "cannot take every size" in text and \
        any(k in text for k in ("!= 1", "!= 0", ">= 2", "> 1"))


def _pretty_sources(text: str) -> str:
    """``L['x'].size()[1]`` -> ``x.shape[1]`` in torch's messages."""
    return re.sub(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]", r"\1.shape[\2]", text)


def _suggested_fixes(text: str) -> str:
    """torch.export's "Suggested fixes:" lines, joined."""
    if "Suggested fixes:" not in text:
        return ""
    tail = text.split("Suggested fixes:", 1)[1].split("\n\n")[0]
    fixes = [line.strip() for line in tail.splitlines() if line.strip()]
    return "torch.export suggests: " + "; ".join(fixes) if fixes else ""


def _check_specialization(program, names, declared, records, top) -> None:
    placeholders = _user_placeholders(program)
    by_name = dict(zip(names, placeholders))
    for d in declared:
        node = by_name.get(d.input_name)
        if node is None or not d.strict:
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and isinstance(val.shape[d.axis], int):
            where = next((f for s, c, f in records if _source_matches(s, d.input_name, d.axis, _top_name(d, top))), None)
            raise _specialization_error(d, int(val.shape[d.axis]), where, _top_name(d, top))


def _user_placeholders(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    by_name = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    out = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT:
            out.append(by_name.get(getattr(spec.arg, "name", None)))
    return out


def _program_input_names(program: torch.export.ExportedProgram) -> list[str]:
    return [getattr(s.arg, "name", f"input_{i}") for i, s in enumerate(program.graph_signature.input_specs)
            if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]


def _declared_from_program(program: torch.export.ExportedProgram) -> list[DeclaredDim]:
    """The named dims of an ExportedProgram: torch's shape environment keeps each ``Dim``'s name
    (``L['x'].size()[0]`` -> ``rows``); the program's placeholder names are the input names."""
    declared = []
    for name, node in zip(_program_input_names(program), _user_placeholders(program)):
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


# ---------------------------------------------------------------------------------- decomposition
def decompose(program: torch.export.ExportedProgram, has_translation) -> torch.export.ExportedProgram:
    """Decompose to core ATen only the ops without a translation (all of a graph's ops, nested
    bodies included). A program whose every op translates directly is returned unchanged."""
    missing = set()

    def visit(gm: torch.fx.GraphModule) -> None:
        for node in gm.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                if has_translation(node.target) is None:
                    missing.add(node.target)
            if node.op == "get_attr":
                sub = getattr(gm, node.target, None)
                if isinstance(sub, torch.fx.GraphModule):
                    visit(sub)

    visit(program.graph_module)
    if not missing:
        return program
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if has_translation(op) is not None:
            table.pop(op)
    with registry.capture_hooks():  # ops kept whole during capture stay whole here
        return program.run_decompositions(table)
