"""``if <tensor condition>:`` blocks -> ``torch.cond``.

Two forms are rewritten (source form)::

    if x.mean() > 0:                    def _onnxport_then_L():
        y = f(x)                            y = f(x)
    else:                         ->        return (y,)
        y = g(x)                        def _onnxport_else_L():
                                            y = g(x)
                                            return (y,)
                                        (y,) = run_cond(x.mean() > 0, _onnxport_then_L, _onnxport_else_L)

    if x.mean() > 0:                    def _onnxport_then_L():
        return f(x)               ->        return f(x)
    <rest ending in return>             def _onnxport_else_L():
                                            <rest ending in return>
                                        return run_cond(x.mean() > 0, _onnxport_then_L, _onnxport_else_L)

In the assignment form, the outputs are the names a branch binds that are read after the block; a
branch that does not bind one passes its earlier value through. Semantics: PyTorch
``torch.cond(pred, true_fn, false_fn, operands)`` (both branches return the same structure, dtypes
and ranks). A condition on symbolic sizes (``if x.shape[1] <= 8:``) becomes ``torch.cond`` on the
SymBool, so the ONNX model holds both branches (``If`` on a shape expression), unless the declared
ranges decide it (``seq == 1`` where ``seq >= 2``: the side taken at every size runs, as Python's
``if`` would); a condition that is neither a tensor nor a SymBool keeps Python's ``if``.
"""

from __future__ import annotations

import ast
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from onnxport.errors import ControlFlowError, ExportError
from onnxport.rewrite import flag_tails, state_branches
from onnxport.rewrite import names as N
from onnxport.rewrite import size_branches
from onnxport.rewrite.loops import _tracing, _tup, generated

P = N.GENERATED_PREFIX
_EXITS = (ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal, ast.Delete)


def run_cond(pred: Any, then_fn: Callable[[], Any], else_fn: Callable[[], Any], *, where: str = "",
             names: tuple = ()) -> Any:
    """Run a rewritten ``if``: ``torch.cond`` while tracing with a one-element tensor condition or a
    condition on symbolic sizes (a SymBool: ``x.shape[1] <= 8``), Python's ``if`` otherwise (eager
    mode, Python bools; the side taken on a tensor condition recorded, ``state_branches.record``).
    ``where``: the ``if``'s ``file:line in function``; ``names``: the names it binds (its outputs).

    Raises:
        ControlFlowError: ``torch.cond`` cannot hold the branch, naming ``where`` and why (the sides
            return other structures, dtypes or shapes, or read a number taken from a tensor) on a
            condition read from the data.
    """
    if not (_tracing() and isinstance(pred, (torch.Tensor, torch.SymBool))):
        state_branches.record(where, pred)
        return then_fn() if pred else else_fn()
    if isinstance(pred, torch.SymBool):
        known = _known(pred)
        if known is not None:  # the same side at every size of the range (``seq == 1`` where seq >= 2)
            return then_fn() if known else else_fn()
        done, out = size_branches.unconditional(pred, then_fn, else_fn, where)
        if done:  # one side is the identity where it is not taken: no branch (Swin's pads and cuts)
            return out
        if _compound(pred):  # ``a or b`` on sizes, which Python's ``or`` decided by a guard
            return then_fn() if pred else else_fn()
        p = pred
    else:
        p = pred.reshape(())
        p = p if p.dtype == torch.bool else p != 0

    def clone(fn):
        return lambda: pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, fn())

    try:
        return torch.cond(p, clone(then_fn), clone(else_fn), ())
    except ExportError:
        raise
    except Exception as e:  # on the data: say what of the sides torch.cond cannot hold, where it is known
        why = state_branches.why_not_cond(pred, then_fn, else_fn, names)
        if why is None:  # (on sizes, the export in pieces takes over from the error as torch raised it)
            raise
        raise ControlFlowError(f"the sides of the if at {where} cannot be one torch.cond: {why}", where=where,
                               hint="make both sides return tensors of the same structure, dtypes and shapes "
                               "(pad the shorter one, or return what differs as a tensor), or write the "
                               "branch with torch.cond yourself") from e


