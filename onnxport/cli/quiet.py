"""A quiet terminal: what other libraries print while a command runs is held back.

During an export, libraries other than onnxport write to stderr: warnings (transformers'
deprecations, ``FutureWarning``\\ s), log lines (torch's ``W1204 ...`` lines from ``torch._export``
and ``torch.fx``, torchao's ``Failed to load ...`` on import), progress bars, and C++ messages
written straight to file descriptor 2. ``hold_foreign_output`` sends all of it to a temporary file
instead of the terminal (``--verbose`` shows it): file descriptor 2 points at the file, and so does
``sys.stderr``; the command's own lines go to ``terminal()``, the stderr the command started with.

Warnings are sorted by the module that issued them: onnxport's own are printed as ``onnxport:
warning: ...`` (not with ``--quiet``), those of the user's code (outside installed packages and the
standard library) as Python prints them, those of installed libraries are held. Where the caller
of the command records warnings itself (``warnings.catch_warnings(record=True)``, pytest), every
warning goes to it, as without this module: a library user filters onnxport's ``UserWarning``\\ s as usual.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
import sysconfig
import tempfile
import warnings
from typing import Any, Iterator, TextIO

from onnxport.errors import in_site_packages

_TERMINAL: list[TextIO] = []  # the terminal while output is held (innermost last)
_LIBRARIES = tuple({os.path.realpath(p) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                                                   sysconfig.get_paths()["platlib"])})


@dataclasses.dataclass
class Held:
    """What other libraries printed while output was held: ``text`` (set when the holding ends)."""

    text: str = ""

    @property
    def lines(self) -> list[str]:
        """The held text's non-empty lines."""
        return [line for line in self.text.splitlines() if line.strip()]


def terminal() -> TextIO:
    """Where the command's own lines go: the stderr it started with while output is held, else
    ``sys.stderr``."""
    return _TERMINAL[-1] if _TERMINAL else sys.stderr


@contextlib.contextmanager
def hold_foreign_output(show: bool = False, quiet: bool = False) -> Iterator[Held]:
    """Hold back what other libraries write to stderr while the block runs (see the module).

    Args:
        show: hold nothing (``--verbose``, ``--debug``): every line reaches the terminal.
        quiet: print onnxport's own warnings neither (``--quiet``).

    Yields:
        ``Held``, whose ``text`` is what was held once the block ends. When the block raises an
        exception other than ``onnxport.ExportError`` (a crash, whose traceback follows), the held
        text is printed first: it may say why.
    """
    held = Held()
    if show or sys.stderr is None:
        yield held
        return
    original = sys.stderr
    with contextlib.suppress(Exception):
        original.flush()
    sink = tempfile.TemporaryFile(mode="w+b")
    saved = _redirect_fd2(sink.fileno())
    screen = original if saved is None or not _is_fd2(original) else \
        open(saved, "w", buffering=1, encoding=getattr(original, "encoding", None) or "utf-8",
             errors="backslashreplace", closefd=False)
    held_stream = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False) \
        if saved is not None else io.TextIOWrapper(sink, encoding="utf-8", errors="backslashreplace",
                                                   line_buffering=True, write_through=True)
    _TERMINAL.append(screen)
    crashed = False
    try:
        with contextlib.redirect_stderr(held_stream), warnings.catch_warnings():
            _route_warnings(screen, held_stream, quiet)
            yield held
    except BaseException as e:
        from onnxport.errors import ExportError

        crashed = not isinstance(e, (ExportError, SystemExit, KeyboardInterrupt))
        raise
    finally:
        with contextlib.suppress(Exception):
            held_stream.flush()
        _TERMINAL.remove(screen)
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        held.text = sink.read().decode("utf-8", "backslashreplace")
        sink.close()
        if crashed and held.text.strip():
            print(held.text.rstrip("\n"), file=original, flush=True)


def _is_fd2(stream: Any) -> bool:
    """True when ``stream`` writes to file descriptor 2 (the process's stderr, not a capture of it)."""
    try:
        return stream.fileno() == 2
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return False


def _redirect_fd2(target: int) -> int | None:
    """Point file descriptor 2 at ``target``; returns a copy of the old one, None when fd 2 is closed."""
    try:
        saved = os.dup(2)
    except OSError:
        return None
    os.dup2(target, 2)
    return saved


def _route_warnings(screen: TextIO, held: TextIO, quiet: bool) -> None:
    """Install the ``warnings.showwarning`` that sorts warnings by who issued them (see the module);
    nothing when the caller records warnings itself."""
    if warnings.showwarning is not warnings._showwarning_orig or \
            getattr(warnings._showwarnmsg_impl, "__module__", None) != "warnings":
        return  # warnings.catch_warnings(record=True) or a showwarning of the caller's: it decides

    def show(message, category, filename, lineno, file=None, line=None):
        module, path = _issuer()
        if module.startswith("onnxport.") or module == "onnxport":
            if not quiet:
                print(f"onnxport: warning: {message}", file=screen, flush=True)
            return
        text = warnings.formatwarning(message, category, filename, lineno, line)
        if _installed(path):
            held.write(text)
        elif not quiet:
            screen.write(text)

    warnings.showwarning = show


def _installed(path: str) -> bool:
    """True for a file of the standard library or an installed package (or frozen, generated code)."""
    if path.startswith("<") or in_site_packages(path):
        return True
    return os.path.realpath(path).startswith(_LIBRARIES)


def _issuer() -> tuple[str, str]:
    """(module name, file) of the code that issued the warning being shown: the first frame outside
    ``warnings`` and this module."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in ("warnings", __name__):
        frame = frame.f_back
    if frame is None:
        return "", ""
    return str(frame.f_globals.get("__name__", "")), frame.f_code.co_filename
