"""Shape guards: every condition on sizes torch.export's trace relies on, decided over the sizes
the user declared.

While tracing, torch.export assumes conditions on the symbolic sizes (``2*(time//2) < time + 1``
for a ceil-mode pool, ``time//4 != 1`` where it chose not to broadcast, ``time >= 4`` where an
operator needs a minimum). Captured with deferred runtime assertions, these conditions come back
as ``GuardEvent``s; here each one is decided, exactly, over the declared ranges:

* **proved**: true for every declared size (by sympy's range analysis, or by evaluating it with
  Python integers at every size from the minimum up to ``EXHAUSTIVE`` and at sizes spread beyond,
  or on a grid when it involves several dimensions). Dropped without a message.
* **kept**: a condition torch assumes to choose among equivalent traces, not one the model needs
  (two sizes differ, ``time//4 != 1``; its 0/1 specialization, ``batch*time > 1``). The trace is
  usually right at the excluded sizes too: they stay in the export's range, and validation
  compares onnxruntime with eager PyTorch on both sides.
* **adopted**: true on part of the range (``time >= 5``, ``time % 4 == 0``) for a dimension the user
  named without a range (a plain string, ``Dim.AUTO``, ``Dim.DYNAMIC``, ``Dim(name)``): it becomes a
  constraint of the export, stated in one warning, in ``ExportResult.constraints`` and in the ONNX
  metadata.
* **refused**: the same for a dimension whose explicit ``Dim(name, min=..., max=...)`` range it
  cuts (``DynamicShapesError`` naming the line, the condition and the first excluded sizes), or a
  condition the user's own code branched on (``SpecializationError`` naming the ``if``).

Semantics: torch.export's symbolic shapes (``torch.fx.experimental.symbolic_shapes``), with sizes
as Python integers (``//`` floors, ``%`` is Python's modulo, division by zero excludes a size).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import itertools
import math
import types
from typing import Any, Iterable

import sympy

EXHAUSTIVE = 4096  # one dimension: every size from its minimum up to this
SPREAD_TO = 1 << 24  # ... and sizes spread geometrically beyond, up to this
GRID_POINTS = 20_000  # several dimensions: at most this many combinations
SMALL = 256  # a 0/1-specialization guard excludes sizes below this only
DEFAULT_FLOOR = "torch.export's default minimum"  # a kept guard ``n >= 2`` no condition of the model asks
SHOWN = 6  # excluded sizes named in a message
NARROWED = "range narrowed by torch.export"  # an adopted range torch gave, no condition of the model's seen
LAYOUT = "strides or contiguity only"  # a kept guard torch met computing a memory layout only
EAGER_RUNS = "eager PyTorch runs where it excludes"  # adopted on trial: settle keeps it where onnxruntime matches


class GuardStatus(enum.StrEnum):
    """How onnxport decided a guard (see the module docstring)."""

    PROVED = "proved"  # true at every declared size: dropped
    KEPT = "kept"  # torch's choice among equivalent traces: the sizes stay, validation looks on both sides
    ADOPTED = "adopted"  # a constraint of the export, stated in a warning and in the model's metadata


@dataclasses.dataclass(frozen=True)
class SizeVar:
    """One dynamic dimension as the user declared it."""

    symbol: sympy.Symbol  # torch's symbol (``s27``)
    name: str  # the user's name (``time``)
    lo: int  # declared minimum (sizes are checked from 1 on: torch.export does not trace size 0)
    hi: int | None  # declared maximum, None for unbounded
    adoptable: bool  # named without a range: constraints the model needs are adopted, not refused

    def sizes(self, limit: int) -> list[int]:
        """Sizes checked for this dimension: every size from ``lo`` up to ``limit``, then sizes
        spread geometrically up to the maximum (or ``SPREAD_TO``)."""
        top = self.hi if self.hi is not None else SPREAD_TO
        lo = max(1, self.lo)
        out = list(range(lo, min(top, limit) + 1))
        s = max(limit, lo)
        while s < top:
            s = min(top, int(s * 1.5) + 7)
            out.append(s)
        return out


@dataclasses.dataclass(frozen=True)
class Guard:
    """One condition on sizes the export relies on, and how onnxport decided it.

    ``text`` reads in the user's dim names (``time % 4 == 0``, ``time >= 4``); ``status`` a
    ``GuardStatus``; ``excluded`` lists the first size assignments the
    condition excludes (``({"time": 1}, {"time": 2})``); ``boundary`` the assignments on each side
    of its boundary, where validation looks; ``python`` the condition as a Python expression over
    the dim names (``holds()`` evaluates it).
    """

    text: str
    status: GuardStatus
    where: str | None
    excluded: tuple = ()
    boundary: tuple = ()
    method: str = ""
    python: str = "True"
    names: tuple = ()
    note: str = ""  # said after the constraint in its warning (why it was adopted, where that is not the trace)
    remainder: bool = False  # the condition takes a remainder of sizes (a ``Mod`` in torch's expression)
    branched: bool = False  # kept where an installed package's ``if`` branched on it (torch's kind of condition,
    # ``kept_kind``): on a remainder, its other residue classes are traced (``onnxport.remainder_sides``)
    eager_runs: tuple = ()  # sizes it excludes where eager PyTorch ran the model (``EAGER_RUNS``), when not its
    # first excluded ones: where onnxruntime is compared with eager PyTorch before it is dropped (``settle``)

    def __str__(self) -> str:
        return self.text

    @property
    def adopted(self) -> bool:
        """Adopted as a constraint of the export (``GuardStatus.ADOPTED``)."""
        return self.status is GuardStatus.ADOPTED

    def holds(self, sizes: dict[str, int]) -> bool:
        """Whether the condition holds for ``sizes`` (dim name -> size; names it does not read
        may be missing; a name it reads that is missing counts as holding)."""
        if any(n not in sizes for n in self.names):
            return True
        return _call(_compile(self.python, self.names), [sizes[n] for n in self.names])

    def equality(self) -> tuple[sympy.Basic, sympy.Basic] | None:
        """The two sides of a condition ``a == b`` as sympy expressions of its names (integer
        symbols), read back from its Python form (``torch.sym_float(x)`` as ``x``, ``math.floor`` as
        ``floor``, ...); None for another condition or one sympy cannot read."""
        if self.python.count("==") != 1:
            return None
        names = {n: sympy.Symbol(n, integer=True) for n in self.names}
        try:
            sides = tuple(sympy.sympify(side, locals={**_SYMPY_NAMES, **names}) for side in self.python.split("=="))
        except (sympy.SympifyError, SyntaxError, TypeError, AttributeError, ValueError):
            return None
        return sides if all(isinstance(side, sympy.Basic) for side in sides) else None

    def describe(self) -> str:
        """One line: the condition, what decided it, the sizes it excludes and the user's line."""
        parts = [f"{self.text} ({self.status}; {self.method})"]
        if self.excluded:
            parts.append(f"excludes {excluded_text(self.excluded)}")
        if self.where:
            parts.append(f"at {self.where}")
        return ", ".join(parts)


