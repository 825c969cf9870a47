"""A branch on sizes whose side is the identity where it is not taken runs at every size.

Windowed and patched vision models pad a feature map only when a size is not a whole multiple and
cut the padding off only when there was some (Swin's patch merging, ``if height % 2 == 1 or width %
2 == 1: x = F.pad(x, (0, 0, 0, width % 2, 0, height % 2))``; its layers, ``if pad_right > 0 or
pad_bottom > 0: x = x[:, :height, :width, :].contiguous()``). ``torch.cond`` cannot hold such a
branch at a symbolic size: its sides' shapes differ, so its outputs get sizes known only when it runs,
and the windowing that follows has to decide them. Where the branch is not taken, its side computes
the tensor it is given: a pad by 0, a slice to the end. Then running that side at every size is the
same function, and no branch is needed.

``unconditional(pred, then_fn, else_fn)`` runs one side under a ``TorchFunctionMode`` that lets
through only operations it can show are the identity where ``pred`` does not select that side:

* ``torch.nn.functional.pad`` with amounts that are 0 there; an amount ``a`` that is not is tried as
  ``a % m`` for each modulus ``m`` in its expression (``k - n % k`` -> ``(k - n % k) % k``), kept only
  if it equals ``a`` wherever the side is selected;
* ``torch.roll`` by shifts that are 0 there (Swin's cyclic shift, by a shift that is 0 where the
  feature map is one window), read as for a pad amount;
* ``Tensor.__getitem__`` with slices from 0, step 1, to a stop not below the axis' size there; a
  stop ``-a`` with ``a`` 0 there (``y[..., :-num_pads]`` under ``num_pads > 0``) is read as
  ``size - a``, the same cut where the side is taken;
* layout-only operations: ``contiguous``, ``clone`` (any ``memory_format``), ``detach``, and ``to``,
  ``type_as``, ``float()``, ... that keep the dtype and the device (diffusers' upsampling block,
  ``if hidden_states.shape[0] >= 64: hidden_states = hidden_states.contiguous()``);
* new tensors (``torch.zeros``, ``new_zeros``, ...), each size through the same ``% m`` reading,
  and ``torch.cat`` of tensors of which all but one are empty along the axis there (torchaudio's
  ConvTasNet pads with ``torch.zeros(batch, channels, k - n % k)`` where ``n % k != 0``);
* reading metadata (``shape``, ``size()``, ``dim()``, ...).

The other side must pass its values through (the assignment form of an ``if`` with no ``else``),
and each tensor output of the side run must come from the value the other side passes through by
those operations alone, in its dtype (``torch.cat`` promotes); each other output must equal the
other side's where the side is not taken, as it is or read ``% m`` as for a pad amount (ConvTasNet's
pad count: ``k - n % k`` on one side, 0 on the other). Anything else stops the attempt (the
operations already run are unused and removed), and the caller keeps ``torch.cond``.

Where an output of the side run is a copy of the value the other side passes through (a pad, a roll,
``clone``, a ``contiguous`` or ``to`` that copies, ``torch.cat``; a slice and ``detach`` are views of it),
it holds the same values but is not the same tensor, which eager PyTorch tells apart after the branch: ``y =
x; if n >= 4: x = x.clone()``, then ``x.add_(1)`` changes ``y`` only where ``n < 4``. The side then runs at
every size only where the function holding the ``if`` shows no change in place, layout read or
``global`` / ``nonlocal`` name the ``if`` binds (``capture.layout_branches.copy_unobserved``, the source
checks of layout-only branches), and the capture recording guards takes the copies and the tensors they
copy, to refuse the export once traced where a change in place from elsewhere (a helper, a module built
with ``inplace=True``) advanced one's version counter, or a layout read from elsewhere (the caller's
``is_contiguous()``) followed the branch (``capture.guards.record.follow_layout_branch``,
``capture.layout_reads``).
Where the function shows such a change or read, the branch is refused (``ControlFlowError``):
``torch.cond`` returns copies on both sides, so it would not hold the branch either.

"Where the branch is not taken" is checked over sizes, not proven: the condition and every amount,
as sympy expressions of the model's size symbols, are evaluated at every size of a grid from each
symbol's lower bound (256 consecutive sizes for one symbol, 48 x 48 for two, 16 x 16 x 16 for three;
more symbols are not tried), and at the sizes next to each integer the expressions hold divided by
1, 2, 3, 4, 8 and 16 (the thresholds: ``4 * n > 4000`` is checked at n = 999, 1000, 1001). Amounts
built from ``%``, ``//`` and small polynomials of sizes repeat or grow with a period far below that.
A grid of more than 200,000 points is not tried.

Semantics: PyTorch ``torch.nn.functional.pad`` (a pad by 0 returns the input's values; so does
``torch.roll`` by 0), basic
slicing (``x[:n]`` with ``n >= x.shape[0]`` is all of ``x``; ``x[:-a]`` is ``x[:x.shape[0] - a]`` for
``0 < a <= x.shape[0]``) and ``torch.cat`` (an empty tensor adds nothing).
"""

