"""One torch.export call, with the patches every trace installs, and what it gave (``Traced``).

The patches of a trace are the registered ones whose ``when`` applies to it (``TraceContext``: the
capture state, the trace's record lists, what torch prints held), in their ``order``
(``capture.patches.every_trace``; the module doc of ``capture/patches.py`` gives the scale), with the
user's ``capture_hooks`` at ``USER_HOOKS``, then the patches steps added (``CaptureState.patches``).
Nothing here lists them: a patch says when and where it is installed where it is defined (the
capture core's own in ``capture/``, a library's in ``onnxport/library/``, loaded with onnxport).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import math
import sys
import torch

from onnxport.capture.classify import REWRITTEN_HINT, classify
from onnxport.capture.patches import (USER_HOOKS, Patch, SetAttribute, SetConfig, always, every_trace, installed,
                                      register)
from onnxport.capture.state import CaptureState, Request, Traced
from onnxport.capture.time_bound import Expired, spent_at, time_bound
from onnxport.errors import CaptureTimeoutError, SpecializationError


@dataclasses.dataclass(frozen=True)
class TraceContext:
    """What a patch's ``when`` reads of the torch.export call about to run: the capture state and the
    lists the trace's records go to (``Traced``'s fields), and the buffer what torch prints is held in."""

    state: CaptureState
    held: io.StringIO
    records: list
    events: list
    unbacked: list
    violations: list

    @property
    def request(self) -> Request:
        return self.state.request


def translating(trace: TraceContext) -> bool:
    """``when`` of the patches that come with the export's translations (an ATen op kept whole): every
    trace of an export that translates; the whole-program decomposition installs them too
    (``translate.registry.Translations.capture_patches``)."""
    return trace.request.ops is not None


MATH_ON_SIZES = ("sqrt", "cos", "sin", "tan", "cosh", "sinh", "tanh", "acos", "asin", "atan", "log2")


def _symbolic_math_changes() -> list:
    changes = []
    for name in MATH_ON_SIZES:
        sym = getattr(torch, f"_sym_{name}", None)
        if sym is None:
            continue

        def make(original, _sym=sym):
            def wrapped(x):
                if isinstance(x, (torch.SymInt, torch.SymFloat)):
                    return _sym(x)
                return original(x)

            return wrapped

        changes.append(SetAttribute(math, name, make))
    return changes


SYMBOLIC_MATH = register(Patch(
    "symbolic math", _symbolic_math_changes,
    "math.sqrt(x.size(1)) and friends on symbolic sizes stay symbolic (torch._sym_sqrt...) instead of pinning "
    "the size to its example value", when=always, order=10))


def _size_oblivious_changes() -> list:
    import torch.fx.experimental._config as fx_config

    return [SetConfig(fx_config, "backed_size_oblivious", True)]


SIZE_OBLIVIOUS = register(Patch(
    "size-oblivious reasoning", _size_oblivious_changes,
    "an example size of 0 or 1 on a dynamic axis: torch reasons about sizes without specializing them "
    "(torch.fx.experimental._config.backed_size_oblivious), so the axis stays dynamic",
    when=lambda trace: trace.state.oblivious, order=13))


def _torch_log_handlers() -> list[logging.StreamHandler]:
    """The handlers of torch's loggers writing to the process's stderr (torch installs its own)."""
    loggers = [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict) if n.split(".")[0] == "torch"]
    return [h for lg in loggers for h in lg.handlers
            if type(h) is logging.StreamHandler and h.stream in (sys.stderr, sys.__stderr__)]


def _hold_output_changes(held: io.StringIO) -> list:
    return [SetAttribute(sys, "stderr", lambda original: held),
            *(SetAttribute(h, "stream", lambda original: held) for h in _torch_log_handlers())]


HOLD_OUTPUT = register(Patch(
    "hold torch's output", _hold_output_changes,
    "sys.stderr and the stream of torch's log handlers: what is printed and logged while torch.export traces "
    "(its graph dumps on a failure, repeated warnings) is held; written out after a trace that succeeds, kept "
    "for the error's detail after one that fails", (io.StringIO(),), when=lambda trace: (trace.held,), order=0))


def trace_patches(state: CaptureState, lists: dict[str, list], held: io.StringIO) -> list:
    """The patches one trace installs (see the module docstring), with the lists they record into."""
    context = TraceContext(state, held, **lists)
    return [*every_trace(context, [(USER_HOOKS, state.request.hooks)]), *state.patches]


def trace(state: CaptureState) -> Traced:
    """Call torch.export with the state's ranges and relations, under the trace's patches.

    Returns what it gave: the program (with a range violation torch found after tracing, if any),
    or torch's exception and the ``ExportError`` it means (``classify``). A fallback's call (a retrace,
    or any trace of a capture that is itself a fallback: ``bound``) stopped at its time bound is a
    failure whose error is a ``CaptureTimeoutError`` (``stopped``). KeyboardInterrupt and other
    non-``Exception``s propagate, every patch restored.
    """
    request = state.request
    torch._dynamo.reset()  # tracer state left by an earlier capture breaks nested control flow
    lists: dict[str, list] = {"records": [], "events": [], "unbacked": [], "violations": []}
    held = io.StringIO()
    spec = request.torch_spec(state.ranges, state.derived)
    program, exception, seconds = None, None, bound(state)
    try:
        with installed(*trace_patches(state, lists, held)), time_bound(seconds):
            program = torch.export.export(request.model, request.args, request.kwargs, dynamic_shapes=spec,
                                          strict=request.strict, prefer_deferred_runtime_asserts_over_guards=True)
    except Exception as e:  # noqa: BLE001 - classified below, kept on the error
        exception = e
    except Expired as e:
        recorded = {k: tuple(v) for k, v in lists.items() if k != "violations"}
        return Traced(exception=e, error=stopped(state, seconds, e), output=held.getvalue(), **recorded)
    recorded = {k: tuple(v) for k, v in lists.items() if k != "violations"}
    if program is not None:
        sys.stderr.write(held.getvalue())
        return Traced(program, violation=lists["violations"][0] if lists["violations"] else None, **recorded)
    traced = Traced(exception=exception, output=held.getvalue(), **recorded)
    return failed(state, traced, exception)


def bound(state: CaptureState) -> float | None:
    """The time bound of the state's next torch.export call: ``request.fallback_seconds`` for a
    retrace (a capture step's fallback) or any trace of a capture that is a fallback itself
    (``request.fallback``); None for the first trace of the export."""
    request = state.request
    return request.fallback_seconds if state.traces > 0 or request.fallback else None


def stopped(state: CaptureState, seconds: float, expired: Expired) -> CaptureTimeoutError:
    """The error of a trace stopped at its time bound: the fallback (``state.why``), the user's line
    torch was tracing (``time_bound.spent_at``), the failure the fallback answered (``state.answered``)
    and what to do."""
    why = state.why or "traced as a fallback of the capture"
    answered = state.answered.error if state.answered is not None else None
    first = "" if answered is None else \
        f"the trace before it failed ({answered.summary}{f', at {answered.where}' if answered.where else ''}); "
    return CaptureTimeoutError(
        f"a capture fallback ({why}) ran longer than {seconds:g} s and was stopped while torch traced the line below",
        where=spent_at(expired),
        hint=f"{first}make the model traceable where that failure says, so that no fallback is needed, or give "
             f"to_onnx(fallback_seconds=...) more time (None: no bound)")


def failed(state: CaptureState, traced: Traced, exception: BaseException) -> Traced:
    """``traced`` as a failure with ``exception`` and the ``ExportError`` it means."""
    request = state.request
    error = classify(exception, request.declared, traced.records, request.top, traced.events, traced.unbacked,
                     model=request.model)
    if request.rewritten and isinstance(error, SpecializationError) and error.hint and \
            "rewrite_control_flow" in error.hint:
        error = error.with_hint(REWRITTEN_HINT)  # the branch, its condition and sizes carried
    return dataclasses.replace(traced, program=None, exception=exception, error=error, violation=None)


def describe(traced: Traced) -> str:
    """One line on a trace, for ``Captured.attempts``."""
    if traced.program is not None:
        return "captured" + (" (torch found a declared range violated)" if traced.violation is not None else "")
    first = traced.text.strip().splitlines()[0][:160] if traced.text.strip() else ""
    printed = len(traced.output.splitlines())
    held = f"; torch printed {printed} lines (held)" if printed else ""
    return f"torch.export failed: {type(traced.exception).__name__}: {first}{held}"

