"""``for i in range(<dynamic size>)`` loops -> ``torch._higher_order_ops.scan.scan``.

The rewritten loop (source form, ``i`` the loop variable)::

    for i in range(n):                        def _onnxport_for_L(carry, xs):
        h = cell(x[:, i], h)          ->          (h,) = carry
        outs.append(h)                            (i_t, x_i) = xs
        dist[i, :] = f(y, x[i:i+1])               h = cell(x_i, h)
                                                  y0 = h
                                                  y1 = row(f(y, x_i2[None]), dist, 0, "index")
                                                  return (h,), (y0, y1)
                                              (h,), (ys0, ys1) = run_scan(_onnxport_for_L, (h,), 0, n, ...)
                                              outs = Rows(outs, ys0); dist = write_rows(dist, ys1, 0, 0)

* names bound in the body, bound before the loop and read in the body or after it: the carry;
* ``E[..., i, ...]`` / ``E[..., i:i+1, ...]`` with ``E`` unchanged by the loop and only full
  slices before ``i``: a scanned input ``E.movedim(d, 0)`` (its element replaces the subscript);
* other reads of ``i``: a 0-d int64 tensor scanned from ``torch.arange(start, stop)``;
* ``out[i] = v`` / ``out[i, :] = v`` (preallocated ``out``) and ``L.append(v)`` (``L`` then only
  used by ``torch.stack``/``torch.cat``): stacked scan outputs written back after the loop.

A loop over a tensor's rows is that loop over their indices, its sequence evaluated once before it::

    for g in x.unbind(d):                     _onnxport_seq_L = loops.unbound(x, d)   # x.movedim(d, 0)
        body                          ->      for k in range(len(_onnxport_seq_L)):
                                                  g = _onnxport_seq_L[k]
                                                  body

(``for row in x`` alike, ``x`` a name or attribute chain), a scan where ``len`` is symbolic while
tracing and a Python loop elsewhere (a static axis, a list of modules).

Semantics: PyTorch ``scan`` (combine_fn(carry, x) -> (next_carry, y), outputs stacked on dim 0).
Outside tracing (eager) the rewritten body runs as a Python loop with a tensor index, which is
what the automatic equivalence check of ``rewrite_module`` exercises.
"""

from __future__ import annotations

import ast
import copy
import warnings
from typing import Any, Callable

import torch

from onnxport.rewrite import names as N

P = N.GENERATED_PREFIX
_DYNAMIC_ATTRS = {"shape"}
_DYNAMIC_CALLS = {"size", "numel", "item", "len"}
# torch's functions taking a list of rows, each with the function taking a rewritten loop's rows instead
STACKING = {"stack": "stack_rows", "cat": "cat_rows", "concat": "cat_rows", "concatenate": "cat_rows"}
ROWS = f"{P}rows_"  # the list a comprehension's loop fills (``rewrite/comprehensions.py``), bound before it


class _Refuse(Exception):
    """The loop has a form the rewriter does not handle; the message says which."""


# --------------------------------------------------------------------------- runtime


def _tracing() -> bool:
    return torch.compiler.is_compiling() or torch.compiler.is_exporting()


def _element(source: Any, d: int, k: Any) -> Any:
    if isinstance(source, torch.Tensor):
        return source.select(d, k)
    return source[k] if d == 0 else source[(slice(None),) * d + (k,)]


def _python_loop(body: Callable, init: tuple, start: Any, stop: Any, sources: list, tensor_index: bool):
    carry, rows = tuple(init), None
    for k in range(start, stop):
        index = torch.tensor(k) if tensor_index else k
        xs = tuple(index if src is None else _element(src, d, k) for src, d in sources)
        carry, ys = body(carry, xs)
        if rows is None:
            rows = [[] for _ in ys]
        for acc, y in zip(rows, ys):
            acc.append(y)
    if rows is None:
        return carry, None
    return carry, tuple(_stacked(acc) for acc in rows)


