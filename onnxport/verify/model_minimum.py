"""The smallest size a model takes, where torch.export states a smaller one.

torch.export narrows a dimension's range only by the conditions its own shape functions check. A
chain such as a kernel-3 convolution, a ceil-mode pool and another kernel-3 convolution needs
``time >= 7``; torch.export states ``time >= 3`` (the first convolution's check) and traces the
second convolution's smaller inputs as a 0/1 choice, which capture keeps (a kept guard excluding
``time = 3..6``: validation looks there). Eager PyTorch raises at those sizes, and so does the
ONNX model: the export's real range starts at 7.

Here each such kept guard (one dimension, excluding a run of sizes from the dimension's promised
minimum up) is tried in eager PyTorch at the sizes it excludes; when eager PyTorch raises at the
first of them, the sizes up to the last one it raises at are taken out of the export's range: the
guard is adopted as ``time >= 7`` with eager PyTorch's error as its reason, and a narrower adopted
``time >= 3`` it supersedes is dropped. Where eager PyTorch runs, the guard stays kept and
validation compares onnxruntime with it there.
"""

from __future__ import annotations

import dataclasses

from onnxport.capture.guards.conditions import DEFAULT_FLOOR, LAYOUT, Guard, GuardStatus
from onnxport.errors import ExportError
from onnxport.verify.validate import validate

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
        out.append((g, name, sizes))
    return out


def refused_up_to(result, name: str, sizes: list[int]) -> tuple[int, str] | None:
    """``(last, error)``: eager PyTorch raises at ``sizes[0]``..``last`` of dimension ``name`` (the
    other dims at their example sizes), with its first error line; None when it runs at ``sizes[0]``
    or the sizes cannot be made."""
    try:
        report = validate(result, sizes=[{name: s} for s in sizes], values=[], include_example=False)
    except ExportError:
        return None
    last, error = None, ""
    by_label: dict[str, list] = {}
    for c in report.checks:
        by_label.setdefault(c.inputs, []).append(c)
    for s, label in zip(sizes, (f"sizes {i + 1}" for i in range(len(sizes)))):
        checks = by_label.get(label, [])
        if not checks or not all(c.eager_refused for c in checks):
            break
        last, error = s, error or checks[0].note
    return None if last is None else (last, error)


def adopted_minimum(guard: Guard, name: str, first: int, last: int, error: str) -> Guard:
    """``guard`` adopted as ``name >= last + 1``: eager PyTorch raises at ``first``..``last``."""
    text = f"{name}{_MIN_TEXT}{last + 1}"
    excluded = tuple({name: s} for s in range(first, last + 1))
    reason = error.split(": ", 1)[-1] if error else "an error"
    return dataclasses.replace(guard, text=text, status=GuardStatus.ADOPTED, python=text, names=(name,),
                               excluded=excluded, boundary=({name: last}, {name: last + 1}),
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
