"""What torch.export's failures mean for the user: each becomes an ``ExportError`` naming the
input, axis and dimension, the user's line and what to do."""

from __future__ import annotations

import re
import sys
import traceback
from typing import Any

import torch

from onnxport.capture.dynamic_shapes import DeclaredDim, int_oo_or_none
from onnxport.capture.data_dependent import data_dependent_error, is_data_dependent
from onnxport.errors import (CaptureError, ControlFlowError, DynamicShapesError, ExportError, SpecializationError,
                             is_internal_path, last_user_frame)


MESSAGE_LIMIT = 400  # characters of torch's message an error repeats (sympy guards run to thousands)


def capped(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was; the whole message stays on the
    error torch raised, which the ExportError is raised from (shown in full with ``--debug``)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters; the whole message with --debug, or in the error's __cause__)"


def source_matches(sources: list[str], input_name: str, axis: int, top_name: str) -> bool:
    """Whether one of torch's symbol sources (``L['x'].size()[1]``) is axis ``axis`` of the input."""
    for s in sources:
        if f".size()[{axis}]" in s and (f"['{top_name}']" in s or f"['{input_name}']" in s):
            return True
    return False


REWRITTEN_HINT = ("rewrite_control_flow=True left this construct as written (see the warning listing what "
                   "it did not rewrite and why): write it with torch.ops.higher_order.scan, torch.cond or "
                   "while_loop, or drop the axis from dynamic_shapes if the size really is fixed")


def static_axes_of_size(value: int | None, top, declared: list[DeclaredDim], d: DeclaredDim) -> list[str]:
    """The static axes of the model's other tensor inputs (``top``: forward's parameters and values)
    whose example size is ``value``: an elementwise op or a matmul with one of them makes ``d`` that
    size (``"axis 1 of 'y'"``)."""
    if value is None or value in (0, 1):
        return []
    dynamic = {(e.input_name, e.axis) for e in declared}
    out = []
    for name, v in top:
        if not isinstance(v, torch.Tensor) or name == d.input_name:
            continue
        out += [f"axis {a} of {name!r}" for a, n in enumerate(v.shape) if int(n) == value and (name, a) not in dynamic]
    return out


def specialization_error(d: DeclaredDim, value: int | None, where: str | None, top_name: str,
                         static_axes: list[str] = ()) -> SpecializationError:
    """The error for a declared dynamic axis that came out constant (``value``), at the user's line
    ``where``; ``static_axes``: other inputs' static axes of that size (``static_axes_of_size``)."""
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
            (f"if it meets {' or '.join(static_axes[:3])} (static, {value} in this export) in an elementwise "
             f"op or a matmul, declare that axis dynamic too, with the same name {d.name!r}; otherwise " if static_axes
             else "")
            + "rewrite the Python loop or branch over this size with torch.ops.higher_order.scan "
            "(or torch.cond / while_loop), or pass rewrite_control_flow=True to to_onnx; "
            f"if the size really is fixed, drop axis {d.axis} of {top_name!r} from dynamic_shapes"
        ),
    )


def top_level_name(d: DeclaredDim, top: list[tuple[str, Any]]) -> str:
    for n, _ in top:
        if d.input_name == n or d.input_name.startswith(n + "_"):
            return n
    return d.input_name


def _pinned(text: str, declared: list[DeclaredDim], events: list, top) -> SpecializationError | None:
    """A range violation whose narrowed range is one size: the model's code pinned the dimension
    (a Python loop over it, ``int()`` of it)."""
    found = []  # (index of the event, the declared dim whose size it pins, the event)
    for name, source in re.findall(r"Not all values of (\w+) = (\S+) in the specified range", text):
        named = [d for d in declared if d.name == name]  # every axis of that name: it is pinned where one is
        for i, ev in enumerate(events):
            if ev.kind != "range" or ev.upper != ev.lower:
                continue
            d = next((n for n in named if source_matches(ev.sources, n.input_name, n.axis, top_level_name(n, top))),
                     named[0] if named and source in ev.sources else None)
            if d is not None:
                found.append((i, d, ev))
                break
    if not found:
        return None
    _, d, first = min(found, key=lambda f: f[0])  # the first the model's code pinned
    value = int(first.lower)
    return specialization_error(d, value, first.branch or first.where, top_level_name(d, top),
                                static_axes_of_size(value, top, declared, d))


