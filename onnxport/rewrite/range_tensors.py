"""Tensors built from a Python ``range``: ``torch.tensor(list(range(n)))`` -> ``torch.arange(n)``.

``range(n)`` of a tensor size asks for a concrete integer (``range`` calls ``SymInt.__index__``),
so torch.export fixes ``n`` at the example before ``torch.tensor`` sees the list; ``torch.arange``
takes the size as it is. Forms recognised as the argument of ``torch.tensor`` / ``torch.as_tensor``
(keywords such as ``dtype`` and ``device`` kept):

* ``range(...)``, ``list(range(...))``, ``tuple(range(...))``, ``[i for i in range(...)]``;
* reversed: ``X[::-1]``, ``reversed(X)``, ``list(reversed(X))`` of one of those -> ``.flip(0)``
  (CPM-Ant's left-padding mask, ``torch.tensor(list(range(seqlen - prompt_length))[::-1])``).

Semantics: ``torch.arange(start, end, step)`` lists the same integers as Python's ``range`` (PyTorch
doc of ``torch.arange``: ``[start, end)`` by ``step``), int64 as ``torch.tensor`` of Python ints. One
difference is kept as it is: an empty range gives an int64 tensor where ``torch.tensor([])`` is
float32. A ``range`` of constants only is left alone (nothing to keep symbolic).
"""

from __future__ import annotations

import ast

_FACTORIES = ("tensor", "as_tensor")


def _reverse_slice(node: ast.AST) -> bool:
    if not isinstance(node, ast.Slice) or node.lower is not None or node.upper is not None:
        return False
    step = node.step
    if isinstance(step, ast.UnaryOp) and isinstance(step.op, ast.USub):
        return isinstance(step.operand, ast.Constant) and step.operand.value == 1
    return isinstance(step, ast.Constant) and step.value == -1


def range_of(node: ast.AST) -> tuple[ast.Call, bool] | None:
    """``(the range(...) call, reversed)`` when ``node`` lists the integers of a ``range`` in one of
    the forms above, else None."""
    if isinstance(node, ast.Subscript) and _reverse_slice(node.slice):
        inner = range_of(node.value)
        return (inner[0], not inner[1]) if inner else None
    if isinstance(node, ast.ListComp) and len(node.generators) == 1:
        gen = node.generators[0]
        if (not gen.ifs and not gen.is_async and isinstance(gen.target, ast.Name)
                and isinstance(node.elt, ast.Name) and node.elt.id == gen.target.id):
            return range_of(gen.iter)
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords):
        return None
    name, args = node.func.id, node.args
    if any(isinstance(a, ast.Starred) for a in args):
        return None
    if name == "range" and 1 <= len(args) <= 3:
        return node, False
    if name in ("list", "tuple") and len(args) == 1:
        return range_of(args[0])
    if name == "reversed" and len(args) == 1:
        inner = range_of(args[0])
        return (inner[0], not inner[1]) if inner else None
    return None


class RangeTensors(ast.NodeTransformer):
    """Rewrites the calls in place; ``ctx.note`` records each (rewritten)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr in _FACTORIES and isinstance(f.value, ast.Name)
                and f.value.id == "torch" and len(node.args) == 1):
            return node
        found = range_of(node.args[0])
        if found is None:
            return node
        rng, reverse = found
        if all(isinstance(a, ast.Constant) for a in rng.args):
            return node
        new: ast.expr = ast.Call(ast.Attribute(ast.Name(f.value.id, ast.Load()), "arange", ast.Load()),
                                 list(rng.args), list(node.keywords))
        if reverse:
            new = ast.Call(ast.Attribute(new, "flip", ast.Load()), [ast.Constant(0)], [])
        self.ctx.note(node, f"{f.value.id}.{f.attr}(range)", True,
                      f"{f.value.id}.arange{'(...).flip(0)' if reverse else ''}: the range's size stays symbolic")
        return ast.copy_location(new, node)