@dataclasses.dataclass
class Outcome:
    """The result of checking one condition: the assignments it excludes among those checked."""

    symbols: tuple
    excluded: list  # tuples of sizes, in ``symbols`` order
    checked: int
    method: str
    complete: bool = True  # every checked assignment is listed in ``excluded`` (not truncated)
    evaluable: bool = True  # False: the condition could not be computed with Python integers


# ------------------------------------------------------------------------------ evaluation
# the names torch's PythonPrinter writes into a condition's Python form, as sympy reads them
_SYMPY_NAMES = {
    "torch": types.SimpleNamespace(sym_float=lambda x: x, _sym_sqrt=sympy.sqrt),
    "math": types.SimpleNamespace(floor=sympy.floor, ceil=sympy.ceiling, sqrt=sympy.sqrt, log=sympy.log,
                                  trunc=lambda x: sympy.sign(x) * sympy.floor(abs(x)), inf=sympy.oo, nan=sympy.nan),
}


@functools.lru_cache(maxsize=4096)
def _compile(python: str, names: tuple) -> Any:
    import torch  # the printer writes torch.sym_float(...) for float casts of sizes

    return eval(f"lambda {', '.join(names) or '_unused=0'}: {python}", {"math": math, "torch": torch})  # noqa: S307


def _shared_form(expr: sympy.Basic) -> tuple[list, sympy.Basic]:
    """``(assignments, reduced)``: sympy's ``cse`` of ``expr``, each subexpression it repeats named
    once (``_t0 = ...``) in order; ``([], expr)`` when cse cannot take it. The sizes a chain of
    "same"-padded convolutions reach nest the previous layer's expression several times: whole,
    they would be evaluated and bounded again at every level."""
    try:
        shared, (reduced,) = sympy.cse(expr, symbols=sympy.numbered_symbols("_t", integer=True))
        return shared, reduced
    except Exception:  # noqa: BLE001 - an expression cse cannot take is used whole
        return [], expr