def _guard_line(guard: re.Match, declared: list[DeclaredDim], events: list) -> str | None:
    """The user's line of the first range torch narrowed for the violated guard's dim (``guard``: ``Not
    all values of <name> = <source> ... satisfy the generated guard <condition>``; any axis declared
    under that name), the one whose lower bound the guard states where one does; None where no range
    event names the dim."""
    sources = {guard.group(2)} | {f"L['{d.input_name}'].size()[{d.axis}]" for d in declared
                                  if d.name == guard.group(1)}
    ranges = [ev for ev in events if ev.kind == "range" and sources & set(ev.sources) and ev.where]
    lower = re.match(r"(\d+) <= ", guard.group(3).strip())
    stated = [ev for ev in ranges if lower and int_oo_or_none(ev.lower) == int(lower.group(1))]
    found = stated or ranges
    return found[0].where if found else None


def _layout_bound(guard: re.Match, d: DeclaredDim, events: list) -> SpecializationError | None:
    """A violated range bounded from above only by conditions torch met computing a memory layout
    (``GuardEvent.layout``: ``is_contiguous`` of a feature map whose side, computed from the dim, is
    1 at the example; MobileViTv2's last stage at image 64 bounds image to ``<= 96``). Traced in
    that range, torch reads the computed side as the constant 1, and the model fails at larger
    sizes: the error says so, for the retrace at a larger example (``computed_one``)."""
    upper = re.search(r"<= (\d+)\s*$", guard.group(3).strip())
    if upper is None or d.max is not None:
        return None
    bounding = [ev for ev in events if ev.kind == "range" and guard.group(2) in ev.sources
                and int_oo_or_none(ev.upper) == int(upper.group(1))]
    if not bounding or not all(ev.layout for ev in bounding):
        return None
    return SpecializationError(
        f"axis {d.axis} of input {d.input_name!r}, declared dynamic as {d.name!r}, is bounded at this example: "
        f"{d.name} <= {upper.group(1)}, where a size computed from it is 1 (torch decided a memory layout on it, "
        "and read the size as the constant 1)", where=bounding[0].where,
        hint=f"give an example input with a larger {d.name}, so that this size is 2 or more; onnxport validates "
             f"other sizes afterwards", computed_one=(d, None), layout_bound=True)


def _unexpected_specialization(text: str, declared: list[DeclaredDim], events: list, top) -> SpecializationError | None:
    """torch's ``Specializations unexpectedly required (seq)!``: solving the guards left one size for
    a declared dim, with no guard naming the dim's own source (a size computed from it pinned: a
    padded length that is one chunk at the example). The dim, its size and the line of the first
    equality guard met while tracing (``Eq(chunks, 1)`` at a reshape)."""
    m = re.search(r"Specializations unexpectedly required \(([^)]*)\)", text)
    if not m:
        return None
    names = [n.strip() for n in m.group(1).split(",")]
    d = next((d for d in declared if d.name in names), None)
    if d is None:
        return None
    value = re.search(r"resulted in a specialized value of (-?\d+)", text)
    pinned = [ev for ev in events if (ev.kind == "range" and ev.upper == ev.lower)
              or (ev.kind == "assert" and type(ev.expr).__name__ == "Equality" and ev.expr.free_symbols
                  and any(not a.free_symbols for a in ev.expr.args))]
    where = (pinned[0].branch or pinned[0].where) if pinned else None
    size = int(value.group(1)) if value else None
    one = [a for a in pinned[0].expr.args if not a.free_symbols] if pinned and pinned[0].kind == "assert" else []
    if one and one[0] in (0, 1):
        at = f" = {size}" if size is not None else ""
        error = SpecializationError(
            f"axis {d.axis} of input {d.input_name!r}, declared dynamic as {d.name!r}, became a constant during "
            f"capture: at the example's {d.name}{at}, a size computed from it is {one[0]} here (a length padded to "
            f"whole chunks that is one chunk, a count of windows), and torch.export specializes sizes 0 and 1",
            where=where,
            hint=f"give an example input with a larger {d.name}, so that this size is 2 or more; onnxport validates "
                 f"other sizes ({d.name} = 1 included) afterwards",
            computed_one=(d, size))  # size: None when torch's message does not give it
        return error
    return specialization_error(d, size, where, top_level_name(d, top))


