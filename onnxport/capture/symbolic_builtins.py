"""Python's ``len`` and ``int`` of a symbolic size kept symbolic, in the module whose line fixed the size.

``len(t)`` of a tensor and ``int(n)`` of a ``SymInt`` must return a Python ``int`` (CPython converts what
``__len__`` / ``__int__`` return), so under torch.export's non-strict capture they fix a dynamic size to the
example's: ``.expand(len(length), max_len)`` fixes the batch (``SpecializationError``), and
``int(torch.max(lengths).item())`` cannot be an int at all (``DataDependentError``: a value known only
when the model runs). TorchDynamo (strict mode) reads both symbolically; the non-strict capture does the
same for the module whose line needed it: that module gets a global ``len`` / ``int`` shadowing the
builtin (``SYMBOLIC_BUILTINS``), which returns the size as it is, ``t.shape[0]`` as a ``SymInt`` for a
tensor whose first size is symbolic, a ``SymInt`` given to ``int`` unchanged (``torch.sym_int`` of a
``SymFloat``), and is the builtin for every other argument.

Both return the value the builtin returns at every size (``len`` of a tensor is its first size; ``int``
of an integer is itself, of a float its truncation, which ``torch.sym_int`` computes), as a size torch
keeps symbolic. What the caller does with it is then traced as it is: a ``range(len(t))`` still fixes the
size where it converts it, and a symbolic size cannot be a dict key.

``shadows_for(trace)`` reads a failed trace: the lines where a declared size became a constant
(``Specialization`` records) and the line that needed a data-dependent size as a Python number; those
that call ``len(`` / ``int(`` name the module and builtin to shadow (``int`` where the module uses the name
only as a call, a class to check against or an annotation: ``symbolic_int`` is a class of its own).
``capture.steps.KeepSizesSymbolic`` retraces with them.

Semantics: Python's ``len`` (``__len__`` must return an int) and ``int``; ``torch.sym_int``.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import sys
from typing import Any, Iterable

import torch

from onnxport.capture.data_dependent import is_data_dependent
from onnxport.capture.patches import Patch, SetAttribute, register
from onnxport.errors import DataDependentError, SpecializationError

_WHERE = re.compile(r"^(?P<file>.+?):(?P<line>\d+) in (?P<func>[^:]+): (?P<code>.*)$", re.S)
_CALLS = {name: re.compile(rf"(?<![\w.]){name}\(") for name in ("len", "int")}


def symbolic_len(obj: Any) -> "int | torch.SymInt":
    """``len(obj)``; for a tensor of rank >= 1 whose first size is symbolic, that size as it is (a
    ``SymInt``, where the builtin would fix it to an int).

    Raises what the builtin raises (``TypeError`` for a 0-d tensor or an object without a length)."""
    if isinstance(obj, torch.Tensor) and obj.dim() > 0 and isinstance(obj.shape[0], torch.SymInt):
        return obj.shape[0]
    return builtins.len(obj)


class _IntType(type):
    """The type of ``symbolic_int``: ``isinstance(v, int)`` and ``issubclass(c, int)`` in a module whose
    ``int`` it shadows answer as for the builtin."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, builtins.int)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, builtins.int)


