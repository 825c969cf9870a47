"""A condition tested again later in the function: the rest of the function under each side.

Longformer's self-attention reads one flag from the data (``is_global_attn``) and tests it three
times; between the tests the shapes differ (the global keys are concatenated to the scores), so no
single ``if`` is a ``torch.cond`` whose sides agree in shape. The function as a whole is::

    if c:                                        if c:
        A                                            A
    R1                                               R1; B2; R2; return r   (c read as True)
    if c:                          ->            else:
        B2                                           R1; R2; return r       (c read as False)
    R2
    return r

Each side then ends in ``return``: the early-return form of ``branches.rewrite_if``, one
``torch.cond`` whose outputs agree in shape. Inside a side the flag is a constant (later tests of it
are decided, reads of it replaced), ``del`` statements are dropped (a name unbound there is never
read again: Python would raise otherwise), ``assert`` statements too (checks of the library's own
shapes, which torch.cond's tracing cannot evaluate on sizes read from data), writes into tensors
the side itself made are kept, and sizes read from tensors before the ``if``
(``seq_len, batch, dim = x.size()``) are read again at the top of each side (``sizes_again``).

Taken only where the ``if`` as written is not rewritten (a ``del`` or such a write in its branch),
outside loops, when ``c`` is a plain name that neither side nor the rest rebinds.

Semantics: Python's (the rest runs after either side; a flag's value does not change while the
function runs), then ``torch.cond`` as in ``branches``.
"""

from __future__ import annotations

import ast
import copy

from onnxport.rewrite import names as N


def applies(node: ast.If, rest: list[ast.stmt], in_loop: bool) -> bool:
    """Whether ``node`` (followed by ``rest`` in its block) has the form: a plain name tested, tested
    again by an ``if`` of ``rest``, ``rest`` ending in ``return``, none of them rebinding the name."""
    if in_loop or not isinstance(node.test, ast.Name) or not rest or not isinstance(rest[-1], ast.Return):
        return False
    flag = node.test.id
    again = any(isinstance(sub, (ast.If, ast.IfExp)) and isinstance(sub.test, ast.Name) and sub.test.id == flag
                for s in rest for sub in ast.walk(s))
    return again and not _binds_anywhere(flag, node.body + node.orelse + rest)


def _binds_anywhere(name: str, stmts: list[ast.stmt]) -> bool:
    """Whether ``name`` is bound in ``stmts`` in any scope: an assignment, a loop or comprehension
    variable, a parameter of a nested function or lambda, an ``except ... as`` name."""
    for s in stmts:
        for sub in ast.walk(s):
            if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, (ast.Store, ast.Del)):
                return True
            if isinstance(sub, ast.arg) and sub.arg == name or isinstance(sub, ast.ExceptHandler) and sub.name == name:
                return True
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub.name == name:
                return True
    return False


def merged(node: ast.If, rest: list[ast.stmt]) -> ast.If:
    """``if c: <body>; <rest, c True> else: <orelse>; <rest, c False>`` (copies; ``node`` and
    ``rest`` unchanged; the flag decided in both), located at ``node`` and ending where ``rest`` does."""
    flag = node.test.id
    sides = []
    for value, branch in ((True, node.body), (False, node.orelse)):
        stmts = _flat([_Fold(flag, value).visit(s) for s in copy.deepcopy(branch + rest)])  # its own reads too
        sides.append([_DropChecks().visit(s) for s in stmts])
    out = ast.If(test=copy.deepcopy(node.test), body=sides[0], orelse=sides[1])
    ast.copy_location(out, node)
    out.end_lineno, out.end_col_offset = rest[-1].end_lineno, rest[-1].end_col_offset
    return ast.fix_missing_locations(out)