def _stacked(values: list) -> torch.Tensor:
    """The rows one output of the loop took, stacked; a clear error where their shapes differ (a
    scan's rows all have one shape), not ``torch.stack``'s, which names a call the user did not write."""
    rows = [torch.as_tensor(v) for v in values]
    for k, r in enumerate(rows[1:], 1):
        if r.shape != rows[0].shape:
            raise RuntimeError(f"the loop's rows differ in shape ({tuple(rows[0].shape)} at step 0, {tuple(r.shape)} "
                               f"at step {k}): a scan takes rows of one shape")
    return torch.stack(rows)


def run_scan(body: Callable, init: tuple, start: Any, stop: Any, sources: list, *, dynamic: bool,
             where: str = "") -> tuple[tuple, tuple | None]:
    """Run a rewritten loop body over ``range(start, stop)``.

    Args:
        body: ``body(carry: tuple, xs: tuple) -> (next_carry: tuple, ys: tuple)``; ``xs`` holds the
            loop index then one element per source.
        init: initial carried values (tensors for the scan form).
        start, stop: the range bounds (ints or SymInts).
        sources: ``(tensor, dim)`` pairs scanned along ``dim``; ``(None, 0)`` is the loop index.
        dynamic: the range bound was written from a tensor size (``x.shape[0]``, ``len(x)``...).
        where: the loop's source line, for messages.

    Returns ``(final_carry, stacked_ys)``; ``stacked_ys`` is None after zero iterations of the
    Python form. While tracing (torch.export) with a dynamic bound and tensor operands this is one
    ``torch.ops.higher_order.scan``; otherwise the body runs as a Python loop.
    """
    n = stop - start
    tensors = all(isinstance(t, torch.Tensor) for t in init) and all(
        s is None or isinstance(s, torch.Tensor) for s, _ in sources)
    if not tensors or not (dynamic or isinstance(n, torch.SymInt)):
        if _tracing() and isinstance(n, torch.SymInt):
            warnings.warn(f"{where}: loop kept as Python: its carried values or scanned sequences are not all "
                          f"tensors ({', '.join(type(v).__name__ for v in init)})", stacklevel=2)
        return _python_loop(body, init, start, stop, sources, tensor_index=False)
    if not _tracing():
        return _python_loop(body, init, start, stop, sources, tensor_index=True)
    from torch._higher_order_ops.scan import scan

    xs = [torch.arange(start, stop) if s is None else s.movedim(d, 0).narrow(0, start, n) for s, d in sources]
    n_carry = len(init)
    # the carry in one memory layout, which scan asks of the initial and the next values alike
    # (RWKV's states start as zeros_like of a strided slice)
    carry0 = [t.contiguous() for t in init] if init else [torch.zeros(())]

    def combine(carry, x):
        next_carry, ys = body(tuple(carry[:n_carry]), tuple(x))
        next_carry = [c.clone(memory_format=torch.contiguous_format) for c in next_carry] if n_carry \
            else [carry[0].clone()]
        return next_carry, [torch.as_tensor(y).clone() for y in ys]

    carry, ys = scan(combine, carry0, xs)
    return tuple(carry[:n_carry]), tuple(ys)