from __future__ import annotations

import itertools
import math
import operator
from typing import Any, Callable

import sympy
import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

from onnxport.errors import ControlFlowError

_GRID = {1: 256, 2: 48, 3: 16}
_DIVISORS = (1, 2, 3, 4, 8, 16)
_MAX_POINTS = 200_000
_PASSING = {torch.Tensor.contiguous, torch.Tensor.clone, torch.clone, torch.Tensor.detach, torch.detach}
# conversions that are the identity when they keep the dtype and the device (``x.to(x.dtype)``)
_CONVERTING = {torch.Tensor.to, torch.Tensor.type_as, torch.Tensor.float, torch.Tensor.double, torch.Tensor.half,
               torch.Tensor.bfloat16, torch.Tensor.cpu}
_CREATING = {torch.zeros, torch.ones, torch.empty, torch.full}
_NEW = {torch.Tensor.new_zeros, torch.Tensor.new_ones, torch.Tensor.new_empty, torch.Tensor.new_full}
# the operations above whose result shares its source's storage (a view, or the tensor itself); every other
# one returns a copy where it returns another tensor
_ALIASING = {torch.Tensor.__getitem__, torch.Tensor.detach, torch.detach}
_METADATA = {torch.Tensor.size, torch.Tensor.dim, torch.Tensor.numel, torch.Tensor.stride,
             torch.Tensor.is_contiguous, torch.Tensor.element_size}


class _Unproven(Exception):
    """An operation of the side run is not shown to be the identity where the side is not taken."""


class _Observed(_Unproven):
    """The side run copies what the other side passes through, and the function holding the branch may
    tell the copy from the tensor (a change in place, a layout read)."""


def _expr(value: Any) -> Any:
    if isinstance(value, (torch.SymInt, torch.SymBool)):
        return value.node.expr
    if isinstance(value, bool):
        return sympy.true if value else sympy.false
    if isinstance(value, int):
        return sympy.Integer(value)
    raise _Unproven(f"a {type(value).__name__} where a size was expected")


# integer arithmetic of torch's size expressions, by the name of their sympy class
_ARITHMETIC = {
    "Add": lambda *a: sum(a), "Mul": lambda *a: math.prod(a), "Mod": operator.mod, "PythonMod": operator.mod,
    "FloorDiv": operator.floordiv, "Min": min, "Max": max, "StrictGreaterThan": operator.gt,
    "GreaterThan": operator.ge, "StrictLessThan": operator.lt, "LessThan": operator.le, "Equality": operator.eq,
    "Unequality": operator.ne, "And": lambda *a: all(a), "Or": lambda *a: any(a), "Not": operator.not_,
}


class _Unknown(Exception):
    pass


def _evaluator(expr: Any) -> Callable[[dict], Any]:
    """``expr`` at a point (symbol -> int) as Python integer arithmetic: the value sympy's
    ``expr.xreplace(point)`` evaluates to, thousands of times faster over a grid; ``xreplace`` itself
    for an expression holding anything else (a float, a power, a function not listed above)."""
    try:
        return _compiled(expr)
    except _Unknown:
        return expr.xreplace


