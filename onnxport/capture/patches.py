"""Patches active while torch.export traces: they record or change how sizes are reasoned about.

- ``record_specializations``: note each symbol torch pins to a constant, with the user's line;
- ``record_guards``: note each condition on sizes torch defers to run time and each range it
  narrows, with the user's line and whether the user's own code branched on it;
- ``defer_range_violations``: keep the traced program when a declared range does not hold, for
  onnxport to decide;
- ``symbolic_math``: ``math.sqrt(x.size(1))`` and friends stay symbolic;
- ``size_oblivious``: sizes 0 and 1 are not specialized (``backed_size_oblivious``).

torch.export is not thread-safe and these patches change torch for the whole process, so every
patch is installed under ``CAPTURE_LOCK`` (re-entrant; ``to_onnx`` holds it for a whole export, so
a second thread waits) by ``patched``, which always restores the original (on return, on error,
on KeyboardInterrupt) and never wraps a wrapper: an attribute still holding an onnxport patch is
restored to the function underneath.
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
import os
import sys
import threading
import traceback
from typing import Any, Callable

import torch

from onnxport.errors import is_internal_path

CAPTURE_LOCK = threading.RLock()
_ORIGINAL = "__onnxport_original__"


def original_of(value: Any) -> Any:
    """The function an onnxport patch replaced (``value`` itself when it is not a patch)."""
    while hasattr(value, _ORIGINAL):
        value = getattr(value, _ORIGINAL)
    return value


@contextlib.contextmanager
def exclusive_capture():
    """Hold ``CAPTURE_LOCK``: one export (capture and the steps after it) at a time in this process."""
    with CAPTURE_LOCK:
        yield


@contextlib.contextmanager
def patched(owner: Any, name: str, make: Callable[[Any], Any]):
    """Set ``owner.name`` to ``make(original)`` while the block runs, under ``CAPTURE_LOCK``;
    yields the original. The original is put back whatever ends the block."""
    with CAPTURE_LOCK:
        original = original_of(getattr(owner, name))
        replacement = make(original)
        try:
            setattr(replacement, _ORIGINAL, original)
        except (AttributeError, TypeError):  # a builtin cannot carry the mark
            pass
        try:
            setattr(owner, name, replacement)
            yield original
        finally:
            setattr(owner, name, original)


def restore_leftovers(owners: list[tuple[Any, str]]) -> list[str]:
    """Put back the original of every ``(owner, name)`` that still holds an onnxport patch (a
    capture interrupted where no ``finally`` could run); returns the names restored."""
    restored = []
    with CAPTURE_LOCK:
        for owner, name in owners:
            value = getattr(owner, name, None)
            if value is not None and hasattr(value, _ORIGINAL):
                setattr(owner, name, original_of(value))
                restored.append(f"{getattr(owner, '__name__', owner)}.{name}")
    return restored


@contextlib.contextmanager
def record_specializations(records: list):
    """Record (symbol sources, constant, user frame) whenever torch pins a symbol to a constant."""
    from torch.fx.experimental import symbolic_shapes as ss

    def make(original):
        def patched_set_replacement(self, a, tgt, msg):
            try:
                if getattr(tgt, "is_number", False):
                    frame = user_frame()
                    sources = [s.name for s in self.var_to_sources.get(a, [])]
                    records.append((sources, int(tgt), frame))
            except Exception:  # noqa: BLE001 - recording must never change capture
                pass
            return original(self, a, tgt, msg)

        return patched_set_replacement

    with patched(ss.ShapeEnv, "_set_replacement", make):
        yield


@dataclasses.dataclass
class GuardEvent:
    """A condition on sizes torch.export's trace relies on, as it was met during tracing.

    ``kind`` is ``"assert"`` (a condition torch deferred to run time: ``expr`` is the sympy boolean)
    or ``"range"`` (torch narrowed ``symbol``'s range to ``lower..upper`` from a condition it could
    solve for that symbol). ``where`` is the user's line; ``branch`` the user's line when the user's
    own code turned the condition into a Python bool (``if``, ``while``, ``and``, ``min()``...).
    """

    kind: str
    expr: Any = None
    symbol: Any = None
    lower: Any = None
    upper: Any = None
    sources: tuple = ()
    where: str | None = None
    branch: str | None = None
    cause: Any = None  # for a range: the condition torch solved for the symbol (sympy boolean), if known
    layout: bool = False  # met while torch computed strides or contiguity (``layout_only``)


_TORCH_INIT = os.path.join("torch", "__init__.py")
_PRIMS_COMMON = os.path.join("torch", "_prims_common", "__init__.py")
# torch's stride and contiguity computations (torch/_prims_common): a condition met inside them
# picks a memory layout for a value, never the value
_LAYOUT_FUNCTIONS = frozenset({
    "check_all_strides", "check_contiguous_sizes_strides", "is_contiguous", "is_contiguous_or_false",
    "is_channels_last_contiguous", "is_channels_last_contiguous_2d", "is_channels_last_contiguous_3d",
    "is_channels_last_contiguous_or_false", "is_channels_last_contiguous_or_false_2d",
    "is_channels_last_contiguous_or_false_3d", "is_contiguous_for_memory_format",
    "is_contiguous_for_memory_format_or_false", "_is_non_overlapping_and_dense_or_false",
    "is_non_overlapping_and_dense_or_false", "is_non_overlapping_and_dense",
    "compute_elementwise_output_logical_to_physical_perm", "compute_elementwise_output_strides",
    "suggest_memory_format", "make_contiguous_strides_for", "make_channels_last_strides_for",
    "make_channels_last_1d_strides_for", "make_channels_last_2d_strides_for", "make_channels_last_3d_strides_for",
})


def layout_only() -> bool:
    """True while torch computes strides or contiguity (a function of ``torch/_prims_common``
    listed above is on the stack): the condition being met decides a memory layout, which ONNX
    tensors do not have, and no value of the model."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name in _LAYOUT_FUNCTIONS and f.f_code.co_filename.endswith(_PRIMS_COMMON):
            return True
        f = f.f_back
    return False


