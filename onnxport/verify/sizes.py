"""Sizes to validate an export at: where models break, within what the export promises.

``validation_sizes`` assigns every dynamic dimension a size in each set it returns:

* below the example: the range minimum (at least 1), size 1 of each dim on its own where its range
  holds 1 (the others at the example's sizes: torch.export traces sizes from 2 on, so a decision on
  size 1 is where an export differs), the minimum + 1, one between the minimum and the example;
* above it: two sets where every dimension moves by its own amount (dims equal in the example differ),
  and one far above: four times the example, at least ``SEQUENCE_MIN`` on sequence-like dims
  (a dim on another axis than the first), within an element budget (``large_sizes``);
* at each guard's boundary (``onnxport.capture.guards.Guard.boundary``): a size on each side of a condition
  the export adopted or kept, and both parities of one it proved with a ``//`` or ``%``;
* an empty cache: size 0 for each dimension that may be empty (the cached length of a key/value
  cache, ``onnxport.capture.caches``), at the example's and at the minimum sizes of the others.

Only independent dimensions are chosen: a related one (``total = past + seq``,
``onnxport.capture.relations``) is computed from them. Every set lies within the export's ranges
and satisfies its adopted constraints (a set that does not is moved to the nearest sizes that do,
or dropped).
"""

from __future__ import annotations

from typing import Any, Callable

from onnxport.capture.guards import adopted_of
from onnxport.capture.relations import evaluate

MAX_BOUNDARY_SETS = 6
GROWTH = 4  # the far set: this many times the example
SEQUENCE_MIN = 64  # ... and at least this long on sequence-like dims
BUDGET = 1 << 22  # elements of the far set's inputs allowed (or 4x the example's, if more)
_SEARCH = 64  # how far a size may move to satisfy the constraints
SIZE_ONE = "size 1: "  # a set where a dim is 1 (torch.export traces from 2: a branch may differ there)


