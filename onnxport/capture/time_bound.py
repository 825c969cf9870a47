"""A time bound on one torch.export call, and where in the user's code the time went.

A capture fallback (torch.export asked again after a failed capture: another range, size-oblivious
reasoning, a rewritten model, strict mode, one piece of a range) traces the whole model again; where
torch's symbolic reasoning on the new request grows without end (sympy simplifying ever larger size
expressions), the export would run for minutes or hours without a word. ``time_bound(seconds)`` stops
the block it guards once ``seconds`` have passed: a timer thread raises ``Expired`` in the thread
running the block (``PyThreadState_SetAsyncExc``, delivered at its next bytecode, so it interrupts the
Python code torch and sympy run in, not a single C call) and clears a pending one if the block ended
first. ``Expired`` is a ``BaseException``, so the ``except Exception`` blocks of torch's tracing do not
swallow it; the context managers torch entered unwind as for any exception.

``spent_at(expired)`` reads the stopped stack: the innermost frame of the user's code (outside torch,
onnxport, the standard library and the symbolic-math libraries torch calls: sympy, mpmath), the line
whose tracing the time was spent in.
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import threading
import traceback
from typing import Iterator

from onnxport.errors import is_internal_path

_TOOLS = re.compile(r"(^|[/\\])(sympy|mpmath)[/\\]")


class Expired(BaseException):
    """Raised in the thread running a ``time_bound`` block when its time has passed."""


def _raise_in(thread_id: int, exception: type | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exception) if exception is not None else None)


@contextlib.contextmanager
def time_bound(seconds: float | None) -> Iterator[None]:
    """Run the block, raising ``Expired`` in it once ``seconds`` have passed (None: no bound).

    Raises:
        Expired: the block ran longer than ``seconds``; where the block was when stopped is on the
            exception's traceback (``spent_at``).
    """
    if seconds is None:
        yield
        return
    thread_id, lock, state = threading.get_ident(), threading.Lock(), {"running": True, "raised": False}

    def expire() -> None:
        with lock:
            if state["running"]:
                state["raised"] = True
                _raise_in(thread_id, Expired)

    timer = threading.Timer(max(float(seconds), 0.0), expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["running"] = False
            if state["raised"]:
                _raise_in(thread_id, None)  # not delivered yet: the block ended before it was


def spent_at(expired: BaseException) -> str | None:
    """``'file:line in func: code'`` of the innermost frame of the user's code on ``expired``'s
    traceback (see the module docstring), or None when no such frame was running."""
    found = None
    for frame in traceback.extract_tb(expired.__traceback__):
        if not is_internal_path(frame.filename) and not _TOOLS.search(frame.filename):
            code = (frame.line or "").strip()
            found = f"{frame.filename}:{frame.lineno} in {frame.name}" + (f": {code}" if code else "")
    return found