def steps(start: Any, stop: Any, step: Any) -> range | list:
    """``range(start, stop, step)`` where a bound is a symbolic size and the number of steps is the
    same at every size (EnCodec's ``range(0, n, n)`` with no chunk length: one step, ``offset = 0``):
    a range of that many ``start + k * step`` values, symbolic where the bounds are. Anything else
    (ints, or a count that depends on the size) is Python's own ``range``, which torch.export then
    fixes to the example's size and reports."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    bounds = (start, stop, step)
    if not any(isinstance(v, torch.SymInt) for v in bounds) or not statically_known_true(step > 0):
        return range(start, stop, step)
    # the example's count k, kept where it holds at every size: (k - 1) * step < span <= k * step
    k = len(range(*(v.node.hint if isinstance(v, torch.SymInt) else v for v in bounds)))
    span = stop - start
    if statically_known_true(span <= k * step) and (k == 0 or statically_known_true(span > (k - 1) * step)):
        return [start + j * step for j in range(k)]
    return range(start, stop, step)


def length(obj: Any) -> Any:
    """``len(obj)``, as the (possibly symbolic) size of axis 0 for a tensor."""
    return obj.shape[0] if isinstance(obj, torch.Tensor) else len(obj)


def unbound(source: Any, *dim: Any) -> Any:
    """The sequence ``source.unbind(*dim)`` gives a loop, with the same rows: ``source.movedim(d, 0)``
    for a tensor (``d`` the one ``dim``, else 0: its rows along axis 0 are the tensors ``unbind``
    returns, views of ``source`` alike; torch's ``Tensor.unbind``), so that their number stays
    symbolic (``unbind`` would return a Python tuple of the example's length);
    ``source.unbind(*dim)`` for anything else."""
    if isinstance(source, torch.Tensor):
        return source.movedim(dim[0] if dim else 0, 0)
    return source.unbind(*dim)


def take(source: Any, d: int, index: Any, keep: bool) -> Any:
    """``source[(:,)*d + (index,)]`` (``keep``: ``index:index+1``) for a tensor ``index`` (0-d int64,
    negative values counted from the end as in Python), as index_select so that tracing keeps it."""
    if not isinstance(index, torch.Tensor) or not isinstance(source, torch.Tensor):
        key = slice(index, index + 1) if keep else index
        return source[key] if d == 0 else source[(slice(None),) * d + (key,)]
    picked = source.index_select(d, index.reshape(1) % source.shape[d])
    return picked if keep else picked.squeeze(d)


def row(value: Any, out: torch.Tensor, d: int, kind: str) -> torch.Tensor:
    """The row that ``out[(:,)*d + (i,)] = value`` (kind ``"index"``) or ``out[..., i:i+1] = value``
    (kind ``"slice"``) writes: ``value`` cast to ``out.dtype`` and broadcast to the row's shape."""
    shape = list(out.shape)
    if kind == "slice":
        shape[d] = 1
    else:
        del shape[d]
    if not isinstance(value, torch.Tensor):
        value = torch.full(shape, value, dtype=out.dtype)
    value = value.to(out.dtype).expand(shape)
    return value.squeeze(d) if kind == "slice" else value


def write_rows(out: torch.Tensor, ys: torch.Tensor | None, d: int, start: Any) -> torch.Tensor:
    """``out`` with the stacked rows ``ys`` written at ``start, start+1, ...`` along ``d``."""
    if ys is None:
        return out
    return out.slice_scatter(ys.movedim(0, d).to(out.dtype), d, start, start + ys.shape[0])


class Rows:
    """A list filled by a rewritten loop: the elements appended before it, then the scan's rows."""

    def __init__(self, prefix: Any, ys: torch.Tensor | None):
        self.prefix = list(prefix)
        self.ys = ys

    def stacked(self) -> torch.Tensor | None:
        if self.ys is None:
            return None
        if not self.prefix:
            return self.ys
        return torch.cat([torch.stack(self.prefix), self.ys])


def stack_rows(rows: Any, dim: int = 0) -> torch.Tensor:
    """``torch.stack(rows, dim)`` for a ``Rows`` (or any list)."""
    full = rows.stacked() if isinstance(rows, Rows) else None
    if full is None:
        return torch.stack(rows.prefix if isinstance(rows, Rows) else rows, dim)
    return full.movedim(0, dim)


def cat_rows(rows: Any, dim: int = 0) -> torch.Tensor:
    """``torch.cat(rows, dim)`` for a ``Rows`` (or any list)."""
    full = rows.stacked() if isinstance(rows, Rows) else None
    if full is None:
        return torch.cat(rows.prefix if isinstance(rows, Rows) else rows, dim)
    rank = full.dim() - 1
    d = dim + rank if dim < 0 else dim
    return full.movedim(0, d).flatten(d, d + 1)


# --------------------------------------------------------------------------- source analysis


def dynamic_names(func: ast.FunctionDef) -> set[str]:
    """Names assigned (directly or through other such names) from tensor sizes in ``func``."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and is_dynamic(node.value, found):
                for target in node.targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and sub.id not in found:
                            found.add(sub.id)
                            changed = True
    return found


def is_dynamic(expr: ast.AST, names: set[str]) -> bool:
    """Whether ``expr`` reads a tensor size (``.shape``, ``.size()``, ``len()``...) or such a name."""
    for sub in ast.walk(expr):
        if isinstance(sub, ast.Attribute) and sub.attr in _DYNAMIC_ATTRS:
            return True
        if isinstance(sub, ast.Call):
            f = sub.func
            if (isinstance(f, ast.Attribute) and f.attr in _DYNAMIC_CALLS) or (
                    isinstance(f, ast.Name) and f.id in _DYNAMIC_CALLS):
                return True
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
    return False


def _full_slice(e: ast.AST) -> bool:
    return isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None


def _is_next(e: ast.AST, i: str) -> bool:
    """``i + 1`` or ``1 + i``."""
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add)):
        return False
    sides = (e.left, e.right)
    return any(isinstance(a, ast.Name) and a.id == i for a in sides) and any(
        isinstance(b, ast.Constant) and b.value == 1 for b in sides)


def split_index(index: ast.AST, i: str):
    """``(d, kind, before, after)`` when ``index`` is ``[:, ..., :, i, rest...]`` (kind ``"index"``) or
    ``[:, ..., :, i:i+1, rest...]`` (kind ``"slice"``) with ``i`` nowhere else; None otherwise."""
    elts = list(index.elts) if isinstance(index, ast.Tuple) else [index]
    at = [k for k, e in enumerate(elts) if N.uses_name(e, i)]
    if len(at) != 1:
        return None
    d = at[0]
    if not all(_full_slice(e) for e in elts[:d]):
        return None
    e = elts[d]
    if isinstance(e, ast.Name) and e.id == i:
        kind = "index"
    elif (isinstance(e, ast.Slice) and isinstance(e.lower, ast.Name) and e.lower.id == i and e.step is None
          and _is_next(e.upper, i)):
        kind = "slice"
    else:
        return None
    return d, kind, elts[:d], elts[d + 1:]


def _invariant(expr: ast.AST, changing: set[str]) -> bool:
    """``name`` or ``name.attr.attr`` with ``name`` not rebound in the loop."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id not in changing


class _IndexUses(ast.NodeTransformer):
    """Replaces reads of the loop variable: scanned slices, or the tensor index."""

    def __init__(self, i: str, changing: set[str], fresh: Callable[[str], str]):
        self.i, self.changing, self.fresh = i, changing, fresh
        self.sources: dict[str, tuple[str, ast.AST, int]] = {}  # key -> (name, expr, d)
        self.index = fresh("i")

    def _source(self, expr: ast.AST, d: int) -> str:
        key = f"{ast.dump(expr)}@{d}"
        if key not in self.sources:
            self.sources[key] = (self.fresh("x"), expr, d)
        return self.sources[key][0]

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if not isinstance(node.ctx, ast.Load) or not N.uses_name(node.slice, self.i):
            return self.generic_visit(node)
        split = split_index(node.slice, self.i)
        if split is not None and _invariant(node.value, self.changing | {self.i}):
            d, kind, before, after = split
            name = ast.Name(self._source(node.value, d), ast.Load())
            return self._apply(name, before, kind == "slice", after, node)
        elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        at = [k for k, e in enumerate(elts) if N.uses_name(e, self.i)]
        if len(at) != 1 or not all(_full_slice(e) for e in elts[:at[0]]):
            raise _Refuse(f"subscript '{ast.unparse(node)}' (the loop variable must index one axis, "
                          f"after full slices only)")
        d, e = at[0], elts[at[0]]
        keep = isinstance(e, ast.Slice)
        if keep and not (isinstance(e.lower, ast.Name) and e.lower.id == self.i and e.step is None
                         and _is_next(e.upper, self.i)):
            raise _Refuse(f"slice '{ast.unparse(e)}' with the loop variable as a bound "
                          f"(only '{self.i}' and '{self.i}:{self.i}+1' are scanned)")
        index = ast.Name(self.index, ast.Load()) if keep else self.visit(e)
        call = generated(f"{P}loops.take(_s, {d}, _i, {keep})", node)[0].value
        call.args[0], call.args[2] = self.visit(node.value), index
        kept = [ast.Slice(None, None, None)] if keep else []
        return self._apply(call, elts[:d] + kept, False, elts[d + 1:], node)

    def _apply(self, value: ast.AST, before: list, keep: bool, after: list, node: ast.AST) -> ast.AST:
        """``value[before..., (None if keep), after...]`` (or ``value`` when that selects everything)."""
        rest = [self.visit(e) for e in after]
        elts = list(before) + ([ast.Constant(None)] if keep else []) + rest
        if not elts or all(_full_slice(e) for e in elts):
            return ast.copy_location(value, node)
        return ast.copy_location(ast.Subscript(value, ast.Tuple(elts, ast.Load()), ast.Load()), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id in ("range", "int") and any(
                N.uses_name(a, self.i) for a in node.args):
            raise _Refuse(f"'{ast.unparse(node)}' needs the loop variable as a Python int")
        return self.generic_visit(node)

    def visit_Slice(self, node: ast.Slice) -> ast.AST:
        if N.uses_name(node, self.i):
            raise _Refuse(f"slice '{ast.unparse(node)}' with the loop variable as a bound")
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.i and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Name(self.index, ast.Load()), node)
        return node


class _Len(ast.NodeTransformer):
    """``len(t)`` -> ``loops.length(t)``: a tensor's length stays symbolic (``len`` would specialize it)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1:
            call = generated(f"{P}loops.length(_x)", node)[0].value
            call.args[0] = node.args[0]
            return call
        return node


def _stack_call_arg(call: ast.AST, name: str) -> bool:
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr in STACKING
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "torch"
            and bool(call.args) and isinstance(call.args[0], ast.Name) and call.args[0].id == name)


def _only_stacked_after(func: ast.FunctionDef, name: str, line: int) -> bool:
    allowed = {id(c.args[0]) for c in ast.walk(func) if _stack_call_arg(c, name)}
    return all(id(n) in allowed for n in N.name_loads([func], name) if n.lineno > line)


def generated(source: str, node: ast.AST) -> list[ast.stmt]:
    """Parse ``source`` and give every node the source location of ``node`` (the user's construct)."""
    stmts = ast.parse(source).body
    for s in stmts:
        for sub in ast.walk(s):
            if "lineno" in sub._attributes:
                ast.copy_location(sub, node)
    return stmts


def _tup(names: list[str]) -> str:
    return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"


# --------------------------------------------------------------------------- the rewrite


def unbind_call(it: ast.AST) -> tuple[ast.expr, ast.expr | None] | None:
    """``(E, d)`` when ``it`` is ``E.unbind(d)`` / ``torch.unbind(E, d)`` (``dim=d`` as a keyword;
    ``d`` None when not given), else None."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "unbind"):
        return None
    if any(isinstance(a, ast.Starred) for a in it.args) or any(kw.arg is None for kw in it.keywords):
        return None
    args, keywords = list(it.args), {kw.arg: kw.value for kw in it.keywords}
    f = it.func
    if isinstance(f.value, ast.Name) and f.value.id == "torch":  # torch.unbind(E, d)
        if args:
            source = args.pop(0)
        elif "input" in keywords:
            source = keywords.pop("input")
        else:
            return None
    else:  # E.unbind(d)
        source = f.value
    if len(args) > 1 or (args and keywords) or set(keywords) - {"dim"}:
        return None
    return source, (args[0] if args else keywords.get("dim"))


def _over_rows(node: ast.For, source: ast.expr, ctx) -> ast.For:
    """``for v in E: body`` as ``for k in range(len(E)): v = E[k]; body`` (``E`` is ``source``; same
    statement positions)."""
    k = ctx.fresh("k", node)
    loop = generated(f"for {k} in range(len(_E)):\n    _v = _E[{k}]", node)[0]
    loop.iter.args[0].args[0] = source
    loop.body[0].value.value = source
    loop.body[0].targets = [copy.deepcopy(node.target)]
    loop.body += node.body
    return loop


def _rewrite_rows(node: ast.For, unbind: tuple[ast.expr, ast.expr | None] | None, ctx) -> list[ast.stmt] | None:
    """``for v in E`` (``E`` a name or attribute chain) and ``for v in E.unbind(d)`` /
    ``torch.unbind(E, d)`` (``unbind``: ``unbind_call(node.iter)``): a loop over the rows of ``E`` along
    ``d``, a scan when their number is symbolic while tracing, else a Python loop (lists, static
    sizes). The sequence is evaluated once before the loop, as Python does: ``E.unbind(d)`` as
    ``loops.unbound(E, d)`` (``E.movedim(d, 0)``), ``E`` bound to a name of its own when the loop
    rebinds it. A loop over ``unbind`` that is not
    rewritten is noted with why (its sequence is a tensor's, whose length torch.export then fixes);
    None then, and for a ``for v in E`` not rewritten (``E`` may be a list of modules)."""
    if node.orelse:
        ctx.note(node, "for", False, f"loop over {ast.unparse(node.iter)}: for ... else")
        return None
    hoisted: list[ast.stmt] = []
    source = node.iter
    root = node.iter
    while isinstance(root, ast.Attribute):
        root = root.value
    if unbind is not None or (isinstance(root, ast.Name) and root.id in N.stored_names(node.body)):
        name = ctx.fresh("seq", node)
        if unbind is not None:
            hoisted = generated(f"{name} = {P}loops.unbound(_E)", node)
            hoisted[0].value.args = [a for a in unbind if a is not None]
        else:
            hoisted = generated(f"{name} = _E", node)
            hoisted[0].value = node.iter
        source = ast.Name(name, ast.Load())
    loop = _over_rows(node, source, ctx)  # for v in E: -> for k in range(len(E)): v = E[k]
    try:
        # dynamic=False: a tensor's rows are scanned when len(E) is symbolic; lists stay Python
        stmts = _rewrite_for(loop, ctx, False, anchor=node, shown=ast.unparse(node.iter))
    except _Refuse as e:
        if unbind is not None:
            ctx.note(node, "for", False, f"loop over {ast.unparse(node.iter)}: {e}")
        return None
    ctx.notes[-1].detail += " (a scan over a tensor's rows when their number is dynamic, else a Python loop)"
    return hoisted + stmts


def rewrite_for(node: ast.For, ctx) -> list[ast.stmt] | None:
    """Statements replacing a ``for i in range(...)`` loop, or a loop over a tensor's rows
    (``for v in x``, ``for v in x.unbind(d)``, ``for v in torch.unbind(x, d)``), with a scan, or
    None (with a note in ``ctx`` when the bound is a tensor size or the sequence an ``unbind``) if
    the loop has a form that is not handled."""
    it = node.iter
    unbind = unbind_call(it)
    if unbind is not None or (_invariant(it, set()) and isinstance(node.target, ast.Name) and not node.orelse):
        return _rewrite_rows(node, unbind, ctx)
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
        return None
    dynamic = any(is_dynamic(a, dynamic_names(ctx.func)) for a in it.args)
    if len(it.args) == 3 and not it.keywords and not any(isinstance(a, ast.Starred) for a in it.args):
        # range(start, stop, step): kept as a Python loop, its number of steps read without fixing a size
        call = generated(f"{P}loops.steps(_a, _b, _c)", node)[0].value
        call.args = list(it.args)
        node.iter = call
        ctx.note(node, "for", True, "Python loop over range() with a step, as many steps at every size")
        return [node]
    try:
        return _rewrite_for(node, ctx, dynamic)
    except _Refuse as e:
        if dynamic:
            ctx.note(node, "for", False, str(e))
        return None


_METADATA = frozenset({"dtype", "device", "shape", "ndim", "layout", "is_cuda", "size", "dim"})


def _read_beyond_metadata(name: str, nodes: list[ast.AST]) -> bool:
    """Whether ``nodes`` read ``name`` other than for its metadata (``name.dtype``, ``name.shape``,
    ``name.size(d)``, ``name.dim()``): row writes do not change those, so the scan body may read
    them from the tensor as it was before the loop."""
    metadata = {id(n.value) for top in nodes for n in ast.walk(top)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.attr in _METADATA}
    return any(id(n) not in metadata for n in N.name_loads(nodes, name))


def _rewrite_for(node: ast.For, ctx, dynamic: bool, anchor: ast.For | None = None,
                 shown: str | None = None) -> list[ast.stmt]:
    """The scan form of ``node``, a ``for i in range(...)`` loop; raises ``_Refuse``. ``anchor``: the
    user's loop in the function when ``node`` stands for it (a loop over a tensor's rows), which
    the names bound before and read after are found around; ``shown``: its sequence, for the note."""
    it = node.iter
    anchor = node if anchor is None else anchor
    if not isinstance(node.target, ast.Name):
        raise _Refuse("the loop target is not a single name")
    if it.keywords or not 1 <= len(it.args) <= 2:
        raise _Refuse("range() with a step")
    if node.orelse:
        raise _Refuse("for ... else")
    exits = N.find_exits(node.body, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom,
                                     ast.Global, ast.Nonlocal, ast.Delete))
    if exits:
        raise _Refuse(f"'{type(exits[0]).__name__.lower()}' at line {exits[0].lineno} inside the loop")
    i = node.target.id
    bounds = [_Len().visit(a) for a in it.args]
    start, stop = (ast.Constant(0), bounds[0]) if len(bounds) == 1 else tuple(bounds)
    before, after = ctx.defined_before(anchor), ctx.used_after(anchor)
    if i in after and not ctx.rebound_before_read(anchor, i):
        raise _Refuse(f"the loop variable '{i}' is read after the loop")
    fresh = lambda kind: ctx.fresh(kind, node)  # noqa: E731

    # rows written into preallocated tensors and values appended to lists
    body: list[ast.stmt] = []
    kept: list[ast.stmt] = []
    outputs: list[tuple[str, str, str, Any]] = []  # (y name, "write"/"append", target, extra)
    special: dict[str, str] = {}
    values = []
    for s in node.body:
        target = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else None
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            split = split_index(target.slice, i)
            out = target.value.id
            if split is not None and all(_full_slice(e) or isinstance(e, ast.Constant) and e.value is Ellipsis
                                         for e in split[3]) and out in before:
                d, kind = split[0], split[1]
                if out not in special:
                    special[out] = fresh("y")
                    outputs.append((special[out], "write", out, (d, kind)))
                elif outputs[[o[2] for o in outputs].index(out)][3] != (d, kind):
                    raise _Refuse(f"'{out}' is written along two different dimensions")
                values.append(s.value)
                body.append(generated(f"{special[out]} = {P}loops.row(_v, {out}, {d}, {kind!r})", s)[0])
                body[-1].value.args[0] = s.value
                continue
        call = s.value if isinstance(s, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append"
                and isinstance(call.func.value, ast.Name) and len(call.args) == 1 and not call.keywords
                and (call.func.value.id in before or call.func.value.id.startswith(ROWS))
                and call.func.value.id not in special):
            lst = call.func.value.id
            if not _only_stacked_after(ctx.func, lst, node.end_lineno):
                raise _Refuse(f"list '{lst}' is used after the loop other than by torch.stack / torch.cat")
            special[lst] = fresh("y")
            outputs.append((special[lst], "append", lst, None))
            values.append(call.args[0])
            body.append(ast.copy_location(ast.Assign([ast.Name(special[lst], ast.Store())], call.args[0]), s))
            continue
        body.append(s)
        kept.append(s)
    for name in special:
        if _read_beyond_metadata(name, kept + values) or name in N.stored_names(node.body):
            raise _Refuse(f"'{name}' is read or rebound inside the loop besides its row writes / appends")
    stores = N.subscript_stores(body)
    if stores:
        raise _Refuse(f"in-place write '{ast.unparse(stores[0])} = ...' at line {stores[0].lineno} "
                      f"(only '{ast.unparse(stores[0].value)}[{i}] = ...' rows are scanned)")

    # reads of the loop variable
    changing = N.stored_names(node.body)
    uses = _IndexUses(i, changing, fresh)
    # on copies: a refusal below leaves the loop as written, its reads of the loop variable too
    body = [ast.fix_missing_locations(uses.visit(copy.deepcopy(s))) for s in body]
    stored = N.stored_names(body) - {i}
    late = sorted(n for n in stored - before if n in after and not ctx.rebound_before_read(anchor, n))
    if late:
        raise _Refuse(f"{', '.join(late)} first bound inside the loop and read after it")
    exposed = N.read_before_write(body)
    carried = sorted(n for n in stored if n in before and (n in exposed or n in after))
    src_names = [name for name, _, _ in uses.sources.values()]
    specs = [f"({ast.unparse(expr)}, {d})" for _, expr, d in uses.sources.values()]
    if N.name_loads(body, uses.index) or not specs:  # the index is scanned only when read
        src_names, specs = [uses.index] + src_names, ["(None, 0)"] + specs
    ys_in = [o[0] for o in outputs]
    ys_out = [f"{y}s" for y in ys_in]
    fname = fresh("for")
    lines = [f"def {fname}({P}carry, {P}xs):"]
    if carried:
        lines.append(f"    {_tup(carried)} = {P}carry")
    lines += [f"    {_tup(src_names)} = {P}xs", "    pass",
              f"    return {_tup(carried)}, {_tup(ys_in)}"]
    call = (f"{P}loops.run_scan({fname}, {_tup(carried)}, {ast.unparse(start)}, {ast.unparse(stop)}, "
            f"[{', '.join(specs)}], dynamic={dynamic}, where={ctx.where(node)!r})")
    carried_target = _tup(carried) if carried else "_"
    lines.append(f"{carried_target}, {P}ys = {call}")
    if ys_out:
        lines.append(f"{_tup(ys_out)} = {P}ys if {P}ys is not None else {_tup(['None'] * len(ys_out))}")
    for (y, kind, target, extra), ys in zip(outputs, ys_out):
        if kind == "write":
            lines.append(f"{target} = {P}loops.write_rows({target}, {ys}, {extra[0]}, {ast.unparse(start)})")
        else:
            lines.append(f"{target} = {P}loops.Rows({target}, {ys})")
            ctx.stacked_lists.add(target)
    stmts = generated("\n".join(lines), node)
    fdef = stmts[0]
    k = [j for j, s in enumerate(fdef.body) if isinstance(s, ast.Pass)][0]
    fdef.body[k:k + 1] = body
    what = f"scan over {shown or ast.unparse(it)}"
    parts = [f"carry {', '.join(carried)}" if carried else "no carry"]
    own = ast.unparse(it.args[0].args[0]) if shown else None  # a loop over rows: its sequence, named by ``what``
    scanned = [f"{ast.unparse(e)} along {d}" for _, e, d in uses.sources.values() if ast.unparse(e) != own]
    if scanned:
        parts.append("scanned " + ", ".join(scanned))
    if outputs:
        parts.append("rows of " + ", ".join(o[2] for o in outputs))
    ctx.note(anchor, "for", True, f"{what}: {'; '.join(parts)}")
    return stmts