def sizes_again(func: ast.FunctionDef, node: ast.If, sides: list[list[ast.stmt]]) -> list[ast.stmt]:
    """Copies of the statements of ``func``'s top level before ``node`` that bind sizes the ``sides``
    read (``seq_len, batch_size, embed_dim = hidden_states.size()``), to run again at the top of each
    side: a size read from a tensor inside the side is one torch.cond's tracing can hold, a size
    closed over from outside is not. Taken only where the tensors they read are not rebound between
    the statement and ``node``; empty when ``node`` is not at ``func``'s top level."""
    if node not in func.body:
        return []
    before = func.body[:func.body.index(node)]
    wanted = N.loaded_names([s for side in sides for s in side])
    found: list[ast.stmt] = []
    for k in range(len(before) - 1, -1, -1):
        s = before[k]
        bound = N.stored_names([s])
        if not bound & wanted:
            continue
        later = N.stored_names(before[k + 1:])
        if not _reads_sizes_only(s) or bound & later or N.loaded_names([s.value]) & later:
            wanted -= bound  # bound last by another statement, or a name it binds or reads changes later
            continue
        found.insert(0, copy.deepcopy(s))
        wanted = (wanted - bound) | N.loaded_names([s.value])
    return found


def _reads_sizes_only(s: ast.stmt) -> bool:
    """``<names> = <expression of .shape / .size() / .dim() reads, numbers and arithmetic>``."""
    if not (isinstance(s, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in s.targets)):
        return False
    if any(isinstance(e, ast.Starred) for t in s.targets if isinstance(t, ast.Tuple) for e in t.elts):
        return False
    sized = False
    for sub in ast.walk(s.value):
        if isinstance(sub, ast.Attribute) and sub.attr == "shape":
            sized = True
        elif isinstance(sub, ast.Call):
            if not (isinstance(sub.func, ast.Attribute) and sub.func.attr in ("size", "dim")):
                return False
            sized = True
        elif not isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.BinOp, ast.UnaryOp,
                                  ast.Slice, ast.Load, ast.operator, ast.unaryop, ast.Tuple)):
            return False
    return sized


def writes_into_own_tensors(branch: list[ast.stmt]) -> bool:
    """Whether every write into an object in ``branch`` (``a[i] = v``) is into a name ``branch``
    binds before that statement at its top level (a tensor the side made, which ``torch.cond`` lets
    a branch change)."""
    bound: set[str] = set()
    for s in branch:
        for target in N.subscript_stores([s]):
            base = target
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if not (isinstance(base, ast.Name) and isinstance(target, ast.Subscript) and base.id in bound):
                return False
        bound |= N.stored_names([s])
    return True


class _Fold(ast.NodeTransformer):
    """Tests of ``flag`` decided (the side taken kept), other reads of it replaced by ``value``."""

    def __init__(self, flag: str, value: bool):
        self.flag, self.value = flag, value

    def _is_flag(self, test: ast.AST) -> bool:
        return isinstance(test, ast.Name) and test.id == self.flag

    def visit_If(self, node: ast.If):
        decided = self._is_flag(node.test)  # read before the visit replaces the name
        self.generic_visit(node)
        if not decided:
            return node
        return (node.body if self.value else node.orelse) or [ast.copy_location(ast.Pass(), node)]

    def visit_IfExp(self, node: ast.IfExp):
        decided = self._is_flag(node.test)
        self.generic_visit(node)
        if not decided:
            return node
        return node.body if self.value else node.orelse

    def visit_Name(self, node: ast.Name):
        if node.id == self.flag and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(self.value), node)
        return node

    def visit_FunctionDef(self, node):
        return node  # a nested function's reads are its own

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef


def _flat(stmts: list) -> list[ast.stmt]:
    out = []
    for s in stmts:
        out.extend(s if isinstance(s, list) else [s])
    return out


class _DropChecks(ast.NodeTransformer):
    """``del <names>`` and ``assert`` statements -> ``pass`` at every depth outside nested functions."""

    def visit_Delete(self, node):
        return ast.copy_location(ast.Pass(), node) if all(isinstance(t, ast.Name) for t in node.targets) else node

    def visit_Assert(self, node):
        return ast.copy_location(ast.Pass(), node)

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef
