"""``while <tensor condition>:`` loops -> ``torch._higher_order_ops.while_loop.while_loop``.

The rewritten loop (source form)::

    while x.abs().max() > 1.0:          def _onnxport_cond_L(x, n):
        x = x * 0.5               ->        return x.abs().max() > 1.0
        n = n + 1                       def _onnxport_body_L(x, n):
                                            x = x * 0.5
                                            n = n + 1
                                            return (x, n)
                                        (x, n) = run_while(_onnxport_cond_L, _onnxport_body_L, (x, n))

The carried values are the names the body binds that exist before the loop. Semantics: PyTorch
``while_loop(cond_fn, body_fn, carried_inputs)`` (body outputs keep the carried shapes and
dtypes). A condition that is not a tensor (a Python bool) keeps the Python loop.
"""

from __future__ import annotations

import ast
from typing import Callable

import torch

from onnxport.rewrite import names as N
from onnxport.rewrite.loops import _tracing, _tup, generated

P = N.GENERATED_PREFIX


def _python_while(cond: Callable, body: Callable, carried: tuple) -> tuple:
    while cond(*carried):
        carried = tuple(body(*carried))
    return carried


def _as_predicate(pred: torch.Tensor) -> torch.Tensor:
    pred = pred.reshape(())
    return pred if pred.dtype == torch.bool else pred != 0


def run_while(cond: Callable, body: Callable, carried: tuple, *, where: str = "") -> tuple:
    """Run a rewritten ``while`` loop: ``cond(*carried) -> bool tensor``, ``body(*carried) -> carried``.

    While tracing (torch.export) with a tensor condition and tensor carried values this is one
    ``while_loop``; in eager mode, or with a Python condition, the Python loop. Returns the final
    carried values (the initial ones after zero iterations).
    """
    if not _tracing() or not all(isinstance(c, torch.Tensor) for c in carried):
        return _python_while(cond, body, carried)
    first = cond(*carried)
    if not isinstance(first, torch.Tensor):
        return _python_while(cond, body, carried)
    from torch._higher_order_ops.while_loop import while_loop

    def cond_fn(*c):
        return _as_predicate(cond(*c))

    def body_fn(*c):
        return tuple(torch.as_tensor(v).clone() for v in body(*c))

    return tuple(while_loop(cond_fn, body_fn, tuple(carried)))


def rewrite_while(node: ast.While, ctx) -> list[ast.stmt] | None:
    """Statements replacing a ``while`` loop with a while_loop, or None (with a note in ``ctx``)
    when the loop has a form that is not handled."""
    def refuse(reason: str) -> None:
        ctx.note(node, "while", False, reason)

    if node.orelse:
        return refuse("while ... else")
    exits = N.find_exits(node.body, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom,
                                     ast.Global, ast.Nonlocal, ast.Delete))
    if exits:
        return refuse(f"'{type(exits[0]).__name__.lower()}' at line {exits[0].lineno} inside the loop")
    stores = N.subscript_stores(node.body)
    if stores:
        return refuse(f"in-place write '{ast.unparse(stores[0])} = ...' at line {stores[0].lineno} inside the loop")
    before, after = ctx.defined_before(node), ctx.used_after(node)
    stored = N.stored_names(node.body)
    late = sorted(n for n in stored - before if n in after or n in N.loaded_names([node.test]))
    if late:
        return refuse(f"{', '.join(late)} first bound inside the loop and read after it")
    needed = N.read_before_write(node.body) | after | N.loaded_names([node.test])
    carried = sorted(stored & before & needed)
    if not carried:
        return refuse("the loop binds no variable that exists before it")
    cond_name, body_name = ctx.fresh("cond", node), ctx.fresh("body", node)
    params = ", ".join(carried)
    stmts = generated("\n".join([
        f"def {cond_name}({params}):",
        "    return _test",
        f"def {body_name}({params}):",
        "    pass",
        f"    return {_tup(carried)}",
        f"{_tup(carried)} = {P}while_loops.run_while({cond_name}, {body_name}, {_tup(carried)}, "
        f"where={ctx.where(node)!r})",
    ]), node)
    from onnxport.rewrite.branches import TensorPredicate

    stmts[0].body[0].value = TensorPredicate().visit(node.test)
    stmts[1].body[0:1] = node.body
    ctx.note(node, "while", True, f"while_loop carrying {', '.join(carried)}")
    return stmts
