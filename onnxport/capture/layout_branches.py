"""A branch on sizes whose sides differ only by memory layout decides nothing: torch keeps no guard for it.

diffusers' upsampling makes a feature map contiguous past a batch of 64, and again where it has more
than 2**31 output elements (``if hidden_states.shape[0] >= 64: hidden_states =
hidden_states.contiguous()``). torch.export turns the condition into a Python bool at the ``if``, before
either side runs, and keeps it as a guard: the trace holds only where ``batch <= 63``, and the export
was refused at its first capture, to be captured again after the control-flow rewrite
(``rewrite.size_branches`` runs such a side at every size). Both sides compute the same values, and
ONNX tensors have no memory layout: the branch decides nothing the ONNX model computes.

``layout_only_if(where)`` reads the statement at the user's line ``where`` (``file:line in func:
code``, the line turning the condition into a bool): an ``if`` (no ``elif``) or a conditional
expression assigned to one name, whose two sides bind every name to the same value, each side made
only of assignments ``y = x`` or ``y = x.<op>(...)`` chained through layout-only operations
(``contiguous``, ``clone``, ``detach`` with any ``memory_format``, and ``to`` with ``memory_format``
and no other argument that could change the dtype or the device) and ``pass``. A name a side does
not bind keeps its value there. The check is of the source alone, so it holds at every size; anything
else (a call, a subscript, an attribute target, a ``.to(dtype)``, ``.float()``) is not layout-only.
The guard recorder (``guards.record``) evaluates such a condition with the shape environment's
guards suppressed: the trace follows the example's side, which is the other side's values too, and
keeps no condition on any size.

Semantics: ``torch.Tensor.contiguous``, ``clone``, ``detach`` and ``to(memory_format=...)`` return a
tensor of the same values, dtype and device (a copy or the tensor itself).
"""

from __future__ import annotations

import ast
import functools
import os
import re

_WHERE = re.compile(r"^(.*):(\d+) in ")
# methods returning their tensor's values in another (or the same) memory layout, and the keywords
# they may be given without changing a value, the dtype or the device
_LAYOUT_METHODS = {"contiguous": {"memory_format"}, "clone": {"memory_format"}, "detach": set(),
                   "to": {"memory_format", "copy", "non_blocking"}}
_REQUIRED = {"to": {"memory_format"}}  # ``x.to()`` without it could be anything a later version adds


def layout_only_if(where: str | None) -> bool:
    """Whether the statement at the user's line ``where`` (``file:line in func: code``) is a branch
    whose sides bind the same values, differing only by memory layout (see the module's docstring);
    False where the source cannot be read or the statement is of another form."""
    match = _WHERE.match(where or "")
    if match is None:
        return False
    try:
        changed = os.stat(match.group(1)).st_mtime_ns
    except OSError:
        return False
    return _layout_only_at(match.group(1), int(match.group(2)), changed)


@functools.lru_cache(maxsize=4096)
def _layout_only_at(path: str, line: int, changed: int) -> bool:
    tree = _parsed(path, changed)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.test.lineno <= line <= node.test.end_lineno:
            return _same_bindings(node.body, node.orelse)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.IfExp) \
                and node.value.test.lineno <= line <= node.value.test.end_lineno:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                return False
            a, b = _root(node.value.body), _root(node.value.orelse)
            return a is not None and a == b
    return False


@functools.lru_cache(maxsize=64)
def _parsed(path: str, changed: int) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _same_bindings(then: list[ast.stmt], other: list[ast.stmt]) -> bool:
    """Both sides bind every name to the same value (the name a chain of layout-only operations starts
    from); a side of any other statement is not."""
    a, b = _bindings(then), _bindings(other)
    if a is None or b is None:
        return False
    return all(a.get(n, n) == b.get(n, n) for n in a.keys() | b.keys())


def _bindings(body: list[ast.stmt]) -> dict[str, str] | None:
    """name -> the name whose value it holds after ``body`` (run in order), or None where ``body``
    holds a statement other than ``pass`` and an assignment of a layout-only chain to one name."""
    held: dict[str, str] = {}
    for stmt in body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            return None
        root = _root(value)
        if not isinstance(target, ast.Name) or root is None:
            return None
        held[target.id] = held.get(root, root)
    return held


def _root(value: ast.expr) -> str | None:
    """The name ``value`` computes the values of (``x`` for ``x.contiguous().clone()``), or None where
    it is anything but a name reached through layout-only method calls."""
    while isinstance(value, ast.Call):
        func = value.func
        if not isinstance(func, ast.Attribute) or func.attr not in _LAYOUT_METHODS or value.args:
            return None
        keywords = {k.arg for k in value.keywords}
        if None in keywords or not keywords <= _LAYOUT_METHODS[func.attr] or \
                not _REQUIRED.get(func.attr, set()) <= keywords:
            return None
        value = func.value
    return value.id if isinstance(value, ast.Name) else None