def _compile_shared(shared: list, reduced: sympy.Basic, rename: dict, names: tuple) -> Any:
    """The condition ``_shared_form`` gave, as a Python function of ``names`` (``rename``: symbol
    -> name), each shared subexpression computed once."""
    from torch.utils._sympy.printers import PythonPrinter

    symbols = {s: sympy.Symbol(n, integer=True) for s, n in rename.items()}
    printer = PythonPrinter()
    lines = [f"def _condition({', '.join(names) or '_unused=0'}):"]
    lines += [f"    {t} = {printer.doprint(e.xreplace(symbols))}" for t, e in shared]
    lines.append(f"    return {printer.doprint(reduced.xreplace(symbols))}")
    import torch  # the printer writes torch.sym_float(...) for float casts of sizes

    namespace = {"math": math, "torch": torch}
    exec("\n".join(lines), namespace)  # noqa: S102 - code printed from the condition itself
    return namespace["_condition"]


def _call(fn, args) -> bool:
    try:
        return bool(fn(*args))
    except (ZeroDivisionError, ValueError, OverflowError, ArithmeticError):
        return False  # a size where the condition cannot even be computed fails at run time too


def python_text(expr: sympy.Basic, rename: dict | None = None) -> str:
    """``expr`` as a Python expression (``//``, ``%``, ``==``), symbols renamed per ``rename``."""
    from torch.utils._sympy.printers import PythonPrinter

    if rename:
        expr = expr.xreplace({s: sympy.Symbol(n, integer=True) for s, n in rename.items()})
    return PythonPrinter().doprint(expr)


def check(expr: sympy.Basic, variables: dict[sympy.Symbol, SizeVar]) -> Outcome:
    """Evaluate the boolean ``expr`` over the declared sizes of its symbols.

    One symbol: every size from its minimum up to ``EXHAUSTIVE``, then sizes spread beyond; several:
    a grid of at most ``GRID_POINTS`` combinations. sympy's range analysis decides first when it can.
    """
    symbols = tuple(sorted(expr.free_symbols, key=str))
    shared, reduced = _shared_form(expr)
    if _proved_by_ranges(shared, reduced, [variables[s] for s in symbols]):
        return Outcome(symbols, [], 0, "proved by range analysis")
    names = tuple(f"v{i}" for i in range(len(symbols)))
    try:
        fn = _compile_shared(shared, reduced, dict(zip(symbols, names)), names)
        _call(fn, [variables[s].lo for s in symbols])
    except Exception as e:  # noqa: BLE001 - a form the printer or Python cannot compute
        return Outcome(symbols, [], 0, f"not computable with integers ({type(e).__name__})", evaluable=False)
    if len(symbols) == 1:
        var = variables[symbols[0]]
        sizes = [sorted(set(var.sizes(EXHAUSTIVE)) | set(_roots_beyond(expr, symbols[0], var)))]
        method = _sizes_text(sizes[0])
    else:
        per = max(2, int(GRID_POINTS ** (1 / len(symbols))))
        sizes = [_grid_axis(variables[s], per) for s in symbols]
        method = f"a grid of {math.prod(len(s) for s in sizes)} size combinations"
    excluded, checked = [], 0
    for point in itertools.product(*sizes):
        checked += 1
        if not _call(fn, point):
            excluded.append(point)
    return Outcome(symbols, excluded, checked, method)


def _roots_beyond(expr: sympy.Basic, symbol: sympy.Symbol, var: SizeVar) -> list[int]:
    """Sizes beyond ``EXHAUSTIVE`` where a comparison in ``expr`` of one size with a polynomial of it changes
    (``Ne(time, 5000)``: 4999, 5000 and 5001), in ``var``'s range: the sizes spread beyond step over them, and a
    condition false at one size only (``x.shape[1] != 5000``) would read as proved."""
    out: set[int] = set()
    hi = var.hi if var.hi is not None else SPREAD_TO
    if hi <= EXHAUSTIVE:  # every size is checked one by one
        return []
    for rel in expr.atoms(sympy.Rel):
        try:
            poly = sympy.Poly(rel.lhs - rel.rhs, symbol)
        except sympy.PolynomialError:
            continue
        if poly.degree() < 1 or poly.degree() > 2:
            continue
        for root in poly.nroots(n=15):
            if not root.is_real:
                continue
            k = math.floor(float(root))
            out.update(v for v in range(k - 1, k + 3) if EXHAUSTIVE < v <= hi and v >= var.lo)
    return sorted(out)


