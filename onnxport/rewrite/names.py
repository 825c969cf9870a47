"""Variable analysis on Python ASTs: which names a block of statements stores and loads.

Scoping follows Python's rules closely enough for control-flow rewriting: names bound inside
nested functions, lambdas and comprehensions are local to them, while names they read from the
enclosing function count as loads of the enclosing block.
"""

from __future__ import annotations

import ast
from typing import Iterable

GENERATED_PREFIX = "_onnxport_"

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _evaluated_at_definition(node: ast.AST) -> list[ast.AST]:
    """What a ``def`` or ``class`` statement evaluates where it stands: decorators, default values,
    base classes and keywords (its body runs later, in its own scope)."""
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords]
    return [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]


def _walk_same_scope(node: ast.AST):
    """Yield the nodes of ``node`` without entering nested scopes (the scope node itself is yielded)."""
    yield node
    if isinstance(node, _SCOPES):
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk_same_scope(child)


def stored_names(nodes: Iterable[ast.AST]) -> set[str]:
    """Names bound by ``nodes`` in their own scope: assignment targets, loop and ``with`` targets,
    ``del``, imports, nested ``def``/``class`` names, walrus targets."""
    out: set[str] = set()
    for top in nodes:
        for node in _walk_same_scope(top):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                out.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                out.update((a.asname or a.name).split(".")[0] for a in node.names)
    return {n for n in out if not n.startswith(GENERATED_PREFIX)}


def loaded_names(nodes: Iterable[ast.AST]) -> set[str]:
    """Names read by ``nodes``, including free names read inside nested functions and comprehensions."""
    out: set[str] = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                out.add(node.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
    return {n for n in out if not n.startswith(GENERATED_PREFIX)}


def name_loads(nodes: Iterable[ast.AST], name: str) -> list[ast.Name]:
    """Every ``Name`` node loading ``name`` inside ``nodes``."""
    return [n for top in nodes for n in ast.walk(top)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]


def uses_name(node: ast.AST, name: str) -> bool:
    """Whether ``name`` is read anywhere inside ``node``."""
    return bool(name_loads([node], name))


def parameters(func: ast.FunctionDef) -> set[str]:
    """Names of every parameter of ``func``."""
    a = func.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return set(names)


def find_exits(nodes: Iterable[ast.AST], kinds: tuple) -> list[ast.AST]:
    """Statements of the given kinds (``ast.Return``, ``ast.Break``...) in ``nodes``, not counting
    those inside nested functions; ``Break``/``Continue`` inside nested loops are not counted either."""
    found = []

    def visit(node: ast.AST, in_loop: bool) -> None:
        if isinstance(node, kinds):
            if not (in_loop and isinstance(node, (ast.Break, ast.Continue))):
                found.append(node)
        if isinstance(node, _SCOPES):
            return
        for child in ast.iter_child_nodes(node):
            visit(child, in_loop or isinstance(node, (ast.For, ast.While, ast.AsyncFor)))

    for top in nodes:
        visit(top, False)
    return found


def subscript_stores(nodes: Iterable[ast.AST]) -> list[ast.AST]:
    """Assignment targets that write into an object (``a[i] = ...``, ``a.x = ...``, ``a[i] += ...``)."""
    found = []
    for top in nodes:
        for node in _walk_same_scope(top):
            if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
                found.append(node)
    return found


def read_before_write(stmts: list[ast.stmt]) -> set[str]:
    """Names whose first read in ``stmts`` comes no later than their first binding (by source
    position; a statement's right-hand side counts as before its targets), less those that
    ``reads_first`` finds bound first on every path: the values a loop body takes from the previous
    iteration. (An ``if`` already made ``torch.cond`` reads its outputs at the ``if``'s line, in the
    branch functions' returns, before the lines that bind them.)"""
    first_load: dict[str, tuple] = {}
    first_store: dict[str, tuple] = {}
    for top in stmts:
        for node in ast.walk(top):
            if isinstance(node, ast.Name):
                key = (node.lineno, node.col_offset)
                table = first_load if isinstance(node.ctx, ast.Load) else first_store
                if node.id not in table or key < table[node.id]:
                    table[node.id] = key
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                key = (node.lineno, -1)
                if node.target.id not in first_load or key < first_load[node.target.id]:
                    first_load[node.target.id] = key
            elif isinstance(node, _DEFINITIONS):  # ``def f(...):`` binds ``f`` at its line
                key = (node.lineno, node.col_offset)
                if node.name not in first_store or key < first_store[node.name]:
                    first_store[node.name] = key
    return {n for n, at in first_load.items()
            if (n not in first_store or at[0] <= first_store[n][0]) and reads_first(n, stmts) is not False}


def reads_first(name: str, stmts: list[ast.stmt]) -> bool | None:
    """True when ``stmts`` may read ``name`` before binding it, False when they bind it first on
    every path, None when they do neither."""
    for s in stmts:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            if s.value is not None and name in loaded_names([s.value]):
                return True
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if name in loaded_names(targets):  # x[i] = ... reads x
                return True
            if name in stored_names(targets):
                return False
        elif isinstance(s, ast.If):
            if name in loaded_names([s.test]):
                return True
            sides = [reads_first(name, s.body), reads_first(name, s.orelse)]
            if True in sides:
                return True
            if sides == [False, False]:
                return False
        elif isinstance(s, _DEFINITIONS) and s.name == name:  # a nested def or class binds it
            return any(name in loaded_names([d]) for d in _evaluated_at_definition(s))
        elif isinstance(s, ast.FunctionDef) and s.name.startswith(GENERATED_PREFIX):
            if reads_first(name, s.body) is True:  # a branch of an if already rewritten, called right after
                return True
        elif name in loaded_names([s]) or name in stored_names([s]):
            return True  # any other statement reading or binding it: not followed here
    return None