def branch_frame() -> str | None:
    """``file:line in func: code`` of the user's code that is turning a SymBool into a Python bool
    right now (an ``if`` / ``while`` / ``and`` / ``min()`` on sizes), or None when torch itself
    asks (an operator's size check) or the user's line is an ``assert``."""
    f = sys._getframe(1)
    while f is not None and not (f.f_code.co_name == "__bool__" and f.f_code.co_filename.endswith(_TORCH_INIT)):
        f = f.f_back
    while f is not None and f.f_code.co_filename.endswith(_TORCH_INIT):
        f = f.f_back
    if f is None or is_internal_path(f.f_code.co_filename):
        return None
    code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    if code.startswith("assert "):
        return None
    return f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}: {code}"


@contextlib.contextmanager
def record_guards(events: list):
    """Append a ``GuardEvent`` for each condition torch defers to run time and each symbol range it
    narrows while tracing (``prefer_deferred_runtime_asserts_over_guards=True``)."""
    from torch.fx.experimental import symbolic_shapes as ss

    seen: set[int] = set()
    causes: list = []  # the conditions being applied, innermost last

    def make_guard_rel(original_rel):
        def guard_rel(self, expr):
            causes.append(expr)
            try:
                return original_rel(self, expr)
            finally:
                causes.pop()

        return guard_rel

    def make_defer(original_defer):
        def defer(self, orig_expr, msg, fx_node=None):
            before = self.num_deferred_runtime_asserts
            causes.append(orig_expr)
            try:
                out = original_defer(self, orig_expr, msg, fx_node)
            finally:
                causes.pop()
            if self.num_deferred_runtime_asserts != before:
                try:
                    where, branch, layout = user_frame(), branch_frame(), layout_only()
                    for ras in self.deferred_runtime_asserts.values():
                        for ra in ras:
                            if id(ra) not in seen:
                                seen.add(id(ra))
                                events.append(GuardEvent("assert", expr=ra.expr, where=where, branch=branch,
                                                         layout=layout))
                except Exception:  # noqa: BLE001 - recording must never change capture
                    pass
            return out

        return defer

    def make_narrow(original_range):
        def narrow(self, symbol, vr, vr_sloc=None, *, is_constraint=False):
            old = self.var_to_range.get(symbol)
            out = original_range(self, symbol, vr, vr_sloc, is_constraint=is_constraint)
            new = self.var_to_range.get(symbol)
            if old is not None and new != old:
                try:
                    sources = tuple(s.name for s in self.var_to_sources.get(symbol, []))
                    events.append(GuardEvent("range", symbol=symbol, lower=new.lower, upper=new.upper,
                                             sources=sources, where=user_frame(), branch=branch_frame(),
                                             cause=causes[-1] if causes else None, layout=layout_only()))
                except Exception:  # noqa: BLE001 - recording must never change capture
                    pass
            return out

        return narrow

    with patched(ss.ShapeEnv, "guard_or_defer_runtime_assert", make_defer), \
            patched(ss.ShapeEnv, "_update_var_to_range", make_narrow), \
            patched(ss.ShapeEnv, "_maybe_guard_rel", make_guard_rel), \
            patched(ss.DimConstraints, "prettify_results", _tolerant_prettify), \
            patched(ss.DimConstraints, "solve", _tolerant_solve):
        yield


