"""A branch on sizes whose sides differ only by memory layout decides nothing: torch keeps no guard for it.

diffusers' upsampling makes a feature map contiguous past a batch of 64, and again where it has more
than 2**31 output elements (``if hidden_states.shape[0] >= 64: hidden_states =
hidden_states.contiguous()``). torch.export turns the condition into a Python bool at the ``if``, before
either side runs, and keeps it as a guard: the trace holds only where ``batch <= 63``, and the export
was refused at its first capture, to be captured again after the control-flow rewrite
(``rewrite.size_branches`` runs such a side at every size). Both sides compute the same values, and
ONNX tensors have no memory layout: the branch decides nothing the ONNX model computes.

``layout_only_if(where, frame)`` reads the statement at the user's line ``where`` (``file:line in func:
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

The sides being the same values also asks that nothing else differs between them:

- the condition evaluates nothing on one side only: its test holds no ``and`` / ``or``, conditional
  expression, ``:=``, lambda or comprehension (``if n >= 4 and x.add_(1) is not None: pass``);
- no tensor is changed in place where the branch is (an assignment to an item or to ``.data``, an
  augmented one to an item or attribute, a method ending in ``_`` such as ``add_``, an ``out=`` or
  ``inplace=`` argument anywhere in the function holding it; a name a side binds declared ``global`` or
  ``nonlocal``), unless each side is ``detach`` alone: ``clone`` and ``contiguous`` copy on one side only,
  so a name bound to the value before the branch (``y = x``; ``x = x.clone()``; ``x.add_(1)``) sees the
  change on the other side only. An augmented assignment to a name (``n += 1``, ``x += 1``) is not read as
  one: on a tensor it is its in-place operator, which advances the version counter checked once traced
  (below), on a number it changes nothing; it counts only beside a ``.data``, whose changes skip that counter;
- nothing in the function holding it reads the memory layout (``is_contiguous()``, ``stride()``,
  ``data_ptr()``...) or asks for a ``view``, which eager PyTorch refuses of a tensor not contiguous;
- with the running frame given (``frame``, as the recorder does): each name a side starts a chain from
  holds a tensor whose class keeps torch's own method (a user object's ``contiguous`` may return
  anything), and the function's code compiled from the file is the code running (a file edited after
  import, or code compiled under another file's name, is not read as that file: ``rewrite/running_source.py``).

A change in place inside another function the model calls after the branch (a module built with
``inplace=True``, a helper writing into its argument) is not seen by reading the function holding it;
it is seen while tracing (``layout_branch``): where one side copies, the trace follows the branch with no
guard only where the example takes the side making no copy, and a change in place of what that side
passes on advances its version counter, which the capture checks once traced
(``guards.events``, refused naming the branch). Where the example takes the copying side, the branch
is an ordinary one.

A read of the memory layout in another function after the branch (the caller's ``y.is_contiguous()`` or
``y.stride()`` of what it returns, a helper's, a ``torch.cond`` side's) is not seen by reading the function
holding it either; it is noticed while tracing (``capture.layout_reads``, watching every branch so
followed until the trace ends): a branch followed with no guard then has its condition evaluated as torch
would have without the rule, its guard at the branch's line, and a side the control-flow rewrite runs at
every size is refused once traced.

Semantics: ``torch.Tensor.contiguous``, ``clone``, ``detach`` and ``to(memory_format=...)`` return a
tensor of the same values, dtype and device (a copy or the tensor itself).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import re
from types import FrameType

from onnxport.capture.layout_reads import READS
from onnxport.rewrite.running_source import runs_file

_WHERE = re.compile(r"^(.*):(\d+) in ")
# methods returning their tensor's values in another (or the same) memory layout, and the keywords
# they may be given without changing a value, the dtype or the device
_LAYOUT_METHODS = {"contiguous": {"memory_format"}, "clone": {"memory_format"}, "detach": set(),
                   "to": {"memory_format", "copy", "non_blocking"}}
_REQUIRED = {"to": {"memory_format"}}  # ``x.to()`` without it could be anything a later version adds


@dataclasses.dataclass(frozen=True)
class LayoutBranch:
    """A branch ``layout_branch`` found layout-only, as the running frame holds it.

    ``copy_free``: the value of the condition that selects the side making no copy (only ``detach`` or
    plain names), None where neither side copies; ``versions``: each tensor a side starts from with its
    version counter then (``Tensor._version``, which every change in place of its storage, through any
    view, advances)."""

    copy_free: bool | None
    versions: tuple


def layout_branch(where: str | None, frame: FrameType) -> LayoutBranch | None:
    """The branch at the user's line ``where`` run by ``frame``, where it is layout-only
    (``layout_only_if``), else None. The trace may follow it with no guard only where the example takes
    its side making no copy (``copy_free``), nothing changes the tensors its sides start from in place
    until the trace ends (``changed_in_place``) and no layout read follows it (``capture.layout_reads``):
    where neither side copied, the other side's copy computes the same values too. One side copying is only
    followed for a condition made of one comparison, whose value is the side taken."""
    match = _WHERE.match(where or "")
    if match is None or not layout_only_if(where, frame):
        return None
    path = match.group(1)
    roots, copy_free = _layout_only_at(path, int(match.group(2)), os.stat(path).st_mtime_ns)
    tensors = tuple(frame.f_locals[name] for name in roots)
    return LayoutBranch(copy_free, tuple((t, t._version) for t in tensors))


def changed_in_place(branch: LayoutBranch) -> bool:
    """Whether a tensor the branch's sides start from was changed in place since the branch."""
    return any(t._version != v for t, v in branch.versions)


def layout_only_if(where: str | None, frame: FrameType | None = None) -> bool:
    """Whether the statement at the user's line ``where`` (``file:line in func: code``) is a branch
    whose sides bind the same values, differing only by memory layout (see the module's docstring);
    False where the source cannot be read or the statement is of another form. With ``frame``, the
    frame running that line: False too where a name a side starts from is not a tensor with torch's
    own layout methods, or the code running is not the file's."""
    located = _located(where)
    if located is None:
        return False
    path = located[0]
    found = _layout_only_at(*located)
    if found is None:
        return False
    roots = found[0]
    if frame is None:
        return True
    code = frame.f_code
    return code.co_filename == path and runs_file(code, frame.f_globals) and \
        all(_tensor_with_own_methods(frame.f_locals, name, methods) for name, methods in roots.items())


def _tensor_with_own_methods(names: dict, name: str, methods: frozenset[str]) -> bool:
    """``names[name]`` is a tensor whose class has torch's own ``methods``."""
    import torch

    value = names.get(name)
    return isinstance(value, torch.Tensor) and \
        all(getattr(type(value), m, None) is getattr(torch.Tensor, m) for m in methods)


@functools.lru_cache(maxsize=4096)
def _layout_only_at(path: str, line: int, changed: int) -> tuple[dict[str, frozenset[str]], bool | None] | None:
    """``(roots, copy_free)`` where the branch at ``line`` is layout-only, else None: the names the sides
    start their chains from -> the methods called on them, and the value of the condition selecting the
    side that makes no copy (``LayoutBranch.copy_free``)."""
    tree = _parsed(path, changed)
    if tree is None:
        return None
    found = [(scope, node) for scope, node in _nodes_in_scopes(tree) if _test_at(node, line)]
    if len(found) != 1:  # none, or two branches on the line: which one runs is not known
        return None
    scope, node = found[0]
    if isinstance(node, ast.If):
        sides, test = [node.body, node.orelse], node.test
    else:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            return None
        sides, test = [[ast.Assign([targets[0]], node.value.body)], [ast.Assign([targets[0]], node.value.orelse)]], \
            node.value.test
    if not _same_bindings(*sides) or any(isinstance(n, _CONDITIONAL) for n in ast.walk(test)):
        return None
    roots = _chain_roots(sides)
    later = _observing(scope, node)
    if _reads_layout(later) or not set().union(*roots.values()) <= {"detach"} and _changes_in_place(later):
        return None
    if _declared_elsewhere(scope, set(_bindings(sides[0])) | set(_bindings(sides[1]))):
        return None  # bound for another function too, which may change it in place
    plain = [set().union(*_chain_roots([side]).values()) <= {"detach"} for side in sides]
    if all(plain):
        return roots, None
    if not any(plain) or not _one_comparison(test):
        return None  # which side the condition's value selects is not known
    return roots, plain[0]


def copy_unobserved(where: str | None) -> bool:
    """Whether the function holding the ``if`` at the user's line ``where`` (``file:line in func``) cannot
    tell a copy one side of it makes from the tensor the other side passes through, as far as its source
    shows: it changes no tensor in place (``_changes_in_place``), reads no memory layout
    (``is_contiguous()``, ``stride()``, ``data_ptr()``...; a ``view`` aside: it refuses a layout, it does not
    compute from one) and declares no name the ``if`` binds ``global`` or ``nonlocal``. False where the
    source cannot be read or holds no single ``if`` there. The control-flow rewrite asks it before running
    a side that copies at every size (``rewrite.size_branches``); what other functions do to the tensors
    is checked once traced (``changed_in_place``), and what they read of the layout while tracing
    (``capture.layout_reads``)."""
    located = _located(where)
    return located is not None and _copy_unobserved_at(*located)


def _located(where: str | None) -> tuple[str, int, int] | None:
    """``(path, line, modification time in ns)`` of the user's line ``where`` (``file:line in func``), the
    time keying the caches of the file's reading; None where ``where`` names no file that exists."""
    match = _WHERE.match(where or "")
    if match is None:
        return None
    try:
        return match.group(1), int(match.group(2)), os.stat(match.group(1)).st_mtime_ns
    except OSError:
        return None


@functools.lru_cache(maxsize=4096)
def _copy_unobserved_at(path: str, line: int, changed: int) -> bool:
    tree = _parsed(path, changed)
    if tree is None:
        return False
    found = [(scope, node) for scope, node in _nodes_in_scopes(tree)
             if isinstance(node, ast.If) and _test_at(node, line)]
    if len(found) != 1:
        return False
    scope, node = found[0]
    bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    later = _observing(scope, node)
    return not (_reads_layout(later, views=False) or _changes_in_place(later) or _declared_elsewhere(scope, bound))


def _declared_elsewhere(scope: ast.AST, names: set[str]) -> bool:
    """``scope`` declares one of ``names`` ``global`` or ``nonlocal``: another function may change it."""
    return any(isinstance(n, (ast.Global, ast.Nonlocal)) and names & set(n.names) for n in ast.walk(scope))


# calls a condition of one comparison may hold: none of them turns a size condition into a bool itself
_SIZE_CALLS = frozenset({"size", "numel", "dim", "pow", "len"})


def _one_comparison(test: ast.expr) -> bool:
    """``test`` is one comparison (``n >= 64``, ``x.numel() * 2 > pow(2, 31)``) whose value is the one the
    ``if`` turns into a bool, with no call that turns another condition into a bool on the way (``min``)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name not in _SIZE_CALLS:
                return False
    return True


def _test_at(node: ast.AST, line: int) -> bool:
    """``node`` is an ``if``, or an assignment of a conditional expression, whose condition spans ``line``."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.IfExp):
        node = node.value
    elif not isinstance(node, ast.If):
        return False
    return node.test.lineno <= line <= node.test.end_lineno


# evaluated on one side of a condition only, or binding a name: a test holding one is a branch of its own
_CONDITIONAL = (ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                ast.GeneratorExp)


def _nodes_in_scopes(tree: ast.Module):
    """(the innermost function holding it, else the module; the node) for every node of ``tree``."""
    stack = [(tree, tree)]
    while stack:
        scope, node = stack.pop()
        yield scope, node
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else scope
        stack.extend((inner, child) for child in ast.iter_child_nodes(node))


