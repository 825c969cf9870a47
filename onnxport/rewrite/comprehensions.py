"""A list comprehension over a dynamic ``range`` or a tensor's ``unbind`` stacked by ``torch.cat`` /
``torch.stack`` -> a loop.

Reformer's axial position encodings select each row's positions per batch element::

    position_encodings = torch.cat(
        [torch.index_select(position_encodings[i], 0, position_ids[i]).unsqueeze(0)
         for i in range(batch_size)], dim=0)

``range(batch_size)`` asks for a concrete integer, so torch.export fixes the batch. The statement is
given the loop the comprehension stands for, placed before it, which the loop rewrite
(``rewrite/loops.py``) turns into a scan when its form allows (the list then only read by
``torch.cat``)::

    _onnxport_rows_L = []
    for _onnxport_i_L in range(batch_size):
        _onnxport_rows_L.append(torch.index_select(position_encodings[_onnxport_i_L], ...).unsqueeze(0))
    position_encodings = torch.cat(_onnxport_rows_L, dim=0)

Forms taken: the first argument of ``torch.cat`` / ``torch.concat`` / ``torch.concatenate`` /
``torch.stack`` is ``[<element> for <name> in range(...)]`` with one generator, no ``if``, a bound
that reads a tensor size (``loops.is_dynamic``), or ``[<element> for <name> in x.unbind(d)]`` (or
``torch.unbind(x, d)``: a tensor's rows, scanned where their number is dynamic), and an element
holding no nested scope (comprehension, lambda) nor an assignment expression; the comprehension is in a simple statement
(assignment, expression, ``return``), not inside a lambda, another comprehension, or an operand
evaluated only on a condition (``x if c else y``, ``a and b``). The loop variable keeps its name
where the function names it nowhere else and gets a fresh one otherwise, so nothing of the
function's names changes; notes and messages call the construct a comprehension. When the loop
rewrite does not take the loop, it stays a Python loop computing what the comprehension computed.

Semantics: Python's list comprehension (the language reference, "Displays for lists"): the element
evaluated for each value of the iterable in order, in a scope of its own.
"""

from __future__ import annotations

import ast

from onnxport.rewrite.loops import ROWS, STACKING, dynamic_names, generated, is_dynamic, unbind_call

_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.NamedExpr,
           ast.Yield, ast.YieldFrom, ast.Await)
_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)


def _taken_comprehension(call: ast.Call) -> ast.ListComp | None:
    """The comprehension ``call`` stacks when it has a form taken (over ``range`` or ``unbind``), else None."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr in STACKING and isinstance(f.value, ast.Name)
            and f.value.id == "torch" and call.args and isinstance(call.args[0], ast.ListComp)):
        return None
    comp = call.args[0]
    if len(comp.generators) != 1:
        return None
    gen = comp.generators[0]
    it = gen.iter
    if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
        return None
    ranged = (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and not it.keywords
              and 1 <= len(it.args) <= 3 and not any(isinstance(a, ast.Starred) for a in it.args))
    if not ranged and unbind_call(it) is None:
        return None
    if any(isinstance(sub, _SCOPES) for sub in ast.walk(comp.elt)):
        return None
    return comp


def taken(node: ast.AST) -> bool:
    """Whether ``node`` is a ``torch.cat`` / ``torch.stack`` of a comprehension over a ``range`` (whatever
    its bound) or an ``unbind`` of the form above."""
    return isinstance(node, ast.Call) and _taken_comprehension(node) is not None


class _Renamed(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(self.new, node.ctx), node) if node.id == self.old else node


class _Hoist(ast.NodeTransformer):
    """Replaces each comprehension taken by the list its loop fills; ``loops`` collects the loops."""

    def __init__(self, ctx, sizes: set[str]):
        self.ctx, self.sizes, self.loops = ctx, sizes, []

    def _loop_variable(self, comp: ast.ListComp, node: ast.Call) -> str:
        """The comprehension's own name where the function names it nowhere else (messages then quote
        the user's code), else a fresh one."""
        name = comp.generators[0].target.id
        inside = {id(sub) for sub in ast.walk(comp)}
        elsewhere = any(isinstance(sub, ast.Name) and sub.id == name and id(sub) not in inside
                        for sub in ast.walk(self.ctx.func))
        return self.ctx.fresh("i", node) if elsewhere else name

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node

    # evaluated only on a condition (``a if c else b``, ``a and b``): hoisting would run them always
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_IfExp = visit_BoolOp = visit_Lambda

    def visit_Call(self, node: ast.Call) -> ast.AST:
        comp = _taken_comprehension(node)
        it = comp.generators[0].iter if comp is not None else None
        if comp is None or (unbind_call(it) is None and not any(is_dynamic(a, self.sizes) for a in it.args)):
            return self.generic_visit(node)
        for k, arg in enumerate(node.args[1:], 1):
            node.args[k] = self.visit(arg)
        node.keywords = [self.visit(kw) for kw in node.keywords]
        rows, i = self.ctx.fresh("rows", node), self._loop_variable(comp, node)
        assert rows.startswith(ROWS)
        first, loop = generated(f"{rows} = []\nfor {i} in range(0):\n    {rows}.append(0)", node)
        loop.iter = comp.generators[0].iter
        loop.body[0].value.args[0] = _Renamed(comp.generators[0].target.id, i).visit(comp.elt)
        self.loops += [first, loop]
        self.ctx.comprehension_loops.add(id(loop))
        node.args[0] = ast.copy_location(ast.Name(rows, ast.Load()), comp)
        return node


def _block(value) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], ast.stmt)


def hoisted(stmts: list[ast.stmt], ctx, sizes: set[str] | None = None) -> list[ast.stmt]:
    """``stmts`` (a block of ``ctx.func``, nested blocks included) with each comprehension taken
    preceded by its loop (see the module docstring); ``sizes``: the names ``ctx.func`` binds from
    tensor sizes (``loops.dynamic_names``, found when not given)."""
    sizes = dynamic_names(ctx.func) if sizes is None else sizes
    out: list[ast.stmt] = []
    for s in stmts:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(s)
            continue
        if _block(getattr(s, "body", None)):
            s.body = hoisted(s.body, ctx, sizes)
        if _block(getattr(s, "orelse", None)):
            s.orelse = hoisted(s.orelse, ctx, sizes)
        if _block(getattr(s, "finalbody", None)):
            s.finalbody = hoisted(s.finalbody, ctx, sizes)
        for handler in getattr(s, "handlers", []) or []:
            handler.body = hoisted(handler.body, ctx, sizes)
        if isinstance(s, _SIMPLE):
            hoist = _Hoist(ctx, sizes)
            s = hoist.visit(s)
            out.extend(hoist.loops)
        out.append(s)
    return out
