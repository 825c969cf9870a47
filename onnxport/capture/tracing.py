"""One torch.export call, with the patches every trace installs, and what it gave (``Traced``).

The patches of a trace, in the order they are installed: what torch prints held back
(``HOLD_OUTPUT``), the guard records (``capture.guards.record``), ``SYMBOLIC_MATH``, ``ASSERTED_DIVISION``,
``BOOL_ARGUMENTS``,
``SIZE_OBLIVIOUS`` (when the state asks for it), the patches of the translations
(``OpSupport.capture_patches``), the user's ``capture_hooks``, ``TRANSFORMER_ENCODER_AS_EAGER``,
``TF_SAME_PADDING``, ``SYMBOLIC_TORCH_INT``, ``SYMBOLIC_LEN``, ``UNCONDITIONAL_PADDING_CUT``,
``SYMBOLIC_SIZE_DIVISION``, ``SIZE_TENSORS``, ``SYMBOLIC_PATCH_GRID``, ``JIT_TRACING_PATHS``, ``DISTRIBUTION_CHECKS_OFF``, ``KNOWN_SCALARS``, the deferred range check, ``EXPLICIT_SIGNATURE``,
``SLIDING_WINDOW_AS_FULL``, ``META_WEIGHTS_ON_CPU`` (a model with weights on the meta device), then the patches
steps added (``CaptureState.patches``).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import math
import sys
import torch

from onnxport.capture.assert_division import ASSERTED_DIVISION
from onnxport.capture.bool_arguments import BOOL_ARGUMENTS
from onnxport.capture.caches import SLIDING_WINDOW_AS_FULL
from onnxport.capture.classify import REWRITTEN_HINT, classify
from onnxport.capture.distributions import DISTRIBUTION_CHECKS_OFF
from onnxport.capture.eager_paths import TRANSFORMER_ENCODER_AS_EAGER
from onnxport.capture.jit_tracing import JIT_TRACING_PATHS
from onnxport.capture.size_forms import SYMBOLIC_LEN, SYMBOLIC_TORCH_INT, TF_SAME_PADDING
from onnxport.capture.guards import DEFER_RANGE_VIOLATIONS, RECORD_GUARDS, RECORD_SPECIALIZATIONS, RECORD_UNBACKED
from onnxport.capture.padded_chunks import UNCONDITIONAL_PADDING_CUT
from onnxport.capture.patch_grid import SYMBOLIC_PATCH_GRID
from onnxport.capture.size_division import SYMBOLIC_SIZE_DIVISION
from onnxport.capture.size_tensors import SIZE_TENSORS
from onnxport.capture.whole_chunks import WHOLE_CHUNKS
from onnxport.capture.padded_sizes import ROUNDED_PADDING
from onnxport.capture.random_sizes import NO_GENERATOR_KEYWORD
from onnxport.capture.sinusoidal_tables import SINUSOIDAL_TABLES
from onnxport.capture.relative_tables import RELATIVE_TABLES
from onnxport.capture.padding_masks import KEPT_PADDING_MASK
from onnxport.capture.uniform_images import UNIFORM_IMAGE_BATCH
from onnxport.capture.length_regulator import LENGTH_REGULATOR
from onnxport.capture.relative_shift import RELATIVE_SHIFT_GATHER
from onnxport.capture.same_name_axes import SAME_NAME_AXES
from onnxport.capture.meta_weights import META_WEIGHTS_ON_CPU, has_meta_weights
from onnxport.capture.patches import Patch, SetAttribute, SetConfig, installed, register
from onnxport.capture.scalar_values import KNOWN_SCALARS
from onnxport.capture.signature import EXPLICIT_SIGNATURE, absorbed_keywords
from onnxport.capture.state import CaptureState, Traced
from onnxport.errors import SpecializationError

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
    "the size to its example value"))


def _size_oblivious_changes() -> list:
    import torch.fx.experimental._config as fx_config

    return [SetConfig(fx_config, "backed_size_oblivious", True)]


SIZE_OBLIVIOUS = register(Patch(
    "size-oblivious reasoning", _size_oblivious_changes,
    "an example size of 0 or 1 on a dynamic axis: torch reasons about sizes without specializing them "
    "(torch.fx.experimental._config.backed_size_oblivious), so the axis stays dynamic"))


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
    "for the error's detail after one that fails", (io.StringIO(),)))


def trace_patches(state: CaptureState, lists: dict[str, list], held: io.StringIO) -> list:
    """The patches one trace installs (see the module docstring), with the lists they record into."""
    request = state.request
    ops = tuple(request.ops.capture_patches) if request.ops is not None else ()
    signature = [EXPLICIT_SIGNATURE.using(request.model, request.args, request.kwargs)] \
        if absorbed_keywords(request.model, request.kwargs) else []
    return [HOLD_OUTPUT.using(held), RECORD_SPECIALIZATIONS.using(lists["records"]),
            RECORD_GUARDS.using(lists["events"]), RECORD_UNBACKED.using(lists["unbacked"]), SYMBOLIC_MATH, ASSERTED_DIVISION,
            BOOL_ARGUMENTS, *([SIZE_OBLIVIOUS] if state.oblivious else []), *ops, *request.hooks, TRANSFORMER_ENCODER_AS_EAGER,
            TF_SAME_PADDING, SYMBOLIC_TORCH_INT, SYMBOLIC_LEN, UNCONDITIONAL_PADDING_CUT, SYMBOLIC_SIZE_DIVISION,
            SIZE_TENSORS, WHOLE_CHUNKS, NO_GENERATOR_KEYWORD, ROUNDED_PADDING, SINUSOIDAL_TABLES, RELATIVE_TABLES,
            KEPT_PADDING_MASK,
            UNIFORM_IMAGE_BATCH, LENGTH_REGULATOR, RELATIVE_SHIFT_GATHER,
            SAME_NAME_AXES.using(request.model, request.declared),
            SYMBOLIC_PATCH_GRID, JIT_TRACING_PATHS, DISTRIBUTION_CHECKS_OFF, KNOWN_SCALARS.using(request.model),
            DEFER_RANGE_VIOLATIONS.using(lists["violations"]), *signature, SLIDING_WINDOW_AS_FULL,
            *([META_WEIGHTS_ON_CPU] if has_meta_weights(request.model) else []), *state.patches]


def trace(state: CaptureState) -> Traced:
    """Call torch.export with the state's ranges and relations, under the trace's patches.

    Returns what it gave: the program (with a range violation torch found after tracing, if any),
    or torch's exception and the ``ExportError`` it means (``classify``). KeyboardInterrupt and
    other non-``Exception``s propagate, every patch restored.
    """
    request = state.request
    torch._dynamo.reset()  # tracer state left by an earlier capture breaks nested control flow
    lists: dict[str, list] = {"records": [], "events": [], "unbacked": [], "violations": []}
    held = io.StringIO()
    spec = request.torch_spec(state.ranges, state.derived)
    program, exception = None, None
    try:
        with installed(*trace_patches(state, lists, held)):
            program = torch.export.export(request.model, request.args, request.kwargs, dynamic_shapes=spec,
                                          strict=request.strict, prefer_deferred_runtime_asserts_over_guards=True)
    except Exception as e:  # noqa: BLE001 - classified below, kept on the error
        exception = e
    recorded = {k: tuple(v) for k, v in lists.items() if k != "violations"}
    if program is not None:
        sys.stderr.write(held.getvalue())
        return Traced(program, violation=lists["violations"][0] if lists["violations"] else None, **recorded)
    traced = Traced(exception=exception, output=held.getvalue(), **recorded)
    return failed(state, traced, exception)


def failed(state: CaptureState, traced: Traced, exception: BaseException) -> Traced:
    """``traced`` as a failure with ``exception`` and the ``ExportError`` it means."""
    request = state.request
    error = classify(exception, request.declared, traced.records, request.top, traced.events, traced.unbacked)
    if request.rewritten and isinstance(error, SpecializationError) and error.hint and \
            "rewrite_control_flow" in error.hint:
        error = SpecializationError(error.what, where=error.where, hint=REWRITTEN_HINT)
    return dataclasses.replace(traced, program=None, exception=exception, error=error, violation=None)


def describe(traced: Traced) -> str:
    """One line on a trace, for ``Captured.attempts``."""
    if traced.program is not None:
        return "captured" + (" (torch found a declared range violated)" if traced.violation is not None else "")
    first = traced.text.strip().splitlines()[0][:160] if traced.text.strip() else ""
    printed = len(traced.output.splitlines())
    held = f"; torch printed {printed} lines (held)" if printed else ""
    return f"torch.export failed: {type(traced.exception).__name__}: {first}{held}"