def classify(e: Exception, declared: list[DeclaredDim], records: list, top, events: list = (),
             unbacked: list = (), model: Any = None) -> Exception:
    """The ``ExportError`` torch.export's failure ``e`` means for the user.

    Args:
        e: what torch.export raised.
        declared: the declared dims; ``top``: forward's parameters and values.
        records: the specializations recorded while tracing (``guards.record.Specialization``);
        events: the guard events (``GuardEvent``); unbacked: the data-dependent sizes made
            (``Unbacked``).
        model: the module traced, whose ``forward`` is the line named for a call that could not
            be bound to it (a ``TypeError`` raised before any of the user's code ran).
    """
    # an exception the caller is handling is older than this capture: the chain is not followed
    # into it (an export retried inside the handler of its first failure)
    outer = sys.exc_info()[1]
    inner = e
    while inner is not None and not isinstance(inner, ExportError):
        inner = inner.__cause__ or inner.__context__
        inner = None if inner is outer else inner
    if isinstance(inner, ExportError):  # raised on purpose by a capture patch: keep it whole
        return inner
    text = str(e)
    if "aliasing during higher order op tracing" in text:
        return _aliasing_error(e)
    if is_data_dependent(e):
        return data_dependent_error(e, list(unbacked))
    m = re.search(r"tracing inferred a static shape of (\d+) for dimension inputs\['(\w+)'\]\.shape\[(\d+)\]", text)
    if m:  # Dim.DYNAMIC pinned to one size
        value, top_name, axis = int(m.group(1)), m.group(2), int(m.group(3))
        d = next((d for d in declared if d.input_name == top_name and d.axis == axis), None)
        source = f"L['{top_name}'].size()[{axis}]"
        pinned = [ev for ev in events if ev.kind == "range" and source in ev.sources and ev.upper == ev.lower]
        where = (pinned[0].branch or pinned[0].where) if pinned else next(
            (f for srcs, _, f in records if source_matches(srcs, top_name, axis, top_name)), None)
        if d is not None:
            return specialization_error(d, value, where, top_name, static_axes_of_size(value, top, declared, d))
    unexpected = _unexpected_specialization(text, declared, events, top)
    if unexpected is not None:
        return unexpected
    if "Constraints violated" in text or "specialized it to be a constant" in text:
        pinned = _pinned(text, declared, events, top)
        if pinned is not None:
            return pinned
        m = re.search(r"You marked (\S+) as dynamic but your code specialized it to be a constant \((-?\d+)\)", text)
        name, value = (m.group(1), int(m.group(2))) if m else (None, None)
        named = [d for d in declared if name is not None and (
            d.name == name or source_matches([name], d.input_name, d.axis, top_level_name(d, top)))]
        if named:  # the axis of that name (several inputs may share it) the model fixed first, and its line
            d, where = named[0], records[0][2] if records else None
            for sources, const, frame in records:
                first = next((n for n in named if source_matches(sources, n.input_name, n.axis,
                                                                 top_level_name(n, top))), None)
                if first is not None:
                    d, where, value = first, frame, const if value is None else value
                    break
            return specialization_error(d, value, where, top_level_name(d, top),
                                        static_axes_of_size(value, top, declared, d))
        guard = re.search(r"Not all values of (\w+) = (\S+) in the specified range(?: [^\n]*?)? "
                          r"satisfy the generated guard (.+?)\.?(?:\n|$)", text)
        one = re.fullmatch(r"(\d+) <= (\S+) and \2 <= \1", guard.group(3).strip()) if guard else None
        d = next((d for d in declared if guard and d.name == guard.group(1)), None)
        if one and d is not None:  # the model's code pins the size (a Python loop over it): a specialization
            top_name = top_level_name(d, top)
            where = next((frame for sources, _, frame in records if source_matches(sources, d.input_name, d.axis,
                                                                                       top_name)), None)
            value = int(one.group(1))
            return specialization_error(d, value, where, top_name, static_axes_of_size(value, top, declared, d))
        bounded = _layout_bound(guard, d, events) if guard and d is not None else None
        if bounded is not None:
            return bounded
        if guard:
            return DynamicShapesError(
                _pretty_sources(f"dimension {guard.group(1)} ({guard.group(2)}) cannot take every size: the model's "
                                f"code requires {guard.group(3).strip()}"), where=_guard_line(guard, declared, events),
                hint=(_suggested_fixes(text) or "narrow the dimension's range with Dim(name, min=..., max=...)")
                + "; if the model branches on this size, write the branch with torch.cond (or pass "
                  "rewrite_control_flow=True)",
            )
        lines = text.split("\n\nThe error above")[0].splitlines()
        return SpecializationError("\n".join(capped(line) for line in lines),
                                   hint=_suggested_fixes(text) or None)
    if "dynamic_shapes" in text or "Dim" in type(e).__name__ or "Expected dynamic_shapes" in text:
        first = capped(text.splitlines()[0]) if text else repr(e)
        return DynamicShapesError(f"torch.export rejected dynamic_shapes: {first}",
                                  hint="check the spec against torch.export's dynamic_shapes documentation")
    tb = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
    frames = "".join(traceback.format_list(tb))
    where = last_user_frame(frames) or _traced_line(e)
    if where is None and isinstance(e, TypeError) and model is not None:
        where = forward_line(model)
    kind, first = _what_failed(e, text)
    hint = "make the model's forward run on the example inputs; try strict=False/True, " \
           "or check data-dependent Python control flow (torch.cond, scan)"
    if re.search(r"ScanOp\.__call__\(\) got an unexpected keyword argument '(dim|reverse)'", text):
        hint = ("torch.ops.higher_order.scan(combine_fn, init, xs, additional_inputs) takes no dim or reverse: "
                "call torch._higher_order_ops.scan.scan(combine_fn, init, xs, dim=..., reverse=...), which moves "
                "the scanned axis and flips it for you")
    return CaptureError(f"torch.export could not capture the model: {kind}: {first}", where=where,
                        hint=hint)


