"""Patches active while torch.export traces: they record or change how sizes are reasoned about.

- ``record_specializations``: note each symbol torch pins to a constant, with the user's line;
- ``symbolic_math``: ``math.sqrt(x.size(1))`` and friends stay symbolic;
- ``size_oblivious``: sizes 0 and 1 are not specialized (``backed_size_oblivious``).
"""

from __future__ import annotations

import contextlib
import traceback

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
