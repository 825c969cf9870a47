"""The smallest size a model takes, where torch.export states a smaller one.

torch.export narrows a dimension's range only by the conditions its own shape functions check. A
chain such as a kernel-3 convolution, a ceil-mode pool and another kernel-3 convolution needs
``time >= 7``; torch.export states ``time >= 3`` (the first convolution's check) and traces the
second convolution's smaller inputs as a 0/1 choice, which capture keeps (a kept guard excluding
``time = 3..6``: validation looks there). Eager PyTorch raises at those sizes, and so does the
ONNX model: the export's real range starts at 7.

Here, for each such kept guard (one dimension, excluding a run of sizes from the dimension's
promised minimum up), eager PyTorch runs the model at that minimum; when it raises, the smallest
size it takes below the example is found by bisection, and the sizes below it are taken out of
the export's range: the guard is adopted as ``time >= 7`` with eager PyTorch's error as its reason,
and a narrower adopted ``time >= 3`` it supersedes is dropped. Where eager PyTorch runs, the guard
stays kept and validation compares onnxruntime with it there.
"""

from __future__ import annotations

import dataclasses

from onnxport.capture.guards.conditions import DEFAULT_FLOOR, LAYOUT, SHOWN, Guard, GuardStatus
from onnxport.capture.guards.probe import eager_refusal, refusal_at, same_refusal
from onnxport.capture.inputs import dim_examples, dim_names

_MIN_TEXT = " >= "


def low_runs(guards: list[Guard], minimum: dict[str, int]) -> list[tuple[Guard, str, list[int]]]:
    """``(guard, dim name, sizes)`` for each kept guard that excludes sizes ``minimum[name]``,
    ``minimum[name] + 1``, ... of one adoptable dimension (``minimum``: dim name -> the smallest
    size the export promises, for the dimensions whose constraints onnxport may adopt)."""
    out = []
    for g in guards:
        if g.status is not GuardStatus.KEPT or g.method in (LAYOUT, DEFAULT_FLOOR) or not g.excluded:
            continue
        names = {n for e in g.excluded for n in e}
        if len(names) != 1 or any(len(e) != 1 for e in g.excluded):
            continue
        name = names.pop()
        if name not in minimum:
            continue
        sizes = sorted(e[name] for e in g.excluded)
        if sizes[0] != minimum[name] or sizes != list(range(sizes[0], sizes[0] + len(sizes))):
            continue
        if all(name != n for _, n, _ in out):  # one search per dimension
            out.append((g, name, sizes))
    return out


LINEAR = 16  # sizes tried one by one above the minimum before bisecting up to the example


def smallest_taken(model, captured, name: str, first: int, allowed=lambda sizes: True) -> tuple[int, str, int] | None:
    """``(m, error, start)``: the smallest size ``m`` above ``start`` of dimension ``name`` at which
    eager PyTorch runs ``model`` (the other dims at their example sizes, inputs made like the
    example's), and its error at ``start``, the first size from ``first`` on that ``allowed``
    (``{dim name: size} -> bool``: the adopted constraints) keeps; None when eager runs at ``start``
    (or the inputs cannot be made, or no size up to the example is allowed, or eager PyTorch refuses the
    made-up inputs at the example's size as at ``start``: ``guards.probe.same_refusal``).

    The allowed sizes are tried one by one up to ``start + LINEAR``, then bisected up to the example's
    size (which runs), on fake tensors (``shapes_refusal``); eager PyTorch confirms that it raises
    at ``start`` and just below ``m``, and decides every size alone where fake tensors cannot tell
    or disagree with it."""
    names = dim_names(captured)
    examples = dim_examples(captured, names)[0]
    example = examples.get(name)
    if example is None or example <= first:
        return None
    sizes = [s for s in range(first, example + 1) if allowed({**examples, name: s})]
    if len(sizes) < 2 or sizes[-1] != example:
        return None

    def eager(i: int):
        return eager_refusal(model, captured, names, {**examples, name: sizes[i]})

    def fake(i: int):
        return refusal_at(model, captured, names, examples, {name: sizes[i]})

    error = eager(0)
    if error is None:
        return None
    at_example = eager(len(sizes) - 1)
    if at_example is not None and same_refusal(error, at_example):  # the made-up values refused, not the size
        return None
    found = _search(fake, len(sizes) - 1)
    if found == 1 or eager(found - 1) is not None:
        return sizes[found], error[1], sizes[0]
    return sizes[_search(eager, len(sizes) - 1)], error[1], sizes[0]


def _search(refused, last: int) -> int:
    """The smallest index above 0 (refused) that ``refused`` says runs: one by one up to
    ``LINEAR``, then bisected up to ``last`` (which runs)."""
    for i in range(1, min(last, LINEAR + 1)):
        if refused(i) is None:
            return i
    lo, hi = min(last, LINEAR), last
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if refused(mid) is None else (mid, hi)
    return hi


def adopted_minimum(guard: Guard, name: str, first: int, smallest: int, error: str) -> Guard:
    """``guard`` adopted as ``name >= smallest``: eager PyTorch raises from ``first`` up to it."""
    text = f"{name}{_MIN_TEXT}{smallest}"
    excluded = tuple({name: s} for s in range(first, min(smallest, first + SHOWN + 1)))
    reason = error.split(": ", 1)[-1] if error else "an error"
    return dataclasses.replace(guard, text=text, status=GuardStatus.ADOPTED, python=text, names=(name,),
                               excluded=excluded, boundary=({name: smallest - 1}, {name: smallest}),
                               method=f"the model's own minimum: eager PyTorch raises below it ({reason})")


def superseded(guard: Guard, adopted: list[Guard]) -> bool:
    """An adopted ``name >= k`` made redundant by an adopted ``name >= m`` with ``m > k``."""
    if guard.status is not GuardStatus.ADOPTED or len(guard.names) != 1:
        return False
    bound = _lower(guard)
    return bound is not None and any(
        a is not guard and a.names == guard.names and (_lower(a) or 0) > bound for a in adopted)


def _lower(guard: Guard) -> int | None:
    name = guard.names[0] if guard.names else None
    head, sep, tail = guard.text.partition(_MIN_TEXT)
    if not sep or head != name or not tail.isdigit():
        return None
    return int(tail)