def _what_failed(e: BaseException, text: str) -> tuple[str, str]:
    """``(type name, first line)`` of the error torch.export's failure ``e`` stands for: the error
    TorchDynamo met running an op on fake tensors (``got RuntimeError('a and b must have same
    reduction dim...')`` in its explanation), or the exception the traced code raised (``raised
    exception ValueError('...')`` in its debug context), rather than its own ``RuntimeError when
    making fake tensor call`` or ``Observed exception``, which say only that something failed;
    ``e``'s own otherwise."""
    for pattern in (r"^\s*Explanation:.*?: got (\w+)\((['\"])(.+?)\2\)\s*$",
                    r"^\s*Developer debug context: raised exception (\w+)\((['\"])(.+?)\2\)\s*$"):
        inner = re.search(pattern, text, re.M)
        if inner:
            return inner.group(1), capped(inner.group(3).splitlines()[0])
    first = next((line for line in text.splitlines() if line.strip()), "")
    return type(e).__name__, capped(first.strip()) if first else repr(e)


def _traced_line(e: BaseException) -> str | None:
    """The user's line TorchDynamo was tracing when it raised ``e`` (its ``real_stack``: the frames
    of the code it traced, which the exception's own traceback does not hold)."""
    stack = getattr(e, "real_stack", None)
    if not stack:
        return None
    try:
        return last_user_frame("".join(traceback.format_list(stack)))
    except Exception:  # noqa: BLE001 - a stack of another form names no line
        return None