def _known(pred: torch.SymBool) -> bool | None:
    """The value of a comparison of one size with 0, 1 or 2 (``seq == 1``) when the sizes' ranges
    decide it without a guard (torch's ``statically_known_true``), else None. Other conditions stay
    ``torch.cond``: a range narrowed while tracing one side (``x[:4]`` under ``n > 3``) would
    otherwise decide the branch that narrowed it."""
    import sympy
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    expr = pred.node.expr
    if expr in (sympy.true, sympy.false):  # the sizes are one expression (``k != q`` where k is q)
        return bool(expr)
    if not (isinstance(expr, sympy.core.relational.Relational) and
            any(side.is_Symbol for side in expr.args) and any(side in (0, 1, 2) for side in expr.args)):
        return None
    if statically_known_true(pred):
        return True
    if statically_known_true(torch.sym_not(pred)):
        return False
    return None


def _compound(pred: torch.SymBool) -> bool:
    import sympy

    return isinstance(pred.node.expr, (sympy.And, sympy.Or))


def _sizes(value: torch.SymBool, nxt: Callable[[], Any], conjunction: bool) -> Any:
    """``value and nxt()`` (``or`` when not ``conjunction``) for a condition on sizes: one symbolic
    condition when the next operand is one too (no guard: ``run_cond`` decides how to keep it), else
    Python's short-circuit, which decides ``value`` by a guard."""
    try:
        b = nxt()
    except Exception:
        if bool(value) != conjunction:  # Python would not have evaluated it
            return value
        raise
    if isinstance(b, (torch.SymBool, bool)):
        return (value & b) if conjunction else (value | b)
    return (b if value else value) if conjunction else (value if value else b)


def all_of(first: Any, *rest: Callable[[], Any]) -> Any:
    """``first and rest[0]() and ...``: Python's short-circuit for Python values, ``logical_and`` of
    one-element predicates once a tensor is met (so tracing keeps the condition symbolic), ``&`` of
    conditions on sizes (SymBools). A false Python value after a tensor is the value: the whole is
    false whatever the tensor holds (with the same truth as Python's ``and``), and no branch is kept."""
    value = first
    for nxt in rest:
        if isinstance(value, torch.Tensor):
            b = nxt()
            if _python(b) and not b:  # false whatever the tensor holds (``t == 0 and is_final`` with is_final False)
                return b
            value = torch.logical_and(_as_bool(value), _as_bool(b))
        elif isinstance(value, torch.SymBool):
            value = _sizes(value, nxt, True)
        elif not value:
            return value
        else:
            value = nxt()
    return value


def any_of(first: Any, *rest: Callable[[], Any]) -> Any:
    """``first or rest[0]() or ...``, with ``logical_or`` once a tensor is met (see ``all_of``)."""
    value = first
    for nxt in rest:
        if isinstance(value, torch.Tensor):
            b = nxt()
            if _python(b) and b:  # true whatever the tensor holds
                return b
            value = torch.logical_or(_as_bool(value), _as_bool(b))
        elif isinstance(value, torch.SymBool):
            value = _sizes(value, nxt, False)
        elif value:
            return value
        else:
            value = nxt()
    return value


def _python(value: Any) -> bool:
    """A Python value whose truth is known while tracing (not a tensor, nor a symbolic size)."""
    return isinstance(value, (bool, int, float, type(None), str, tuple, list, dict))


def negate(value: Any) -> Any:
    """``not value``; ``logical_not`` for a one-element tensor."""
    return torch.logical_not(_as_bool(value)) if isinstance(value, torch.Tensor) else not value