class symbolic_int(builtins.int, metaclass=_IntType):  # noqa: N801 - it stands for the builtin int
    """``int(x)``; a ``SymInt`` as it is and a ``SymFloat`` truncated toward zero as a ``SymInt``
    (``torch.sym_int``), where the builtin would fix them to the example's int; ``int(...)`` of anything
    else, ``int(s, base)`` and the class's methods (``int.from_bytes``) are the builtin's.

    Raises what the builtin raises."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs:
            if isinstance(args[0], torch.SymInt):
                return args[0]
            if isinstance(args[0], torch.SymFloat):
                return torch.sym_int(args[0])
        return builtins.int(*args, **kwargs)


REPLACEMENTS = {"len": symbolic_len, "int": symbolic_int}


def _module_of(path: str) -> str | None:
    """The name of the loaded module whose source is ``path``."""
    real = os.path.realpath(path)
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) if module is not None else None
        if isinstance(file, str) and os.path.realpath(file) == real:
            return name
    return None


def _shadows_at(where: str | None, calls: Iterable[str]) -> list[tuple[str, str]]:
    """``(module, builtin)`` for each builtin of ``calls`` the line ``where`` (``file:line in func: code``)
    calls, in the module of its file (``int`` only where the module uses it as ``symbolic_int`` stands
    for it: ``_int_called_only``)."""
    m = _WHERE.match(where or "")
    if m is None:
        return []
    found = [b for b in calls if _CALLS[b].search(m.group("code"))]
    if "int" in found and not _int_called_only(m.group("file")):
        found.remove("int")
    module = _module_of(m.group("file")) if found else None
    return [(module, b) for b in found] if module else []


def _int_called_only(path: str) -> bool:
    """Whether the source at ``path`` reads the name ``int`` only as a call (``int(n)``), a class of
    ``isinstance`` / ``issubclass`` or in an annotation, where ``symbolic_int`` answers as the builtin.
    It is not the builtin type itself: ``dtype=int`` (a TypeError in torch, an object array in numpy)
    or ``type(x) is int`` would read otherwise, so such a module keeps the builtin."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return False
    fits = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fits.add(id(node.func))
            if node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
                classes = node.args[1]
                fits.update(id(c) for c in (classes.elts if isinstance(classes, ast.Tuple) else [classes]))
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            fits.update(id(n) for n in ast.walk(node.annotation))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            fits.update(id(n) for n in ast.walk(node.returns))
    return all(id(n) in fits for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "int")


def shadows_for(trace: Any) -> list[tuple[str, str]]:
    """``(module name, builtin)`` pairs a retrace should shadow after the failed ``trace``
    (``capture.state.Traced``): a specialization recorded at a line calling ``len(`` or ``int(``, or a
    refused branch on a size at such a line (``int(h * 14)`` of ``h = image // 14`` fixes ``image // 14``,
    a range of sizes, not one), a data-dependent size needed as a Python number at a line calling
    ``int(``; in the order met, each pair once (a module fixing sizes at several lines is shadowed once)."""
    error, found = trace.error, []
    if isinstance(error, SpecializationError):
        for record in trace.records:
            found += _shadows_at(record.where, ("len", "int"))
        found += _shadows_at(error.where, ("len", "int"))
    elif isinstance(error, DataDependentError) and is_data_dependent(trace.exception) and \
            not _is_condition(trace.exception.cond):
        found += _shadows_at(error.where, ("int",))
    return list(dict.fromkeys(found))


def _is_condition(cond: Any) -> bool:
    import sympy

    return bool(cond.is_Relational or isinstance(cond, sympy.logic.boolalg.BooleanFunction))


def shadowed(patches: Iterable[Any]) -> set[tuple[str, str]]:
    """The ``(module, builtin)`` pairs the capture patches ``patches`` (``CaptureState.patches``) shadow."""
    return {pair for p in patches if isinstance(p, tuple) and p[0] is SYMBOLIC_BUILTINS for pair in p[1][0]}


def _changes(shadows: tuple[tuple[str, str], ...]) -> list:
    changes = []
    for name, builtin in shadows:
        module = sys.modules.get(name)
        if module is not None and builtin not in vars(module):  # the module's own len / int stays
            changes.append(SetAttribute(module, builtin, lambda original, b=builtin: REPLACEMENTS[b]))
    return changes


SYMBOLIC_BUILTINS = register(Patch(
    "len and int of a size symbolic where a line fixed it", _changes,
    "len and int in the modules whose line fixed a declared size (len(t), int(n)) or needed a data-dependent "
    "size as a Python number (int(lengths.max().item())), given as (module, builtin) pairs: a global shadowing "
    "the builtin returns a symbolic size as it is (a tensor's first size for len, a SymInt for int); the "
    "builtin for anything else; installed by the capture step that retraces after such a failure",
    sample=None))