# what reads a tensor's memory layout, or refuses a layout (``view`` of a tensor not contiguous)
# the layout reads noticed while tracing (``layout_reads.READS``), the ``_base`` property, and ``view``, which eager
# PyTorch refuses of a tensor not contiguous
_LAYOUT_READS = frozenset(READS) | {"_base", "view"}


def _observing(scope: ast.AST, branch: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope`` that may run once ``branch`` has, where a change in place or a layout read
    could tell its sides apart: those from the branch's first line on, those of a loop holding it (run
    again), and those of any function, lambda or class defined in ``scope`` (called later). What runs
    before the branch in the same pass cannot (SEW-D zeroes padded frames in place before its padding
    branch)."""
    loops = {id(n) for n in ast.walk(scope) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
             and n.lineno <= branch.lineno <= n.end_lineno}
    later: list[ast.AST] = []
    for n in ast.walk(scope):
        if n is scope:
            continue
        if id(n) in loops or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            later.extend(ast.walk(n))
        elif getattr(n, "lineno", 0) >= branch.lineno:
            later.append(n)
    return later


def _reads_layout(nodes: list[ast.AST], views: bool = True) -> bool:
    """``nodes`` read a tensor's memory layout (``x.is_contiguous()``, ``x.stride(0)``) or, with ``views``,
    asks for a view (``x.view(n, -1)``, which eager PyTorch refuses of a tensor not contiguous): the sides,
    the same values, are told apart there. Without ``views``, only calls of those methods count (and
    ``x._base``): a module's ``self.stride`` is a number."""
    if views:
        return any(isinstance(n, ast.Attribute) and n.attr in _LAYOUT_READS for n in nodes)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _LAYOUT_READS - {"view"}
               or isinstance(n, ast.Attribute) and n.attr == "_base" for n in nodes)


def _changes_in_place(nodes: list[ast.AST]) -> bool:
    """``nodes`` hold a statement or call that may change a tensor in place: an augmented assignment
    to an item or attribute, an assignment to an item or to ``.data``, a method ending in one ``_``
    (``add_``, ``copy_``), an ``out=`` argument or an ``inplace=`` one other than ``False``. An augmented
    assignment to a name (``n += 1``) counts only where ``nodes`` also take a ``.data``: on a tensor it is
    its in-place operator, which advances the version counter the capture checks once traced
    (``changed_in_place``), shared by every view and ``detach()`` of the tensor, not by its ``.data``."""
    data = any(isinstance(n, ast.Attribute) and n.attr == "data" for n in nodes)
    for node in nodes:
        if isinstance(node, ast.AugAssign) and (data or not isinstance(node.target, ast.Name)):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.For, ast.withitem, ast.NamedExpr)) else []
        for target in targets:
            for t in ast.walk(target) if target is not None else ():
                if isinstance(t, ast.Subscript) and isinstance(t.ctx, ast.Store) or \
                        isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store) and t.attr == "data":
                    return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name.endswith("_") and not name.endswith("__") and not name.startswith("_"):
                return True
            for k in node.keywords:
                if k.arg == "out" or k.arg == "inplace" and not (
                        isinstance(k.value, ast.Constant) and k.value.value is False):
                    return True
    return False


def _chain_roots(sides: list[list[ast.stmt]]) -> dict[str, frozenset[str]]:
    """The names each side's chains start from, not bound before by the side -> the methods the chains
    call (every method of a chain: the receiver of each is that name's value or a layout-only copy)."""
    roots: dict[str, set[str]] = {}
    for body in sides:
        bound: set[str] = set()
        for stmt in body:
            if isinstance(stmt, ast.Pass):
                continue
            target, value = (stmt.targets[0], stmt.value) if isinstance(stmt, ast.Assign) else (stmt.target, stmt.value)
            methods = []
            while isinstance(value, ast.Call):
                methods.append(value.func.attr)
                value = value.func.value
            if value.id not in bound:
                roots.setdefault(value.id, set()).update(methods)
            bound.add(target.id)
    return {name: frozenset(methods) for name, methods in roots.items()}


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