def forward_line(model: Any) -> str | None:
    """``file:line in forward: def forward(...)``: where ``model``'s forward is defined."""
    import inspect

    fn = getattr(model, "forward", model)
    fn = getattr(fn, "__wrapped__", fn)
    try:
        path = inspect.getsourcefile(fn)
        lines, start = inspect.getsourcelines(fn)
    except (TypeError, OSError):
        return None
    at = next((i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "async def "))), 0)
    return f"{path}:{start + at} in {getattr(fn, '__name__', 'forward')}: {lines[at].strip()}"


def _aliasing_error(e: BaseException) -> ControlFlowError:
    """torch.export's refusal of a cond/while_loop/map body that returns one of its inputs
    (``Encountered aliasing during higher order op tracing``): the operator, the user's line and
    the ``.clone()`` fix."""
    m = re.search(r"Higher Order Operator: (\S+)", str(e))
    op = m.group(1) if m else "a higher-order op"
    return ControlFlowError(
        f"a {op} body returns one of its inputs unchanged: return input.clone() instead of input",
        where=_user_line(e),
        hint="in the branch/body function, replace `return x` by `return x.clone()` for every output "
             "that is one of its inputs (control-flow bodies must return new tensors)")


def _user_line(e: BaseException) -> str | None:
    """The innermost frame of ``e``'s traceback outside torch, onnxport and the standard library."""
    for f in reversed(traceback.extract_tb(e.__traceback__)):
        p = f.filename
        if is_internal_path(p):
            continue
        return f"{p}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
    return None


def required_ranges(text: str) -> dict[str, tuple]:
    """``{name: (min, max)}`` from torch's suggested fixes ``time = Dim('time', min=7)``, or, for a dim torch
    suggests nothing for, from the range its violation states (``Not all values of image = L['x'].size()[3]
    ... satisfy the generated guard 57 <= L['x'].size()[3] and L['x'].size()[3] <= IntInfinity()``: a lower
    bound torch's solver found, for which it prints no fix)."""
    out = {}
    for m in re.finditer(r"(\w+) = Dim\('(\w+)'(?:, min=(\d+))?(?:, max=(\d+))?\)", text):
        if m.group(3) or m.group(4):
            out[m.group(2)] = (int(m.group(3)) if m.group(3) else None, int(m.group(4)) if m.group(4) else None)
    for m in _STATED_RANGE.finditer(text):
        lo, hi = int(m.group(3)), int(m.group(4)) if m.group(4).isdigit() else None
        if m.group(1) not in out and (hi is None or lo < hi):  # one size: a specialization, reported as such
            out[m.group(1)] = (lo, hi)
    return out


_STATED_RANGE = re.compile(r"Not all values of (\w+) = (\S+) in the specified range(?: [^\n]*?)? satisfy the generated "
                           r"guard (\d+) <= \2 and \2 <= (\d+|IntInfinity\(\)|int_oo|oo)\.?$", re.MULTILINE)


def derived_dims(text: str) -> dict[str, tuple[str, int, int]]:
    """``{name: (base, k, c)}`` from torch's suggested fixes relating one dimension to another
    (``u = t + 1``, ``y_len = 2*x_len``, ``v = t - 1``): ``name = k*base + c``."""
    if "Suggested fixes:" not in text:
        return {}
    tail = text.split("Suggested fixes:", 1)[1].split("\n\n")[0]
    out = {}
    for line in tail.splitlines():
        m = re.fullmatch(r"\s*(\w+) = (?:(\d+)\*)?([A-Za-z_]\w*)(?: ([+-]) (\d+))?\s*", line)
        if m and m.group(3) != "Dim":
            c = int(m.group(5) or 0) * (-1 if m.group(4) == "-" else 1)
            out[m.group(1)] = (m.group(3), int(m.group(2) or 1), c)
    return out


def is_size_guard(error: Exception) -> bool:
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