def _tolerant_solve(original):
    """torch's ``DimConstraints.solve`` simplifies the conditions on the dims with sympy, to suggest
    fixes for a violation, and fails on one sympy cannot solve (``Eq(-x/32 + (x/16)//2, 0)`` from
    timm's DLA, whose levels halve the size five times): the whole capture then fails. Patched:
    such a failure leaves the conditions unsolved; onnxport decides every one of them itself."""

    def solve(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - sympy's refusals only; anything else is raised
            if isinstance(e, NotImplementedError) or type(e).__module__.startswith("sympy"):
                return None
            raise

    return solve


def _tolerant_prettify(original):
    """torch's ``DimConstraints.prettify_results`` formats the suggested fixes of a constraint
    violation, and fails on a relation it does not expect (``8/3 <= d1`` from ``x[..., 1:][..., 1:]``
    on a batch of 3), hiding the violation itself. Patched: the violation is raised without the
    suggestions then, and onnxport decides the guard from its own records."""

    def prettify_results(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except AssertionError:
            return ""

    return prettify_results


@contextlib.contextmanager
def defer_range_violations(violations: list):
    """torch.export's check of the declared ranges, run after tracing, records its
    ``ConstraintViolationError`` in ``violations`` instead of raising: the traced program is kept,
    and onnxport decides each violation itself (``capture.guard_events.violation_ranges``) without
    tracing the model a second time."""
    from torch.export import _trace
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    original = _trace.produce_guards_and_solve_constraints

    def checked(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except ConstraintViolationError as e:
            violations.append(e)
            return None

    _trace.produce_guards_and_solve_constraints = checked
    try:
        yield
    finally:
        _trace.produce_guards_and_solve_constraints = original


_MATH_ON_SIZES = ("sqrt", "cos", "sin", "tan", "cosh", "sinh", "tanh", "acos", "asin", "atan", "log2")


@contextlib.contextmanager
def symbolic_math():
    """``math.sqrt(x.size(1))`` and friends on symbolic sizes stay symbolic during capture
    (``torch._sym_sqrt``...) instead of pinning the size to its example value."""
    import math

    with contextlib.ExitStack() as stack:
        for name in _MATH_ON_SIZES:
            sym = getattr(torch, f"_sym_{name}", None)
            if sym is None:
                continue

            def make(original, _sym=sym):
                def wrapped(x):
                    if isinstance(x, (torch.SymInt, torch.SymFloat)):
                        return _sym(x)
                    return original(x)

                return wrapped

            stack.enter_context(patched(math, name, make))
        yield


def patch_sites() -> list[tuple[Any, str]]:
    """Every ``(owner, attribute)`` the capture-time patches of this module and of
    ``capture.eager_paths`` replace (for ``restore_leftovers`` and for tests)."""
    import math

    from torch import nn
    from torch.fx.experimental import symbolic_shapes as ss

    return ([(ss.ShapeEnv, n) for n in ("_set_replacement", "guard_or_defer_runtime_assert", "_update_var_to_range",
                                         "_maybe_guard_rel")]
            + [(ss.DimConstraints, "prettify_results")]
            + [(math, n) for n in _MATH_ON_SIZES] + [(nn.TransformerEncoder, "forward")])


@contextlib.contextmanager
def size_oblivious(enabled: bool):
    """An example size of 0 or 1 on a dynamic axis: let torch reason about sizes without
    specializing them (``backed_size_oblivious``), so the axis stays dynamic."""
    if not enabled:
        yield
        return
    import torch.fx.experimental._config as fx_config

    with fx_config.patch(backed_size_oblivious=True):
        yield


def user_frame() -> str | None:
    for f in reversed(traceback.extract_stack()):
        if is_internal_path(f.filename):
            continue
        return f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
    return None