def _compiled(e: Any) -> Callable[[dict], Any]:
    if e.is_Symbol:
        return lambda p: p[e]
    if e.is_Integer:
        value = int(e)
        return lambda p: value
    if e is sympy.true or e is sympy.false:
        truth = bool(e)
        return lambda p: truth
    name = type(e).__name__
    op = _ARITHMETIC.get(name)
    if op is None or (name in ("Mod", "PythonMod", "FloorDiv") and not (
            len(e.args) == 2 and e.args[1].is_Integer and int(e.args[1]) > 0)):  # a constant divisor only
        raise _Unknown(name)
    args = [_compiled(a) for a in e.args]
    return lambda p: op(*(a(p) for a in args))


class _Grid:
    """The sizes at which the condition is checked, split by its value (``taken`` / ``other``)."""

    def __init__(self, pred: torch.SymBool, side: bool):
        self.env = pred.node.shape_env
        self.pred = pred.node.expr
        self.side = side
        self.taken: list[dict] = []
        self.other: list[dict] = []
        self._symbols: tuple = ()
        self._constants: set[int] = set()
        self._extend(self.pred.free_symbols, _constants(self.pred))

    def _extend(self, symbols: set, constants: set | None = None) -> None:
        symbols = tuple(sorted(set(self._symbols) | set(symbols), key=str))
        self._constants |= set(constants or ())
        if symbols == self._symbols and not constants:
            return
        if len(symbols) not in _GRID:
            raise _Unproven(f"{len(symbols)} size symbols")
        n = _GRID[len(symbols)]
        near = {v for c in self._constants for k in _DIVISORS for v in (c // k - 1, c // k, c // k + 1)}
        axes = []
        for s in symbols:
            r = self.env.var_to_range.get(s) if self.env is not None else None
            lo = max(_bound(r.lower if r is not None else None) or 0, 0)
            hi = _bound(r.upper if r is not None else None)
            values = sorted(set(range(lo, lo + n)) | {v for v in near if v >= lo})
            axes.append([v for v in values if hi is None or v <= hi])
        if math.prod(len(a) for a in axes) > _MAX_POINTS:
            raise _Unproven("too many sizes to check")
        self._symbols = symbols
        self.taken, self.other = [], []
        at = _evaluator(self.pred)
        for values in itertools.product(*axes):
            point = dict(zip(symbols, values))
            holds = bool(at(point)) == self.side
            (self.taken if holds else self.other).append(point)

    def values(self, expr: Any, where: str) -> list:
        """``expr`` at the sizes ``where`` (``"taken"`` or ``"other"``), the grid first extended to
        its symbols and near its constants."""
        if expr.free_symbols - set(self._symbols) or _constants(expr) - self._constants:
            self._extend(expr.free_symbols, _constants(expr))
        at = _evaluator(expr)
        return [at(p) for p in getattr(self, where)]


    def zero_where_other(self, value: Any) -> bool:
        return self.equal_where_other(value, 0)

    def equal_where_other(self, a: Any, b: Any) -> bool:
        diff = _expr(a) - _expr(b)
        return all(v == 0 for v in self.values(diff, "other"))

    def at_least_where_other(self, value: Any, bound: Any) -> bool:
        diff = _expr(value) - _expr(bound)
        return all(bool(v >= 0) for v in self.values(diff, "other"))

    def equal_where_taken(self, a: Any, b: Any) -> bool:
        diff = _expr(a) - _expr(b)
        return all(v == 0 for v in self.values(diff, "taken"))


def _constants(expr: Any) -> set[int]:
    """The integers in ``expr`` above 2 (thresholds and sizes the grid must reach: ``4*n > 4000``)."""
    return {abs(int(a)) for a in expr.atoms(sympy.Integer) if abs(int(a)) > 2}


def _bound(value: Any) -> int | None:
    """A range's bound as an int, None for an infinite one (torch's ``int_oo``) or none. (The capture
    stage has the same reading of a Dim's bound; this stage runs before it.)"""
    try:
        return int(value) if value is not None and abs(float(value)) != float("inf") else None
    except (TypeError, ValueError, OverflowError):
        return None


def _moduli(expr: Any) -> list[int]:
    """The integer moduli and floor divisors in ``expr`` (``n - 8 * (n // 8)`` is ``n % 8``)."""
    out = []
    for sub in expr.atoms(Mod, PythonMod, FloorDiv):
        m = sub.args[1]
        if m.is_Integer and int(m) > 1 and int(m) not in out:
            out.append(int(m))
    return out


def _reading(grid: _Grid, a: Any, want: Any = 0) -> Any:
    """``a``, or else ``a % m`` for a modulus or floor divisor ``m`` in ``a``'s expression, that equals
    ``want`` where the side is not taken and ``a`` where it is (``k - n % k`` -> ``(k - n % k) % k``: the
    same count where ``n % k != 0``, 0 where it is); None when neither does."""
    if grid.equal_where_other(a, want):
        return a
    if isinstance(a, torch.SymInt):
        for m in _moduli(a.node.expr):
            b = a % m
            if grid.equal_where_other(b, want) and grid.equal_where_taken(a, b):
                return b
    return None


def _amount(grid: _Grid, a: Any) -> Any:
    """``a``, or ``a % m``, equal to ``a`` where the side is taken and 0 where it is not."""
    if not isinstance(a, torch.SymInt) and a == 0:
        return a
    read = _reading(grid, a)
    if read is None:
        raise _Unproven(f"pad amount {a} is not 0 where the branch is not taken")
    return read


def _size(grid: _Grid, a: Any) -> Any:
    """A size given to a new tensor: ``a % m`` when that equals ``a`` where the side is taken and is 0
    where it is not (the zeros ConvTasNet concatenates up to a multiple of its stride: ``k - n % k``),
    else ``a`` (the same value where the side is taken either way)."""
    read = _reading(grid, a) if isinstance(a, torch.SymInt) else None
    return a if read is None else read


def _sizes(grid: _Grid, args: tuple) -> tuple:
    """``torch.zeros``' sizes, given one by one or as one sequence, each through ``_size``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        return (tuple(_size(grid, a) for a in args[0]),)
    return tuple(_size(grid, a) for a in args)


def _value(grid: _Grid, got: Any, want: Any) -> Any:
    """A size the side returns (``got``) where the other side returns ``want``: ``got`` when they are
    equal where the side is not taken, else ``got % m`` when that is (and equals ``got`` where it is
    taken: ConvTasNet's pad count, ``k - n % k`` where ``n % k != 0`` and ``0`` where it is)."""
    if got is want or (type(got) is type(want) and not isinstance(got, (torch.SymInt, torch.SymFloat, torch.SymBool))
                       and got == want):
        return got
    if not (isinstance(got, (int, torch.SymInt)) and isinstance(want, (int, torch.SymInt))
            and not isinstance(got, bool) and not isinstance(want, bool)):
        raise _Unproven("a value other than a tensor differs between the sides")
    read = _reading(grid, got, want)
    if read is None:
        raise _Unproven(f"the side's {got} is not the other side's {want} where it is not taken")
    return read


def _is(value: Any, default: int) -> bool:
    """``value`` is None or the int ``default`` (a size is not compared: that would be a guard)."""
    return value is None or (type(value) is int and value == default)


def _slices(grid: _Grid, x: torch.Tensor, index: Any) -> Any:
    """``index`` (slices from 0 by 1 to a stop not below the size where the side is not taken), with a
    stop ``-a`` that is negative where the side is taken and 0 where it is not (``y[..., :-num_pads]``
    under ``num_pads > 0``: all of ``y`` where ``num_pads == 0`` by this if, none by the slice) read as
    ``size - a``, the same cut where the side is taken and the whole axis where it is not."""
    items = index if isinstance(index, tuple) else (index,)
    if sum(i is Ellipsis for i in items) > 1:
        raise _Unproven("two ellipses")
    k = items.index(Ellipsis) if Ellipsis in items else len(items)
    dims = list(range(k)) + list(range(x.dim() - (len(items) - k - 1), x.dim()))
    out = list(items)
    for d, (j, item) in zip(dims, [(j, i) for j, i in enumerate(items) if i is not Ellipsis]):
        if not isinstance(item, slice):
            raise _Unproven(f"index {item!r}")
        if not (_is(item.start, 0) and _is(item.step, 1)):
            raise _Unproven(f"slice {item!r}")
        stop = item.stop
        if isinstance(stop, torch.SymInt) and _negative_where_taken(grid, stop, x.shape[d]):
            stop = x.shape[d] + stop
            out[j] = slice(item.start, stop, item.step)
        if stop is not None and not grid.at_least_where_other(stop, x.shape[d]):
            raise _Unproven(f"slice stop {item.stop} below the size where the branch is not taken")
    return tuple(out) if isinstance(index, tuple) else out[0]


def _negative_where_taken(grid: _Grid, stop: torch.SymInt, size: Any) -> bool:
    """``-size <= stop < 0`` wherever the side is taken (a cut from the end of the axis)."""
    lo, hi = grid.values(_expr(stop) + _expr(size), "taken"), grid.values(_expr(stop), "taken")
    return bool(lo) and all(bool(v >= 0) for v in lo) and all(bool(v < 0) for v in hi)


def _empty_where_other(grid: _Grid, t: Any, dim: int) -> bool:
    """``t`` has no elements along ``dim`` where the side is not taken."""
    return isinstance(t, torch.Tensor) and t.dim() > 0 and grid.zero_where_other(t.shape[dim])


class _IdentityWhereNotTaken(TorchFunctionMode):
    """Runs the operations that are the identity where the side is not taken (see the module's
    docstring), recording each result's source tensor; raises ``_Unproven`` on any other."""

    def __init__(self, grid: _Grid | None):
        super().__init__()
        self.grid = grid
        # id(result) -> (result, source, whether the result is a copy of its source)
        self.source: dict[int, tuple[torch.Tensor, torch.Tensor, bool]] = {}

    def root(self, t: torch.Tensor) -> torch.Tensor:
        while id(t) in self.source:
            t = self.source[id(t)][1]
        return t

    def copied(self, t: torch.Tensor) -> bool:
        """``t`` was computed from its root through a copy (a pad, a ``clone``, a ``contiguous`` that
        copied...), not through views alone: it does not share the root's storage."""
        while id(t) in self.source:
            t, source, copy = self.source[id(t)]
            if copy:
                return True
            t = source
        return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") == "__get__" or func in _METADATA:
            return func(*args, **kwargs)
        if self.grid is None:
            raise _Unproven(getattr(func, "__name__", str(func)))
        if func in (torch.nn.functional.pad, torch._C._nn.pad):
            x, pads = args[0], kwargs.pop("pad", None) if len(args) < 2 else args[1]
            amounts = tuple(_amount(self.grid, a) for a in pads)
            out = func(x, amounts, *args[2:], **kwargs)
        elif func in (torch.roll, torch.Tensor.roll):
            x, shifts = args[0], kwargs.pop("shifts", None) if len(args) < 2 else args[1]
            amounts = tuple(_amount(self.grid, a) for a in shifts) if isinstance(shifts, (tuple, list)) \
                else _amount(self.grid, shifts)
            out = func(x, amounts, *args[2:], **kwargs)
        elif func is torch.Tensor.__getitem__:
            x = args[0]
            out = func(x, _slices(self.grid, x, args[1]), *args[2:], **kwargs)
        elif func in _PASSING:
            x, out = args[0], func(*args, **kwargs)
        elif func in _CONVERTING:
            x, out = args[0], func(*args, **kwargs)
            if not (isinstance(out, torch.Tensor) and out.dtype == x.dtype and out.device == x.device):
                raise _Unproven(f"{func.__name__} converts the tensor")
        elif func in _CREATING or func in _NEW:
            # a new tensor: an output computed from it has it as its root, not the value passed through
            # (so it only serves where ``cat`` shows it empty where the side is not taken)
            k = 1 if func in _NEW else 0
            n = 1 if func in (torch.full, torch.Tensor.new_full) else len(args) - k  # then a fill value
            return func(*args[:k], *_sizes(self.grid, args[k:k + n]), *args[k + n:], **kwargs)
        elif func is torch.cat:
            tensors = args[0] if args else kwargs["tensors"]
            dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            full = [t for t in tensors if not _empty_where_other(self.grid, t, dim)]
            if len(full) != 1:
                raise _Unproven("a concatenation of more than one tensor where the branch is not taken")
            x, out = full[0], func(*args, **kwargs)
        else:
            raise _Unproven(getattr(func, "__name__", str(func)))
        if out is not x:  # ``contiguous()`` of a contiguous tensor is that tensor
            self.source[id(out)] = (out, x, func not in _ALIASING)  # held: its id is not reused while recorded
        return out


def _run_side(pred: torch.SymBool, side: bool, fn: Callable[[], Any], other_fn: Callable[[], Any],
              where: str | None) -> Any:
    with _IdentityWhereNotTaken(None) as passing:
        passed = other_fn()
    grid = _Grid(pred, side)
    with _IdentityWhereNotTaken(grid) as mode:
        out = fn()
    got, spec = pytree.tree_flatten(out)
    want, want_spec = pytree.tree_flatten(passed)
    if spec != want_spec:
        raise _Unproven("the sides return different structures")
    values, copies = [], []
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor) or mode.root(g) is not passing.root(w):
                raise _Unproven("an output is not computed from the value passed through")
            if g.dtype != w.dtype:  # ``torch.cat`` promotes to its operands' widest dtype
                raise _Unproven(f"an output is {g.dtype} where the other side's is {w.dtype}")
            values.append(g)
            if mode.copied(g):
                copies += [mode.root(g), g]
        else:
            values.append(_value(grid, g, w))
    if copies:
        _follow_copies(where, side, copies)
    return pytree.tree_unflatten(values, spec)


def _follow_copies(where: str | None, side: bool, tensors: list[torch.Tensor]) -> None:
    """A side run at every size copies what the other side passes through: the same values, but not the same
    tensor, which a change in place or a read of the memory layout after the branch tells apart (``y = x``;
    ``x = x.clone()`` where the side is taken; ``x.add_(1)`` changes ``y`` where it is not, in eager PyTorch).
    The function holding the branch must show neither (``capture.layout_branches.copy_unobserved``), and
    the trace is checked once done not to have changed ``tensors`` (the roots and their copies) in place
    (``capture.guards.record.follow_layout_branch``); else ``_Unproven``."""
    from onnxport.capture.guards.record import follow_layout_branch
    from onnxport.capture.layout_branches import LayoutBranch, copy_unobserved

    if not copy_unobserved(where):
        raise _Observed("a copy on one side, and a change in place or a layout read where the branch is")
    versions = tuple({id(t): (t, t._version) for t in tensors}.values())
    if not follow_layout_branch(where, LayoutBranch(not side, versions)):
        raise _Unproven("a copy on one side, and no capture to check the trace for changes in place")


def unconditional(pred: torch.SymBool, then_fn: Callable[[], Any], else_fn: Callable[[], Any],
                  where: str | None = None) -> tuple[bool, Any]:
    """Run ``if pred: then_fn() else: else_fn()`` without a branch when one side is the identity
    where it is not taken (see the module's docstring).

    Args:
        pred: the condition, a ``torch.SymBool`` over the model's sizes (not decided by their ranges).
        then_fn, else_fn: the sides, called without arguments; each returns the values the ``if``
            binds (a pytree of tensors and Python values).
        where: the ``if``'s ``file:line in function``; a side making a copy (a pad, a ``clone``) is
            run only where the function there shows no change in place or layout read after it (see
            the module's docstring), which None does not.

    Returns:
        ``(True, outputs)`` of the side run at every size, or ``(False, None)`` when neither side is
        shown to be the identity where it is not taken; nothing is raised for that.

    Raises:
        ControlFlowError: a side is the identity where it is not taken but copies what the other side
            passes through, and the function holding the branch changes a tensor in place or reads a
            memory layout. ``torch.cond`` returns copies on both sides, so it cannot hold the branch
            either: eager PyTorch's result depends on which side ran beyond its values.
    """
    observed = None
    for side, fn, other_fn in ((True, then_fn, else_fn), (False, else_fn, then_fn)):
        try:
            return True, _run_side(pred, side, fn, other_fn, where)
        except _Observed as e:
            observed = e
        except Exception:  # _Unproven, or a side failing here: torch.cond runs it again and reports
            continue
    if observed is not None:
        raise ControlFlowError(
            f"the if at {where} copies on one side (a clone, a contiguous, a pad by 0) the tensor its other side "
            "passes through, and the function holding it changes a tensor in place or reads a memory layout "
            "(is_contiguous(), stride()): what that sees depends on the side taken beyond the values, which "
            "neither one side at every size nor a branch in the ONNX model keeps", where=where,
            hint="make the copy on both sides (or on neither), or write the change in place as an out-of-place "
                 "operation (x = x + 1 for x.add_(1))") from observed
    return False, None
