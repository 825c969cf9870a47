"""Patches active while torch.export traces: they record or change how sizes are reasoned about.

- ``record_specializations``: note each symbol torch pins to a constant, with the user's line;
- ``record_guards``: note each condition on sizes torch defers to run time and each range it
  narrows, with the user's line and whether the user's own code branched on it;
- ``defer_range_violations``: keep the traced program when a declared range does not hold, for
  onnxport to decide;
- ``symbolic_math``: ``math.sqrt(x.size(1))`` and friends stay symbolic;
- ``size_oblivious``: sizes 0 and 1 are not specialized (``backed_size_oblivious``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
import os
import sys
import traceback
from typing import Any

import torch

from onnxport.errors import is_internal_path


@contextlib.contextmanager
def record_specializations(records: list):
    """Record (symbol sources, constant, user frame) whenever torch pins a symbol to a constant."""
    from torch.fx.experimental import symbolic_shapes as ss

    original = ss.ShapeEnv._set_replacement

    def patched(self, a, tgt, msg):
        try:
            if getattr(tgt, "is_number", False):
                frame = user_frame()
                sources = [s.name for s in self.var_to_sources.get(a, [])]
                records.append((sources, int(tgt), frame))
        except Exception:  # noqa: BLE001 - recording must never change capture
            pass
        return original(self, a, tgt, msg)

    ss.ShapeEnv._set_replacement = patched
    try:
        yield
    finally:
        ss.ShapeEnv._set_replacement = original


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


_TORCH_INIT = os.path.join("torch", "__init__.py")


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

    original_defer = ss.ShapeEnv.guard_or_defer_runtime_assert
    original_range = ss.ShapeEnv._update_var_to_range
    original_rel = ss.ShapeEnv._maybe_guard_rel
    seen: set[int] = set()
    causes: list = []  # the conditions being applied, innermost last

    def guard_rel(self, expr):
        causes.append(expr)
        try:
            return original_rel(self, expr)
        finally:
            causes.pop()

    def defer(self, orig_expr, msg, fx_node=None):
        before = self.num_deferred_runtime_asserts
        causes.append(orig_expr)
        try:
            out = original_defer(self, orig_expr, msg, fx_node)
        finally:
            causes.pop()
        if self.num_deferred_runtime_asserts != before:
            try:
                where, branch = user_frame(), branch_frame()
                for ras in self.deferred_runtime_asserts.values():
                    for ra in ras:
                        if id(ra) not in seen:
                            seen.add(id(ra))
                            events.append(GuardEvent("assert", expr=ra.expr, where=where, branch=branch))
            except Exception:  # noqa: BLE001 - recording must never change capture
                pass
        return out

    def narrow(self, symbol, vr, vr_sloc=None, *, is_constraint=False):
        old = self.var_to_range.get(symbol)
        out = original_range(self, symbol, vr, vr_sloc, is_constraint=is_constraint)
        new = self.var_to_range.get(symbol)
        if old is not None and new != old:
            try:
                sources = tuple(s.name for s in self.var_to_sources.get(symbol, []))
                events.append(GuardEvent("range", symbol=symbol, lower=new.lower, upper=new.upper, sources=sources,
                                         where=user_frame(), branch=branch_frame(),
                                         cause=causes[-1] if causes else None))
            except Exception:  # noqa: BLE001 - recording must never change capture
                pass
        return out

    ss.ShapeEnv.guard_or_defer_runtime_assert = defer
    ss.ShapeEnv._update_var_to_range = narrow
    ss.ShapeEnv._maybe_guard_rel = guard_rel
    try:
        yield
    finally:
        ss.ShapeEnv.guard_or_defer_runtime_assert = original_defer
        ss.ShapeEnv._update_var_to_range = original_range
        ss.ShapeEnv._maybe_guard_rel = original_rel


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

    saved = {}
    for name in _MATH_ON_SIZES:
        sym = getattr(torch, f"_sym_{name}", None)
        if sym is None:
            continue
        original = getattr(math, name)
        saved[name] = original

        def wrapped(x, _sym=sym, _orig=original):
            if isinstance(x, (torch.SymInt, torch.SymFloat)):
                return _sym(x)
            return _orig(x)

        setattr(math, name, wrapped)
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(math, name, original)


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
