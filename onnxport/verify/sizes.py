"""Sizes to validate an export at: where models break, within what the export promises.

``validation_sizes`` assigns every dynamic dimension a size in each set it returns:

* below the example: the range minimum (at least 1), the minimum + 1, one between the minimum and
  the example;
* above it: two sets where every dimension moves by its own amount (dims equal in the example differ);
* at each guard's boundary (``onnxport.capture.guards.Guard.boundary``): a size on each side of a condition
  the export adopted or kept, and both parities of one it proved with a ``//`` or ``%``.

Every set lies within the export's ranges and satisfies its adopted constraints (a set that does
not is moved to the nearest sizes that do, or dropped).
"""

from __future__ import annotations

from typing import Any

MAX_BOUNDARY_SETS = 6
_SEARCH = 64  # how far a size may move to satisfy the constraints


def validation_sizes(examples: dict[str, int], ranges: dict[str, tuple], guards: list) -> list[tuple[str, dict]]:
    """``[(why, {dim name: size})]``: the default size sets of ``validate()`` and ``onnxport export``.

    Args:
        examples: dim name -> the example's size.
        ranges: dim name -> ``(min, max)`` the export allows.
        guards: ``onnxport.capture.guards.Guard`` decisions of the export (their ``boundary`` and,
            when adopted, their condition).
    """
    names = {n: n for n in examples}
    if not examples:
        return []
    constraints = [g for g in guards if g.status == "adopted"]
    symbols = list(examples)
    out: list[tuple[str, dict]] = []
    seen = {tuple(examples[s] for s in symbols)}

    def add(why: str, sizes: dict) -> None:
        fixed = _satisfy(sizes, ranges, names, constraints)
        if fixed is None:
            return
        key = tuple(fixed[s] for s in symbols)
        if key not in seen:
            seen.add(key)
            out.append((why, fixed))

    lows = {s: max(1, ranges.get(s, (1, None))[0]) for s in symbols}
    add("minimum", {s: min(lows[s], examples[s]) for s in symbols})
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
    by_name = {n: s for s, n in names.items()}
    boundary = 0
    for g in guards:
        for point in g.boundary:
            if boundary >= MAX_BOUNDARY_SETS or not all(n in by_name for n in point):
                continue
            before = len(out)
            add(f"{g.status} guard {g.text}", {**examples, **{by_name[n]: v for n, v in point.items()}})
            boundary += len(out) - before
    return out


def _satisfy(sizes: dict, ranges: dict, names: dict, constraints: list) -> dict | None:
    """``sizes`` moved into the ranges and, dimension by dimension, to the nearest sizes that
    satisfy every constraint; None when no such sizes are near."""
    sizes = {s: _clamp(v, ranges.get(s)) for s, v in sizes.items()}
    if _ok(sizes, names, constraints):
        return sizes
    for s in sizes:
        for delta in _deltas():
            trial = dict(sizes)
            trial[s] = _clamp(sizes[s] + delta, ranges.get(s))
            if _ok(trial, names, constraints):
                return trial
    return None


def _deltas():
    for d in range(1, _SEARCH + 1):
        yield d
        yield -d


def _clamp(v: int, r: Any) -> int:
    lo, hi = r if r is not None else (1, None)
    v = max(v, lo, 1)
    return min(v, hi) if hi is not None else v


def _ok(sizes: dict, names: dict, constraints: list) -> bool:
    named = {names[s]: v for s, v in sizes.items() if s in names}
    return all(g.holds(named) for g in constraints)


def respecting(sizes: dict[str, int], constraints: list, ranges: dict[str, tuple] | None = None) -> dict[str, int] | None:
    """Named sizes (dim name -> size) moved to the nearest ones that satisfy ``constraints``
    (``onnxport.capture.guards.Guard``) within ``ranges`` (name -> (min, max)); None when none are near."""
    names = {n: n for n in sizes}
    return _satisfy(dict(sizes), ranges or {}, names, constraints)
