"""The one error hierarchy of onnxport.

Every error says what failed, where in the user's model (the source line recorded by torch.export
in the FX node's ``stack_trace``), and what to do about it.
"""

from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import re
import sys
import sysconfig
from typing import Any


_STDLIB = sysconfig.get_paths()["stdlib"]


def _package_dirs(*names: str) -> tuple[str, ...]:
    """The directories of the installed packages ``names``, as found and resolved, each ending in a separator:
    a file of theirs starts with one (a directory of another package or project named ``torch``, keras'
    ``backend/torch/``, is not torch)."""
    out = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            folder = os.path.dirname(spec.origin)
            out += [os.path.join(folder, ""), os.path.join(os.path.realpath(folder), "")]
    return tuple(dict.fromkeys(out))


_INTERNAL = _package_dirs("torch", "onnxport")


# code compiled from a string has a pseudo file name (``<string>`` of ``exec`` / ``compile``, ``python -c``, a
# piped script, ``<stdin>``, ``<console>``, IPython's ``<ipython-input-...>``, any name a package gives,
# ``<generated>``, the methods ``dataclasses`` and ``namedtuple`` generate); these are torch's and Python's own
_GENERATED_INTERNAL = ("<eval_with_key>", "<frozen ")
_COMPILER = tuple(os.path.join(d, "_dynamo", "") for d in _package_dirs("torch"))  # torch's compiler


def is_internal_frame(frame: Any) -> bool:
    """``is_internal_path`` of a frame's file, except for code compiled from a string (a pseudo file name:
    ``<string>``, ``<stdin>``, ``<ipython-input-...>``, ``<generated>``; not torch.fx's ``<eval_with_key>``
    or a frozen standard library module): that is the user's, unless its module (its
    globals' ``__name__``) is a file of torch, onnxport or the standard library, or it is a method
    ``dataclasses`` generates for an installed package's class, or it is called by torch's compiler (the guard
    functions ``torch._dynamo`` compiles from strings, while ``torch.cond`` traces its sides). A package's own
    code compiled from a string (a function it builds with ``exec``) is not internal: its branches are
    branches, judged as the user's."""
    path = frame.f_code.co_filename
    if not path.startswith("<") or path.startswith(_GENERATED_INTERNAL):
        return is_internal_path(path)
    caller = frame.f_back
    if caller is not None and caller.f_code.co_filename.startswith(_COMPILER):
        return True
    module = sys.modules.get(frame.f_globals.get("__name__", ""))
    file = getattr(module, "__file__", None) or ""
    if not file or is_internal_path(file):
        return bool(file)
    if in_site_packages(file):  # a package's own code from a string is its code;
        return frame.f_code.co_qualname.startswith("__create_fn__.")  # the methods dataclasses makes are not
    return False


_FUNCTOOLS = functools.__file__  # ``total_ordering``'s comparisons


def passes_through(frame: Any) -> bool:
    """Whether ``frame`` runs a method a library made for a class (``dataclasses``' ``__eq__``, attrs'
    ``<attrs generated eq>``, ``functools.total_ordering``'s ``__ge__``): a size it turns into a bool is
    decided for the code that called it, the code to name and judge."""
    code = frame.f_code
    return (code.co_qualname.startswith("__create_fn__.") or code.co_filename.startswith("<attrs generated")
            or code.co_filename == _FUNCTOOLS)


def in_site_packages(path: str) -> bool:
    """Whether ``path`` is a file of an installed package (``site-packages``, Debian's ``dist-packages``)."""
    return "site-packages" in path or "dist-packages" in path


def frame_line(frame: Any) -> str:
    """``file:line in func: code`` of ``frame`` (the code as ``linecache`` reads it, empty where there is no source)."""
    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}: {code}"


def is_internal_path(path: str) -> bool:
    """True for frames of torch, onnxport, the standard library or generated code (``<eval_with_key>``).
    An installed package's file is no standard library file where its ``site-packages`` lies inside the
    standard library's directory (a Python without a virtual environment: conda, system and Docker
    Pythons)."""
    return path.startswith(_INTERNAL) or path.startswith("<") or (path.startswith(_STDLIB)
                                                                   and not in_site_packages(path))