def validation_sizes(examples: dict[str, int], ranges: dict[str, tuple], guards: list, *,
                     relations: dict | None = None, empty: Any = (), sequence: tuple | list | set = (),
                     cost: Callable[[dict], int] | None = None) -> list[tuple[str, dict]]:
    """``[(why, {dim name: size})]``: the default size sets of ``validate()`` and ``onnxport export``.

    Args:
        examples: dim name -> the example's size.
        ranges: dim name -> ``(min, max)`` the export allows.
        guards: ``onnxport.capture.guards.Guard`` decisions of the export (their ``boundary`` and,
            when adopted, their condition).
        relations: dim name -> sympy expression over other dim names: these dims are computed.
        empty: names of the dims that may be 0 (a cache's cached length).
        sequence: the sequence-like dims (at least ``SEQUENCE_MIN`` in the far set).
        cost: sizes (every dim, related ones included) -> elements of the inputs at those sizes;
            bounds the far set (``large_sizes``).
    """
    if not examples:
        return []
    related = {n: e for n, e in (relations or {}).items() if n in examples}
    constraints = adopted_of(guards)
    symbols = [s for s in examples if s not in related]
    zero = {s for s in empty if s in symbols}
    out: list[tuple[str, dict]] = []
    seen = {tuple(examples[s] for s in symbols)}

    def add(why: str, sizes: dict) -> None:
        fixed = _satisfy({s: sizes[s] for s in symbols}, ranges, constraints, related, zero)
        if fixed is None:
            return
        key = tuple(fixed[s] for s in symbols)
        if key not in seen:
            seen.add(key)
            out.append((why, fixed))

    lows = {s: max(1, ranges.get(s, (1, None))[0]) for s in symbols}
    add("minimum", {s: min(lows[s], examples[s]) for s in symbols})
    for s in symbols:  # size 1 of each dim on its own, the others at the example's
        if lows[s] == 1 and len(symbols) > 1:
            add(f"{SIZE_ONE}{s}", {**{t: examples[t] for t in symbols}, s: 1})
    add("minimum + 1", {s: min(lows[s] + 1, examples[s]) for s in symbols})
    n = len(symbols)  # between the minimum and the example, each dimension at its own fraction of the way
    add("below the example", {s: lows[s] + (examples[s] - lows[s]) * (j + 1) // (n + 1) for j, s in enumerate(symbols)})
    for k, grow in enumerate((lambda e, j: e + 1 + j, lambda e, j: 2 * e + 3 + 2 * j)):
        sizes = {}
        for j, s in enumerate(symbols):
            lo, hi = ranges.get(s, (1, None))
            v = grow(examples[s], j)
            if hi is not None and v > hi:
                v = max(lo, examples[s] - 1 - k)
            sizes[s] = v
        add("above the example", sizes)
    full_cost = None if cost is None else (lambda sz: cost(evaluate(related, sz) if related else sz))
    far = large_sizes({s: examples[s] for s in symbols}, ranges, sequence, full_cost)
    if far is not None:
        add(*far)
    boundary = 0
    for g in guards:
        for point in g.boundary:
            if boundary >= MAX_BOUNDARY_SETS or not all(n in symbols for n in point):
                continue
            before = len(out)
            add(f"{g.status} guard {g.text}", {**examples, **point})
            boundary += len(out) - before
    for s in sorted(zero):
        name = f"empty: {s} = 0"
        add(name, {**examples, s: 0})
        add(name, {**{t: lows[t] for t in symbols}, s: 0})
    return out


def large_sizes(examples: dict[str, int], ranges: dict[str, tuple], sequence=(),
                cost: Callable[[dict], int] | None = None) -> tuple[str, dict] | None:
    """``(why, sizes)`` far above the example: every dim ``GROWTH`` times its example size, sequence-like
    dims at least ``SEQUENCE_MIN``, within the ranges. When ``cost`` says the inputs would exceed
    ``max(BUDGET, GROWTH * cost(examples))`` elements, only the sequence-like dims grow, else only
    one dim (sequence-like first). None when no dim can grow."""
    def target(s: str) -> int:
        v = GROWTH * examples[s]
        return _clamp(max(v, SEQUENCE_MIN) if s in sequence else v, ranges.get(s))

    grown = {s: target(s) for s in examples}
    if not any(grown[s] > examples[s] for s in examples):
        return None
    order = [s for s in examples if s in sequence] + [s for s in examples if s not in sequence]
    choices = [list(examples), [s for s in order if s in sequence]] + [[s] for s in order]
    budget = max(BUDGET, GROWTH * cost(examples)) if cost is not None else None
    for dims in choices:
        sizes = {s: grown[s] if s in dims else examples[s] for s in examples}
        if not dims or sizes == examples:
            continue
        if budget is None or cost(sizes) <= budget:
            which = "" if len(dims) == len(examples) else f" ({', '.join(dims)} only, within {budget:,} elements)"
            return f"{GROWTH}x the example{which}", sizes
    return None


def _satisfy(sizes: dict, ranges: dict, constraints: list, related: dict | None = None,
             zero: Any = ()) -> dict | None:
    """``sizes`` of the independent dims moved into the ranges and, dimension by dimension, to the
    nearest sizes that satisfy every constraint, completed with the related dims (each within its
    range); None when no such sizes are near."""
    related = related or {}

    def clamp(s: str, v: int) -> int:
        return 0 if v == 0 and s in zero else _clamp(v, ranges.get(s))

    def full(trial: dict) -> dict | None:
        out = evaluate(related, trial) if related else dict(trial)
        for n in related:
            lo, hi = ranges.get(n, (1, None))
            if out[n] < max(lo, 0) or (hi is not None and out[n] > hi):
                return None
        return out if _ok(out, constraints) else None

    sizes = {s: clamp(s, v) for s, v in sizes.items()}
    done = full(sizes)
    if done is not None:
        return done
    for s in sizes:
        for delta in _deltas():
            trial = dict(sizes)
            trial[s] = clamp(s, sizes[s] + delta)
            done = full(trial)
            if done is not None:
                return done
    return None


def _deltas():
    for d in range(1, _SEARCH + 1):
        yield d
        yield -d


def _clamp(v: int, r: Any) -> int:
    lo, hi = r if r is not None else (1, None)
    v = max(v, lo, 1)
    return min(v, hi) if hi is not None else v


def _ok(sizes: dict, constraints: list) -> bool:
    return all(g.holds(sizes) for g in constraints)


def respecting(sizes: dict[str, int], constraints: list, ranges: dict[str, tuple] | None = None,
               relations: dict | None = None) -> dict[str, int] | None:
    """Named sizes (dim name -> size) moved to the nearest ones that satisfy ``constraints``
    (``onnxport.capture.guards.Guard``) within ``ranges`` (name -> (min, max)), the dims
    ``relations`` defines computed from the others; None when none are near."""
    related = {n: e for n, e in (relations or {}).items() if n in sizes}
    return _satisfy({n: v for n, v in sizes.items() if n not in related}, ranges or {}, constraints, related)