def _as_bool(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return torch.tensor(bool(value))
    value = value.reshape(())
    return value if value.dtype == torch.bool else value != 0


def _truth(node: ast.AST) -> ast.AST:
    """``bool(e)`` read for its truth (a whole condition, an operand of ``and`` / ``or`` / ``not``) ->
    ``e``: the same truth, and a one-element tensor stays a tensor that ``run_cond`` can keep."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool" \
            and len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
        return _truth(node.args[0])
    return node


class TensorPredicate(ast.NodeTransformer):
    """``and`` / ``or`` / ``not`` in a condition -> ``all_of`` / ``any_of`` / ``negate`` (Python's
    operators would call ``bool()`` on a tensor, which tracing cannot keep); ``bool(e)`` read for
    its truth -> ``e`` (``_truth``: the whole condition, given to ``visit``, and the operands of
    ``and`` / ``or`` / ``not``)."""

    def visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.BoolOp):
            node.values = [_truth(v) for v in node.values]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node.operand = _truth(node.operand)
        return super().visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        name = "all_of" if isinstance(node.op, ast.And) else "any_of"
        call = generated(f"{P}branches.{name}(_a)", node)[0].value
        call.args = [node.values[0]] + [ast.copy_location(ast.Lambda(ast.arguments(
            posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), v), v) for v in node.values[1:]]
        return ast.fix_missing_locations(call)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        call = generated(f"{P}branches.negate(_a)", node)[0].value
        call.args = [node.operand]
        return call

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node  # a lambda's body is its own code

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda


def bound_condition(stmt: ast.stmt, rest: list[ast.stmt]) -> ast.stmt | None:
    """``name = <a> or <b>`` (``and``; each operand a comparison, or ``not`` of one) that an ``if`` later
    in the block tests (transformers' Swin v2 layers: ``was_padded = pad_values[3] > 0 or pad_values[5]
    > 0`` then ``if was_padded:``), with ``and`` / ``or`` as in a condition (``TensorPredicate``): on
    sizes, one symbolic condition the ``if`` keeps, where Python's operator would decide the first
    operand by a guard. None for any other statement. The value is a comparison's either way: the
    same truth (Python's ``or`` of two bools is one of them)."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.BoolOp)):
        return None
    operands = [v.operand if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not) else v
                for v in stmt.value.values]
    if not all(isinstance(v, ast.Compare) for v in operands) or _looks_static(stmt.value):
        return None
    name = stmt.targets[0].id
    tested = any(isinstance(sub, ast.If) and name in N.loaded_names([sub.test]) for s in rest for sub in ast.walk(s))
    if not tested or name in N.stored_names(rest):
        return None
    stmt.value = ast.fix_missing_locations(ast.copy_location(TensorPredicate().visit(stmt.value), stmt.value))
    return stmt


def _looks_static(test: ast.AST) -> bool:
    """Conditions that are never tensors: ``is None``, ``isinstance``, ``self.training``, constants
    (for ``and`` / ``or`` / ``not``: when every operand is)."""
    if isinstance(test, ast.BoolOp):
        return all(_looks_static(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _looks_static(test.operand)
    for sub in ast.walk(test):
        if isinstance(sub, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                                                for op in sub.ops):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in (
                "isinstance", "hasattr", "callable", "getattr"):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in ("training", "is_scripting", "is_tracing"):
            return True
    return isinstance(test, ast.Constant)


def _ends_in_return(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


def _returns(stmts: list[ast.stmt]) -> list[ast.AST]:
    return N.find_exits(stmts, (ast.Return,))


def _pre(v: str, node: ast.AST) -> str:
    """The name holding ``v``'s value before the ``if`` at ``node``: one per ``if``, so that an ``if``
    rewritten inside a branch function of another does not bind the outer one's name there."""
    return f"{P}pre{node.lineno}_{node.col_offset}_{v}"


def _branch_fn(name: str, body: list[ast.stmt], rebound: list[str], tail: str | None, node: ast.AST) -> ast.stmt:
    """``def name(): <v = pre_v for rebound v>; body; [return tail]``."""
    lines = [f"def {name}():"] + [f"    {v} = {_pre(v, node)}" for v in rebound] + ["    pass"]
    if tail is not None:
        lines.append(f"    return {tail}")
    fdef = generated("\n".join(lines), node)[0]
    k = [j for j, s in enumerate(fdef.body) if isinstance(s, ast.Pass)][0]
    fdef.body[k:k + 1] = body or [ast.copy_location(ast.Pass(), node)]
    return fdef


def _bound_before_read(name: str, node: ast.If, rest: list[ast.stmt], ctx) -> bool:
    """Whether ``name``, bound in one branch of ``node`` only, is bound anew before any read after
    it (``pad = ...`` in the next ``if`` of FocalNet's ``maybe_pad``): then it is no output. Reads
    after ``rest`` (the statements that follow in the same block) count as reads."""
    end = rest[-1].end_lineno if rest else node.end_lineno
    for sub in ast.walk(ctx.func):
        if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load) and sub.lineno > end:
            return False
    return N.reads_first(name, rest) is not True


def _padding_to_a_multiple(node: ast.If) -> list[ast.stmt] | None:
    """The body of ``if n % k != 0: <pad by k - n % k>`` (Swin's and FocalNet's ``maybe_pad``) run at
    every size with the amount ``(k - n % k) % k``, or None for another form. Where ``n % k == 0``
    the amount is 0 and ``F.pad`` returns the tensor as it is: the same function at every size, no
    branch (``torch.cond`` cannot hold it: its sides' shapes differ). The body may only bind names
    to tuples and to ``pad(...)`` calls."""
    test = node.test
    if node.orelse or not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq)
                           and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0
                           and isinstance(test.left, ast.BinOp) and isinstance(test.left.op, ast.Mod)):
        return None
    mod = ast.unparse(test.left)
    k = ast.unparse(test.left.right)
    for stmt in node.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            return None
        value = stmt.value
        if not (isinstance(value, ast.Tuple) or (isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1]
                                                 == "pad")):
            return None
    body = [ast.parse(ast.unparse(stmt)).body[0] for stmt in node.body]
    wrapped = 0

    class Amount(ast.NodeTransformer):
        def visit_BinOp(self, sub: ast.BinOp) -> ast.AST:
            nonlocal wrapped
            if isinstance(sub.op, ast.Sub) and ast.unparse(sub.left) == k and ast.unparse(sub.right) == mod:
                wrapped += 1
                return ast.BinOp(left=sub, op=ast.Mod(), right=ast.parse(k, mode="eval").body)
            return self.generic_visit(sub)

    body = [Amount().visit(stmt) for stmt in body]
    uses = sum(ast.unparse(sub) == mod for stmt in node.body for sub in ast.walk(stmt))
    if wrapped == 0 or wrapped != uses:
        return None
    for stmt in body:
        for sub in ast.walk(stmt):
            if "lineno" in sub._attributes:
                ast.copy_location(sub, node)
    return body