def _proved_by_ranges(shared: list, reduced: sympy.Basic, variables: list[SizeVar]) -> bool:
    """Whether torch's range analysis proves the condition ``_shared_form`` gave over the declared
    sizes, each shared subexpression bounded once (the same bounds as over the whole tree)."""
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    ranges = {v.symbol: ValueRanges(max(1, v.lo), v.hi if v.hi is not None else sympy.oo) for v in variables}
    try:
        for t, e in shared:
            ranges[t] = bound_sympy(e, ranges)
        bound = bound_sympy(reduced, ranges)
    except Exception:  # noqa: BLE001 - an expression range analysis cannot take is evaluated instead
        return False
    return bool(bound.lower is sympy.true or bound.lower == True)  # noqa: E712 - sympy booleans


def _grid_axis(var: SizeVar, per: int) -> list[int]:
    dense = var.sizes(var.lo + max(2, per * 2 // 3) - 1)
    return sorted(set(dense[:per]))


def _sizes_text(sizes: list[int]) -> str:
    dense = 0
    while dense + 1 < len(sizes) and sizes[dense + 1] == sizes[dense] + 1:
        dense += 1
    extra = len(sizes) - dense - 1
    text = f"every size {sizes[0]}..{sizes[dense]}"
    return text + (f" and {extra} larger up to {sizes[-1]}" if extra else "")


# ------------------------------------------------------------------------------ reading a result
def excluded_text(excluded: Iterable[dict], limit: int = SHOWN) -> str:
    """``time = 1, 2, 3`` or ``(batch=1, time=3), (batch=1, time=4)``, the first ``limit`` of them."""
    items = list(excluded)
    shown = items[:limit]
    more = ", ..." if len(items) > limit else ""
    if shown and all(len(d) == 1 for d in shown) and len({next(iter(d)) for d in shown}) == 1:
        name = next(iter(shown[0]))
        return f"{name} = " + ", ".join(str(d[name]) for d in shown) + more
    return ", ".join("(" + ", ".join(f"{k}={v}" for k, v in d.items()) + ")" for d in shown) + more


def compares_with_one(expr: sympy.Basic) -> bool:
    """``a != b``, or a size expression compared with 1 (``e > 1``, ``e >= 2``, ``256*e > 256``,
    ``3*e > 1``, ``e > 4`` where ``e`` is always a multiple of 4):
    the conditions torch assumes to pick one trace among equivalent ones ("is this size 1?", "is
    this slice the whole axis?"), as opposed to ``e >= 1`` or ``time % 4 == 0``, which a model needs."""
    if isinstance(expr, sympy.Ne):
        return True
    if not isinstance(expr, (sympy.StrictGreaterThan, sympy.StrictLessThan, sympy.GreaterThan, sympy.LessThan)):
        return False
    greater = isinstance(expr, (sympy.StrictGreaterThan, sympy.GreaterThan))
    strict = isinstance(expr, (sympy.StrictGreaterThan, sympy.StrictLessThan))
    size, bound = (expr.lhs, expr.rhs) if greater else (expr.rhs, expr.lhs)
    if bound == (1 if strict else 2) and size.free_symbols:
        return True  # "q_length > 1" for q_length = (frames - 1)//4 + 1, which expanding would turn into "... > 0"
    diff = sympy.expand(size - bound)
    k = diff.as_coeff_Add()[0]
    rest = diff - k
    if not rest.free_symbols:
        return False
    c = sympy.gcd_terms(rest).as_coeff_Mul()[0]
    if not (c.is_Number and c > 0):
        return False
    # the condition reads c*e > -k (strict) or c*e >= -k: "c*e > 1" or "e > 1", as ">= 2" when not strict
    if -k in ((1, c) if strict else (2, 2 * c)):
        return True
    # e > m where e only takes multiples of m (a padded length compared with its chunk: "e/m > 1")
    m = -k / c if strict else -k / (2 * c)
    return bool(m.is_Integer and m >= 2 and _always_multiple(rest / c, int(m)))


def _always_multiple(expr: sympy.Basic, m: int) -> bool:
    """Whether the size expression ``expr`` is a multiple of ``m`` at every size tried (each symbol
    from 1 to 64, or a grid of 1..8 for several): ``seq + (4 - seq % 4) % 4`` for ``m = 4``."""
    symbols = tuple(sorted(expr.free_symbols, key=str))
    if not symbols or len(symbols) > 3:
        return False
    names = tuple(f"v{i}" for i in range(len(symbols)))
    try:
        fn = _compile(python_text(expr, dict(zip(symbols, names))), names)
        values = [fn(*p) for p in itertools.product(*[range(1, 65 if len(symbols) == 1 else 9)] * len(symbols))]
    except Exception:  # noqa: BLE001 - a form Python cannot compute is not recognized
        return False
    return all(isinstance(v, int) and v % m == 0 for v in values)


def kept_kind(expr: sympy.Basic, outcome: Outcome) -> bool:
    """A condition torch assumes to pick one trace among equivalent ones, not one the model needs
    (``compares_with_one``), excluding sizes the trace may well hold for: a ``!=`` anywhere, a
    comparison with 1 at a few small sizes only. Eager PyTorch usually runs the same computation
    there, so those sizes stay in the export's range and validation compares onnxruntime with
    eager PyTorch on both sides."""
    if not outcome.excluded or not compares_with_one(expr):
        return False
    if isinstance(expr, sympy.Ne):
        return True
    return outcome.complete and all(max(p) < SMALL for p in outcome.excluded)


def readable(expr: sympy.Basic, outcome: Outcome, variables: dict[sympy.Symbol, SizeVar]) -> tuple[str, str, tuple]:
    """``(text, python, names)`` of the condition in the user's names: ``text`` a simple form
    (``time >= 4``, ``time % 4 == 0``, ``time <= 8``) when one matches every checked size exactly,
    else the expression; ``python`` always the expression itself."""
    rename = {s: variables[s].name for s in outcome.symbols}
    names = tuple(rename[s] for s in outcome.symbols)
    python = python_text(expr, rename)
    if len(outcome.symbols) == 1 and outcome.excluded:
        var = variables[outcome.symbols[0]]
        simple = _simple_form(var, {p[0] for p in outcome.excluded}, python)
        if simple is not None:
            return simple, python, names
    return python, python, names


def _simple_form(var: SizeVar, excluded: set[int], python: str | None = None) -> str | None:
    """A simple text for the condition that excludes ``excluded`` of ``var.sizes(EXHAUSTIVE)``: a bound,
    a window, a remainder. An upper bound is the exact last size that holds: where the sizes checked
    leave a gap above the last one allowed, it is found there from the condition itself (``python``,
    over ``var.name``: ``last_holding``), and without it no upper bound is offered."""
    sizes = sorted(set(var.sizes(EXHAUSTIVE)) | excluded)  # with the sizes checked beyond (``_roots_beyond``)
    allowed = [s for s in sizes if s not in excluded]
    if not allowed:
        return None
    n = var.name
    top = allowed[-1]
    above = next((s for s in sizes if s > top), None)
    if above is not None and above > top + 1:  # sizes between were not checked: where does it change?
        try:
            top = last_holding(_compile(python, (n,)), top, above) if python else None
        except Exception:  # noqa: BLE001 - a condition Python cannot compute offers no exact bound
            top = None
    candidates = [f"{n} >= {allowed[0]}"]
    if top is not None:
        candidates += [f"{n} <= {top}", f"{n} >= {allowed[0]} and {n} <= {top}"]
    probe = [s for s in allowed if s < allowed[0] + 256]  # residues show on the first sizes; checked on all below
    for p in range(2, 65):
        residues = sorted({s % p for s in probe if s >= allowed[0] + p})
        if not residues or len(residues) == p:
            continue
        mod = f"{n} % {p} == {residues[0]}" if len(residues) == 1 else f"{n} % {p} in {tuple(residues)}"
        candidates += [mod, f"{mod} and {n} >= {allowed[0]}"]
    for text in candidates:
        fn = _compile(text, (n,))
        if all(_call(fn, (s,)) == (s not in excluded) for s in sizes):
            return text
    return None


DENSE_GAP = 1 << 16  # last_holding checks every size of a gap up to this long


def last_holding(fn: Any, below: int, above: int) -> int | None:
    """The size ``b`` (``below <= b < above``) where the condition ``fn`` of one size changes once
    between ``below`` (where it holds) and ``above`` (where it fails): it holds at every size up to
    ``b`` and at none from ``b + 1`` to ``above``. Checked at every size of a gap up to ``DENSE_GAP``
    long, else found by bisection and checked at every size within ``EXHAUSTIVE`` of ``b``; None
    where it changes more than once there."""
    if not _call(fn, (below,)) or _call(fn, (above,)):
        return None
    if above - below <= DENSE_GAP:
        values = [_call(fn, (s,)) for s in range(below, above + 1)]
        b = below + values.index(False) - 1
        return b if not any(values[b - below + 1:]) else None
    lo, hi = below, above
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _call(fn, (mid,)):
            lo = mid
        else:
            hi = mid
    holds = all(_call(fn, (s,)) for s in range(max(below, lo - EXHAUSTIVE), lo + 1))
    return lo if holds and not any(_call(fn, (s,)) for s in range(lo + 1, min(above, lo + EXHAUSTIVE) + 1)) else None


def boundary_points(expr: sympy.Basic, outcome: Outcome, status: GuardStatus, variables: dict) -> tuple:
    """Size assignments (in ``outcome.symbols`` order) where validation looks: for a condition
    that excludes sizes, the allowed neighbours of its first excluded run (and, when kept, the
    first excluded size itself); for a proved condition of one symbol that divides it (``time//4``),
    the two sizes around the first multiple of the divisor past the minimum."""
    if len(outcome.symbols) != 1:
        return tuple(outcome.excluded[:1]) if status is GuardStatus.KEPT else ()
    lo = max(1, variables[outcome.symbols[0]].lo)
    if not outcome.excluded:
        divisors = sorted({int(a.args[1]) for a in expr.atoms(sympy.Function)
                           if len(a.args) == 2 and a.args[1].is_Integer and int(a.args[1]) >= 2})
        out = []
        for d in divisors[:2]:
            m = d * max(1, -(-(max(lo, 2) + 1) // d))
            out += [(m - 1,), (m,)]
        return tuple(out)
    excluded = {p[0] for p in outcome.excluded}
    first = min(excluded)
    end = first
    while end + 1 in excluded:
        end += 1
    pts = [first - 1, end + 1] + ([first] if status is GuardStatus.KEPT else [])
    return tuple((p,) for p in pts if p >= lo and (p not in excluded or status is GuardStatus.KEPT))


# ------------------------------------------------------------------------------ decisions
def decide(conditions: list[tuple],
           variables: dict[sympy.Symbol, SizeVar]) -> list[Guard]:
    """Decide each ``(condition, user line, branching line[, layout only[, far bound[, eager runs[,
    needed]]]])`` (``needed``: the user's branch read as a condition the model needs, never torch's choice
    among equivalent traces, ``kept_kind``, whichever side the example takes); returns the
    ``Guard``s in the order decided (simple conditions first, each checked only on the sizes earlier
    adoptions allow). A condition met only while torch computed strides (layout only) is kept, not
    adopted; one that sets the far bound of a branch read as such (``far_bounds.FarBound``) is adopted
    as that bound, with its note.

    Axes the user named alike are one size (``input_ids`` and ``attention_mask`` both ``seq``): where
    torch gave them symbols of their own, each condition reads them as one (``Eq(s70, s53)`` holds by
    the declaration).

    Raises:
        SpecializationError: a condition the user's own code branched on excludes declared sizes.
        DynamicShapesError: a condition excludes sizes of an explicit ``Dim`` range.
    """
    checked = []
    seen = set()
    same = same_name_substitutions(variables)
    for expr, where, branch, *rest in conditions:
        layout, far = (rest[0] if rest else False), (rest[1] if len(rest) > 1 else None)
        runs, given = (rest[2] if len(rest) > 2 else None), expr
        needed = bool(rest[3]) if len(rest) > 3 else False  # the user's branch read as the model's condition
        if same and isinstance(expr, sympy.Basic):
            expr = expr.xreplace(same)
        if not isinstance(expr, sympy.Basic) or expr in (sympy.true, sympy.false) or not expr.free_symbols \
                or not expr.free_symbols <= variables.keys() or str(expr) in seen:
            continue
        seen.add(str(expr))
        outcome = check(expr, variables)
        checked.append((expr, where, branch, outcome, readable(expr, outcome, variables), bool(layout), far,
                        runs, given, needed))
    # conditions the model may need first (simplest first), torch's "these sizes differ" ones last,
    # so each is checked on the sizes the adopted constraints leave
    checked.sort(key=lambda c: (isinstance(c[0], sympy.Ne), len(c[3].symbols), c[4][0] == c[4][1], len(c[4][0])))
    guards: list[Guard] = []
    for expr, where, branch, outcome, (text, python, names), layout, far, runs, given, needed in checked:
        adopted = adopted_of(guards)
        points = [p for p in outcome.excluded if _allowed(p, outcome.symbols, variables, adopted)]
        outcome = dataclasses.replace(outcome, excluded=points)
        excluded = tuple({variables[s].name: v for s, v in zip(outcome.symbols, p)} for p in points[:SHOWN + 1])
        if not outcome.evaluable:  # undecided: the sizes stay, validation looks
            guards.append(Guard(python, GuardStatus.KEPT, where, (), (), outcome.method, "True", ()))
            continue
        remainder = takes_remainder(expr)
        if not points:
            method = outcome.method + (" with the adopted constraints" if adopted and outcome.checked else "")
            guards.append(Guard(python, GuardStatus.PROVED, where, (),
                                boundary_of(expr, outcome, GuardStatus.PROVED, variables), method, python, names,
                                remainder=remainder))
            continue
        if layout:  # a memory layout torch picked (strides): no value depends on it
            guards.append(Guard(python, GuardStatus.KEPT, where, excluded,
                                boundary_of(expr, outcome, GuardStatus.KEPT, variables), LAYOUT, python, names,
                                remainder=remainder))
            continue
        if branch and not (kept_kind(expr, outcome) and in_installed_package(branch)):
            raise branch_error(text, excluded, branch, python, names)
        if far is not None and far.sets(python, names, variables[outcome.symbols[0]].lo):  # guards.far_bounds
            guards.append(far.mark(Guard(text, GuardStatus.ADOPTED, where, excluded, (), outcome.method, python,
                                         names, remainder=remainder)))
            continue
        method, branched = outcome.method, False
        if kept_kind(expr, outcome) and not needed:
            status, text, where, branched = GuardStatus.KEPT, python, branch or where, bool(branch)
        elif runs:  # eager PyTorch runs where it excludes: adopted on trial, judged in onnxruntime (settle)
            status, method = GuardStatus.ADOPTED, EAGER_RUNS
        elif all(variables[s].adoptable for s in outcome.symbols):
            status = GuardStatus.ADOPTED
        else:
            error = range_error(text, excluded, where, [variables[s] for s in outcome.symbols])
            error.condition_expr, error.excluded = given, excluded
            raise error
        guards.append(Guard(text, status, where, excluded, boundary_of(expr, outcome, status, variables),
                            method, python, names, remainder=remainder, branched=branched))
    return guards


def takes_remainder(expr: sympy.Basic) -> bool:
    """Whether ``expr`` takes a remainder of sizes: a ``Mod`` (sympy's, or torch's ``Mod``,
    ``PythonMod``, ``ModularIndexing`` of ``torch.utils._sympy.functions``) anywhere in it."""
    from torch.utils._sympy import functions as F

    kinds = (sympy.Mod, F.Mod, F.PythonMod, F.ModularIndexing)
    return any(isinstance(node, kinds) for node in sympy.preorder_traversal(expr))


def same_name_substitutions(variables: dict[sympy.Symbol, SizeVar]) -> dict[sympy.Symbol, sympy.Symbol]:
    """torch's symbols of one declared name beyond the first -> the first."""
    first: dict[str, sympy.Symbol] = {}
    out = {}
    for sym, var in variables.items():
        if var.name in first:
            out[sym] = first[var.name]
        else:
            first.setdefault(var.name, sym)
    return out


def adopted_of(guards: Iterable[Guard]) -> list[Guard]:
    """The guards adopted as constraints of the export, in order."""
    return [g for g in guards if g.adopted]


def in_installed_package(where: str) -> bool:
    """True when the line ``where`` (``file:line in func: code``) is in an installed package
    (``site-packages``), not in the user's own files: a branch there on torch's 0/1
    specialization (``q_length == 1``) cannot be rewritten by the user; the export keeps the sizes
    on both sides and validation compares them."""
    from onnxport.errors import in_site_packages

    return in_site_packages(where.split(":", 1)[0])


def _allowed(point: tuple, symbols: tuple, variables: dict, adopted: list[Guard]) -> bool:
    sizes = {variables[s].name: v for s, v in zip(symbols, point)}
    return all(g.holds(sizes) for g in adopted)


def boundary_of(expr: sympy.Basic, outcome: Outcome, status: GuardStatus, variables: dict) -> tuple:
    """``boundary_points`` as ``{name: size}`` assignments."""
    return tuple({variables[s].name: v for s, v in zip(outcome.symbols, p)}
                 for p in boundary_points(expr, outcome, status, variables))


def range_guard(var: SizeVar, lower: int, upper: int | None, where: str | None) -> Guard:
    """The adopted range ``lower..upper`` of ``var`` (narrowed from its declared one) as a Guard."""
    parts, excluded = [], []
    lo = max(1, var.lo)
    if lower > lo:
        parts.append(f"{var.name} >= {lower}")
        excluded += [{var.name: s} for s in range(lo, min(lower, lo + SHOWN + 1))]
    if upper is not None and (var.hi is None or upper < var.hi):
        parts.append(f"{var.name} <= {upper}")
        top = var.hi if var.hi is not None else upper + SHOWN + 1
        excluded += [{var.name: s} for s in range(upper + 1, min(top, upper + SHOWN + 1) + 1)]  # "..." beyond
    text = " and ".join(parts) or f"{var.name} >= {lo}"
    boundary = tuple({var.name: s} for s in (lower - 1, lower) if s >= 1) + \
        (tuple({var.name: s} for s in (upper, upper + 1))
         if upper is not None and upper < (var.hi or SPREAD_TO) else ())
    return Guard(text, GuardStatus.ADOPTED, where, tuple(excluded), boundary, NARROWED, text,
                 (var.name,))


def kept_range_guard(var: SizeVar, lower: int, upper: int | None, cause: Any, where: str | None) -> Guard:
    """torch traced ``var`` for ``lower..upper`` only, from one of its 0/1 specializations
    (``cause``, e.g. ``time//4 > 1``): the export keeps ``var.lo..var.hi``, and validation looks
    at the sizes torch left out."""
    if cause is not None and cause.free_symbols == {var.symbol}:
        text = python_text(cause, {var.symbol: var.name})
    else:
        text = " and ".join([f"{var.name} >= {lower}"] + ([f"{var.name} <= {upper}"] if upper is not None else []))
    lo = max(1, var.lo)
    excluded = [{var.name: s} for s in range(lo, min(lower, lo + SHOWN + 1))]
    if upper is not None and (var.hi is None or upper < var.hi):
        excluded.append({var.name: upper + 1})
    boundary = tuple({var.name: s} for s in (lower - 1, lower, lo) if s >= lo)
    return Guard(text, GuardStatus.KEPT, where, tuple(excluded), boundary, "range torch.export traced", "True", ())


def branch_error(text: str, excluded: tuple, branch: str, python: str | None = None, names: tuple = ()):
    """The refusal of a branch on a size; ``python`` (over the dim ``names``) is the condition the
    example's side holds where it can be evaluated, read by ``onnxport.pieces`` to export each side."""
    from onnxport.errors import SpecializationError

    error = SpecializationError(
        f"the model's code branches on a size: the export would follow one side of the branch and hold "
        f"only where {text} ({excluded_text(excluded)} would take the other side, which the trace does not hold)",
        where=branch,
        hint="pass rewrite_control_flow=True to export both sides as an ONNX If, or write the branch with "
             "torch.cond(pred, true_fn, false_fn, operands); if one side is all you need, declare the range "
             "with Dim(name, min=..., max=...)")
    error.branch, error.excluded = branch, tuple(excluded)  # read by capture.refused_sides
    error.condition = (python, tuple(names)) if python is not None and names else None
    return error


def range_error(text: str, excluded: tuple, where: str | None, variables: list[SizeVar]):
    from onnxport.errors import DynamicShapesError

    declared = ", ".join(f"{v.name} in [{v.lo}, {v.hi if v.hi is not None else 'inf'}]" for v in variables)
    return DynamicShapesError(
        f"the model requires {text}, which the declared range ({declared}) does not guarantee: "
        f"it excludes {excluded_text(excluded)}",
        where=where,
        hint="declare a range the model takes (Dim(name, min=..., max=...), or min/max in a config's [dims]), "
             "or give the dimension no range (a plain-string name, a config dim without min/max) to let "
             "onnxport adopt the constraint with a warning")