def user_source_line(node: Any) -> str | None:
    """Return ``'file.py:LINE in func: code'`` for the innermost user frame of an FX node.

    ``node`` is a ``torch.fx.Node`` (or anything with a ``meta`` dict holding ``stack_trace``).
    Frames inside torch itself are skipped. Returns None when torch recorded no trace.
    """
    meta = getattr(node, "meta", None) or {}
    trace = meta.get("stack_trace")
    if not trace:
        return None
    return last_user_frame(trace)


def last_user_frame(trace: str) -> str | None:
    """Pick the innermost frame outside torch and onnxport from a formatted Python stack trace."""
    lines = trace.strip().splitlines()
    best = None
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith('File "'):
            path = line.split('"')[1]
            code = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].strip().startswith('File "') else ""
            if not is_internal_path(path):
                rest = line.split('"', 2)[2]  # , line N, in func
                parts = [p.strip() for p in rest.split(",") if p.strip()]
                lineno = parts[0].replace("line ", "") if parts else "?"
                func = parts[1].replace("in ", "") if len(parts) > 1 else "?"
                best = f"{path}:{lineno} in {func}: {code}" if code else f"{path}:{lineno} in {func}"
        i += 1
    return best


FIRST_LINE_LIMIT = 200  # characters of an error's first line; the rest follows as detail
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BREAKS = (": ", "; ", ". ", " (", ", ")
_MORE = " (detail below)"
# an exception's type name last (``...: RuntimeError``), and one before its text (``RuntimeError: ``)
_TYPE_LAST = re.compile(r"(^|[\s:(])[A-Za-z_.]*(Error|Exception|Warning|Interrupt|Exit)$")
_TYPE_NAMED = re.compile(r"\b[A-Z][A-Za-z_.]*(Error|Exception|Warning|Interrupt|Exit): ")


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes (torch's messages carry some)."""
    return _ANSI.sub("", text)


def split_message(message: str, limit: int = FIRST_LINE_LIMIT) -> tuple[str, str]:
    """``(summary, detail)``: the message's first line cut to at most ``limit`` characters at a
    clause boundary outside brackets, and the rest.

    The cut is the last boundary that leaves a third of the line or more (``: ``, ``; ``, ``. ``
    first, then `` (`` and ``, ``), else the last ``: ``, ``; `` or ``. `` after 16 characters, else
    the last space; never one that leaves an exception's type name last (``...: RuntimeError``) or
    cuts within 16 characters after ``SomeError: ``, which would say that something failed but not
    what. A message whose first line fits is returned
    whole as the summary (its other lines as detail).
    """
    message = strip_ansi(message).strip()
    first, _, rest = message.partition("\n")
    first = first.rstrip()
    if len(first) <= limit:
        return first, rest.strip()
    limit -= len(_MORE)
    depth, outside = 0, []  # positions outside (), [], {}
    for i, ch in enumerate(first[:limit]):
        depth += ch in "([{"
        depth -= ch in ")]}" and depth > 0
        outside.append(depth == 0)

    typed = [m.end() for m in _TYPE_NAMED.finditer(first[:limit])]
    after = typed[-1] + 16 if typed else 0  # what an error of that type says: at least a few words of it

    def says_what(i: int) -> bool:
        return i >= after and not _TYPE_LAST.search(first[:i].rstrip(" :;,.("))

    cut = -1
    for seps, least in ((_BREAKS[:3], limit // 3), (_BREAKS[3:], limit // 3), (_BREAKS[:3], 16)):
        found = [i for sep in seps for i in range(len(first[:limit])) if first.startswith(sep, i) and outside[i]]
        found = [i for i in found if i >= least and says_what(i)]
        if found:
            cut = max(found)
            break
    if cut < 0:
        cut = first.rfind(" ", 0, limit)
        cut = cut if cut > 0 and says_what(cut) else limit
    head, tail = first[:cut].rstrip(" :;,.("), first[cut:].lstrip(" :;,.")
    if first[cut:].startswith(" ("):
        tail = "(" + tail
    detail = tail + ("\n" + rest.strip() if rest.strip() else "")
    return head + _MORE, detail


class ExportError(Exception):
    """Base of every error onnxport raises on purpose.

    ``str(e)`` is a short first line (``summary``, at most ``FIRST_LINE_LIMIT`` characters, cut
    at a clause boundary), then ``at <user's line>``, ``fix: <hint>`` and ``detail: <the rest>``.

    Attributes:
        what: the full message, as given.
        summary: its first line, short (what the CLI prints after ``onnxport: error:``).
        detail: what did not fit in the summary, plus the ``detail`` argument (torch's own message),
            plus the ``output`` argument (for the one debugging: the capture steps as they ran, what
            torch printed while failing), which ``str(e)`` does not repeat (the CLI shows the detail
            with ``--debug``).
        where: the user's source line (``file:line in func: code``) or None.
        hint: what to do about it, or None.
        attempts: for a failed capture, its steps as they ran (``capture.state.Attempt``: step,
            applied, why; ``with_attempts``); empty otherwise.
        traced_at: for a failed capture that traced the model at a larger example than the user's
            (``capture.state.Request.enlarged``), ``((dim name, size), ...)`` in the order enlarged
            (``with_traced_at``); empty otherwise. Another capture strategy starts there.
    """

    attempts: tuple = ()
    traced_at: tuple = ()

    def __init__(self, message: str, *, node: Any = None, where: str | None = None, hint: str | None = None,
                 detail: str | None = None, output: str | None = None):
        self.what = strip_ansi(message)
        self.summary, rest = split_message(self.what)
        self._given = (node, detail)
        extra = strip_ansi(detail).strip() if detail else ""
        self.detail = "\n".join(p for p in (rest, extra) if p) or None
        self.where = where or (user_source_line(node) if node is not None else None)
        self.hint = strip_ansi(hint) if hint else hint
        self.node_name = getattr(node, "name", None)
        text = self.summary
        if self.where:
            text += f"\n  at {self.where}"
        if self.hint:
            text += f"\n  fix: {self.hint}"
        if self.detail:
            text += "\n  detail: " + self.detail.replace("\n", "\n    ")
        printed = strip_ansi(output).strip() if output else ""
        if printed:
            self.detail = (self.detail + "\n" if self.detail else "") + printed
        super().__init__(text)

    def with_output(self, output: str) -> "ExportError":
        """This error again, with ``output`` (see the class) at the end of its ``detail``; ``self``
        when ``output`` is empty."""
        if not output or not output.strip():
            return self
        node, detail = self._given
        again = type(self)(self.what, node=node, where=self.where, hint=self.hint, detail=detail, output=output)
        again.__cause__, again.__traceback__ = self.__cause__, self.__traceback__
        return self._carried(again)

    def with_attempts(self, attempts: tuple) -> "ExportError":
        """This error again, carrying ``attempts`` (see the class)."""
        again = self.with_hint(self.hint)
        again.attempts = tuple(attempts)
        return again

    def with_traced_at(self, traced_at: tuple) -> "ExportError":
        """This error again, carrying ``traced_at`` (see the class)."""
        again = self.with_hint(self.hint)
        again.traced_at = tuple(traced_at)
        return again

    def with_hint(self, hint: str | None) -> "ExportError":
        """This error again, with ``hint`` as its fix."""
        node, detail = self._given
        again = type(self)(self.what, node=node, where=self.where, hint=hint, detail=detail)
        again.detail = self.detail
        again.__cause__, again.__traceback__ = self.__cause__, self.__traceback__
        return self._carried(again)

    def _carried(self, again: "ExportError") -> "ExportError":
        """``again`` with the fields of this error's class beyond ``ExportError``'s
        (``SpecializationError.computed_one``)."""
        vars(again).update({name: value for name, value in vars(self).items() if name not in vars(again)})
        return again


class CaptureError(ExportError):
    """torch.export could not capture the model (the model's forward raised, or tracing failed)."""


class DataDependentError(CaptureError):
    """The model's code needs to decide a condition on a size known only when it runs (a count
    computed from data: a boolean mask's rows, ``nonzero``), which torch.export cannot trace.

    ``bool_of_data``: where the model read a bool from its inputs' data (``if counter == 0:``, the
    line as ``capture.data_dependent`` names it) when that is the condition refused, else None: each
    side of such a branch may be exported on its own (``onnxport.value_sides``)."""

    bool_of_data = None

    def __init__(self, what: str, *, bool_of_data: str | None = None, **kwargs):
        super().__init__(what, **kwargs)
        if bool_of_data is not None:
            self.bool_of_data = bool_of_data


class CaptureTimeoutError(CaptureError):
    """A capture fallback (torch.export asked again after a failed capture) ran longer than its time
    bound (``to_onnx(fallback_seconds=...)``) and was stopped; ``where`` is the user's line it was
    tracing when stopped."""


class DynamicShapesError(ExportError):
    """The ``dynamic_shapes`` argument is malformed or inconsistent with the inputs."""


class SpecializationError(ExportError):
    """A dimension declared dynamic came out of capture as a constant.

    ``computed_one``: ``(declared dim, example size or None)`` when the constant is a size computed
    from the dim that is 0 or 1 at the example (a length padded to whole chunks that is one chunk),
    which capture's steps read to trace at a larger example; None otherwise. ``layout_bound``: the
    size is 1 where torch decided a memory layout on it, bounding the dim from above (the larger
    example is traced before any other retry)."""

    computed_one = None
    layout_bound = False

    def __init__(self, what: str, *, computed_one: tuple | None = None, layout_bound: bool = False, **kwargs):
        super().__init__(what, **kwargs)
        if computed_one is not None:
            self.computed_one = computed_one
        self.layout_bound = layout_bound


class UnsupportedOpError(ExportError):
    """An ATen operator (or a form of one) has no ONNX translation."""


class TranslationError(ExportError):
    """A translation failed on a node (unsupported arguments, dtype, or an internal inconsistency)."""


class ControlFlowError(ExportError):
    """A scan/cond/while_loop/map body cannot be exported as written (aliasing, unsupported form)."""


class ValidationError(ExportError):
    """Validation could not run (no inputs could be built, onnxruntime refused the model)."""


class NegativeSizeError(ValidationError):
    """Sizes at which an input's size computed from the dims (a dim related to others) is negative: no input
    set exists there."""


class ContractError(ExportError):
    """A model does not honour the inputs/outputs declared in an export config."""


class ConfigError(ExportError):
    """An export config file is unreadable or inconsistent."""


class SaveError(ExportError):
    """Saving a model failed; nothing was left at the destination."""


class TargetError(ExportError):
    """A model target cannot be imported, is not callable, or does not build a ``torch.nn.Module``."""


class RuntimeTargetError(ExportError):
    """A runtime target (``to_onnx(target=...)``, ``onnxport.targets``) is unknown, cannot hold the
    model (a custom-domain node under ``portable``), or its rewritten model differs from eager PyTorch."""


class CheckpointError(ExportError):
    """A checkpoint cannot be read, or its names, shapes or dtypes do not fit the model."""


class RenderError(ExportError):
    """The graphviz ``dot`` program is missing or failed to render a picture."""


class ShowInputError(ExportError):
    """The object given to ``pretty_onnx`` / ``plot_dot`` is not a model, graph or function."""


class RewriteError(ExportError):
    """The rewritten model does not compute what the original computes (or fails where it runs)."""


class ReturnnError(ConfigError):
    """A RETURNN config cannot be exported: RETURNN is missing, or the config lacks what the export
    reads (``extern_data``, ``model_outputs``, ``get_model``, ``forward_step``) or gives it in a form
    that cannot be used."""