def rewrite_if(node: ast.If, rest: list[ast.stmt], ctx,
               own_writes: bool = False) -> tuple[list[ast.stmt] | None, bool]:
    """Statements replacing an ``if`` with ``torch.cond``, and whether they also replace ``rest`` (the
    statements after it in the same block); ``(None, False)`` when the form is not handled (with a
    note in ``ctx`` unless the condition is obviously not a tensor). ``own_writes``: writes into
    tensors a branch made itself are allowed (``flag_tails``: a side holding the rest of a function)."""
    def refuse(reason: str):
        if not _looks_static(node.test):
            ctx.note(node, "if", False, reason)
        return None, False

    if _looks_static(node.test):
        return None, False
    padding = _padding_to_a_multiple(node)
    if padding is not None:
        ctx.note(node, "if", True, "padding to a whole multiple, by (k - n % k) % k at every size")
        return padding, False
    branches = [node.body, node.orelse]
    exits = N.find_exits(node.body + node.orelse, _EXITS)
    if exits:
        return refuse(f"'{type(exits[0]).__name__.lower()}' at line {exits[0].lineno} inside the branch")
    stores = N.subscript_stores(node.body + node.orelse)
    if stores and not (own_writes and all(flag_tails.writes_into_own_tensors(b) for b in (node.body, node.orelse))):
        return refuse(f"in-place write '{ast.unparse(stores[0])} = ...' at line {stores[0].lineno} in a branch")
    before, after = ctx.defined_before(node), ctx.used_after(node)
    returns = _returns(node.body + node.orelse)
    if returns:
        if ctx.loops:
            return refuse("'return' inside a loop")
        else_body = node.orelse if node.orelse else rest
        if not (_ends_in_return(node.body) and _ends_in_return(else_body)):
            return refuse("a branch returns on some paths only")
        if _returns(else_body[:-1]) or _returns(node.body[:-1]) or N.find_exits(else_body, _EXITS):
            return refuse("'return' before the end of a branch")
        branches = [node.body, else_body]
        outputs, tail = None, None
    else:
        stored = [N.stored_names(b) for b in branches]
        one_side = {v for v in (stored[0] ^ stored[1]) - before
                    if not ctx.loops and _bound_before_read(v, node, rest, ctx)}
        outputs = sorted(((stored[0] | stored[1]) & after) - one_side)
        if not outputs:
            return refuse("the branches bind no variable read after the block")
        missing = [v for v in outputs if v not in before and not (v in stored[0] and v in stored[1])]
        if missing:
            return refuse(f"{', '.join(missing)} bound in one branch only and not before the block")
        tail = _tup(outputs)
    names = (ctx.fresh("then", node), ctx.fresh("else", node))
    # names a branch rebinds after reading their earlier value start from a copy of that value
    # (a name the branch binds before reading it needs no earlier value: FocalNet's pad amounts)
    rebinds = [sorted(v for v in N.stored_names(b) & N.loaded_names(b) & before if N.reads_first(v, b) is True)
               for b in branches]
    # an output a branch does not bind on every path passes its earlier value through, which a name
    # bound under another condition may not have (FocalNet's batch_size, bound only when hidden
    # states are returned): read as None then, where the original code would not read it either.
    # A name bound only on some paths (under an except, transformers' package_exists) is passed too.
    passed = [sorted(v for v in outputs or () if N.reads_first(v, b) is not False) for b in branches]
    rebinds = [sorted(set(r) | set(p)) for r, p in zip(rebinds, passed)]
    maybe_unbound = set(passed[0]) | set(passed[1])
    # so may a name an ``if`` rewritten inside a branch reads that way (FocalNet's elif in a loop)
    maybe_unbound |= {v for b in branches for s in b if isinstance(s, ast.Try) for v in N.loaded_names(s.body)}
    # read by name, not through locals(): inside a branch function already generated the name is a
    # free variable, which locals() of a function not naming it does not hold (qwen3_next's elif)
    stmts = generated("\n".join(f"try:\n    {_pre(v, node)} = {v}\nexcept NameError:\n    {_pre(v, node)} = None"
                                if v in maybe_unbound else f"{_pre(v, node)} = {v}"
                                for v in sorted(set(rebinds[0]) | set(rebinds[1]))), node)
    stmts += [_branch_fn(n, b, r, tail, node) for n, b, r in zip(names, branches, rebinds)]
    bound = f", names={tuple(outputs)!r}" if outputs else ""
    call = f"{P}branches.run_cond(_test, {names[0]}, {names[1]}, where={ctx.where(node)!r}{bound})"
    last = generated(f"return {call}" if outputs is None else f"{tail} = {call}", node)[0]
    last.value.args[0] = TensorPredicate().visit(_truth(node.test))
    stmts.append(last)
    form = "early return" if outputs is None else f"outputs {', '.join(outputs)}"
    ctx.note(node, "if", True, f"torch.cond ({form})")
    return stmts, outputs is None
