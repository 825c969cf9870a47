"""Adopted constraints the ONNX model does not need, found by running it where they exclude.

Conditions torch.export states for the whole program hold only for the trace it made:

* a range a rewritten branch's traced side needs: a Python ``if`` on a size rewritten as
  ``torch.cond`` (``onnxport.rewrite``) exports both sides as an ONNX ``If``, but torch.export
  traces each side for every size, and a side written for the sizes its predicate selects
  (``x[:4]`` under ``if x.shape[0] > 3``) narrows the range (``n >= 4``), although at ``n = 1..3``
  the ``If`` takes the other side;
* an equality of sizes computed from the declared ones that size-oblivious tracing leaves (a
  feature map one row high in the example: ``P7 height == 1``) where the ONNX model computes every
  size alike;
* a condition eager PyTorch itself does not have: it runs at sizes the condition excludes
  (``capture.refused_sides.eager_runs_at``; a slice bound the trace decided): adopted on trial for a
  dim of any range, and where onnxruntime differs there, refused for an explicit range after all. A
  remainder constraint adopted on trial (``on_trial``: a branch on ``w % 2``) is tried too, but not
  dropped where they match: the first sizes it excludes do not tell the others of their residue
  classes (``if w % 2 != 0: if w >= 40: ...`` matches at w = 1, 3, 5 and differs at 41), so it is
  judged on every class by exporting them (``onnxport.remainder_sides``);
* a range the example itself breaks: the model was traced at a larger example because a size
  computed from a dim was 1 at the example (``capture.steps.TraceLargerExample``: a sequence of one
  chunk), and that trace's program assumes two chunks or more (``seq >= 257``).

Each such adopted constraint is tried: the ONNX model runs against eager PyTorch at sizes it
excludes (the range's excluded sizes when few and listed whole; for an equality, sizes near the
example that break it: the example's sizes swapped between two dims, or one dim scaled); when they
match at every one, the constraint is kept instead (validation keeps looking there), else it stays
adopted. Those other than a remainder on trial are sampled too (an equality at two sizes near the
example, a range the example breaks at the example, its two smallest excluded sizes and below its
boundary, a condition on trial at the sizes eager PyTorch ran at and across what it excludes, at half and twice
its excluded sizes beside the boundary): only a range a rewritten ``if`` narrowed
is tried at every size it excludes.
"""

from __future__ import annotations

import dataclasses

from onnxport.capture.guards.conditions import EAGER_RUNS, NARROWED, SHOWN, Guard, GuardStatus
from onnxport.capture.refused_sides import EAGER_TRIES
from onnxport.errors import ExportError
from onnxport.verify.validate import validate

CHECKED = "onnxruntime matches eager PyTorch at sizes it excludes: not needed by the ONNX model"
_SCALES = (1.5, 0.75, 2.0)
EXAMPLE_TRIES = 2  # the smallest excluded sizes tried for a range the example breaks


def breaks_example(guard: Guard, examples: dict[str, int]) -> bool:
    """Whether ``guard`` reads only dims with an example size and fails there (``examples``: dim
    name -> the example's size): a constraint of a trace made at a larger example."""
    return bool(guard.names) and set(guard.names) <= examples.keys() and not guard.holds(examples)


def candidates(guards: list[Guard], notes: list, examples: dict[str, int]) -> list[tuple[Guard, tuple]]:
    """``(guard, sizes it excludes to try)`` of each adopted constraint that may be the trace's only:
    the ranges torch narrowed (one dim, a few excluded sizes listed whole) of a model whose ``if``
    was rewritten (``notes``: ``ExportResult.rewrite_notes``), the equalities of sizes that are
    not a remainder (``examples``: dim name -> the example's size), and the conditions adopted on trial
    because eager PyTorch runs at sizes they exclude (``EAGER_RUNS``: the first ones, or ``Guard.eager_runs``,
    those beside the boundary)."""
    out = []
    rewritten = any(n.construct == "if" and n.rewritten for n in notes)
    for g in guards:
        if g.status is not GuardStatus.ADOPTED:
            continue
        if rewritten and g.method == NARROWED and len(g.names) == 1 and 0 < len(g.excluded) <= SHOWN:
            out.append((g, tuple(dict(e) for e in g.excluded)))
        elif breaks_example(g, examples):
            # the sizes other adopted constraints allow (MobileViT's "image >= 33" beside "image >= 65")
            others = [o for o in guards if o.status is GuardStatus.ADOPTED and o is not g]
            tries = tuple(s for s in _around_example(g, examples) if all(o.holds(s) for o in others))
            if tries:
                out.append((g, tries))
        elif g.python.count("==") == 1 and "%" not in g.text and g.names and set(g.names) <= examples.keys():
            near = _near_breaking(g, examples)
            if near:
                out.append((g, near))
        elif g.method == EAGER_RUNS:  # the sizes eager PyTorch ran at: the first excluded, or beside the boundary
            ran = tuple(dict(e) for e in g.eager_runs or g.excluded[:EAGER_TRIES])
            out.append((g, ran + tuple(s for s in _across(g) if s not in ran)))
    return out


def _across(guard: Guard) -> tuple:
    """Sizes across what ``guard`` (one dim) excludes, away from where eager PyTorch was run: half and twice
    each excluded size beside its boundary that the guard excludes too (``image >= 16`` tried at 15 and 7,
    ``n >= 61`` at 1, 2, 3 and 30). A model whose own branch on the dim takes a third path there
    (``y * 2 if n >= 12 else y * 3`` below a branch at 16) differs from the ONNX model in onnxruntime, and the
    constraint stays; where eager PyTorch refuses one, it stays too (``right_at``)."""
    if len(guard.names) != 1:
        return ()
    (name,) = guard.names
    out = []
    for b in guard.boundary:
        if name not in b or guard.holds(b):
            continue
        for v in (b[name] // 2, 2 * b[name]):
            sizes = {name: v}
            if v >= 1 and not guard.holds(sizes) and sizes not in out:
                out.append(sizes)
    return tuple(out)


def _around_example(guard: Guard, examples: dict[str, int]) -> tuple:
    """Sizes to try for a constraint the example itself breaks (the model was traced at a larger
    example, ``capture.steps.TraceLargerExample``): the example, the two smallest excluded sizes
    listed (``EXAMPLE_TRIES``: 1, where a size broadcasts, and 2), and the sizes just below the
    boundary; the sizes between take the path of their neighbours (one chunk where the trace had
    two), each a run of eager PyTorch in float32 and float64 and of onnxruntime."""
    tries = [{n: examples[n] for n in guard.names}] + [dict(e) for e in guard.excluded[:EXAMPLE_TRIES]]
    tries += [{n: v - 1 for n, v in b.items()} for b in guard.boundary if all(v > 1 for v in b.values())]
    out = []
    for sizes in tries:
        if not guard.holds(sizes) and sizes not in out:
            out.append(sizes)
    return tuple(out)


def _near_breaking(guard: Guard, examples: dict[str, int]) -> tuple:
    """Up to two size assignments near the example that break ``guard``."""
    tries = []
    names = list(guard.names)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            tries.append({**examples, a: examples[b], b: examples[a]})
    for a in names:
        tries += [{**examples, a: max(1, round(examples[a] * k))} for k in _SCALES]
    out = []
    for sizes in tries:
        if sizes != examples and not guard.holds(sizes) and sizes not in out:
            out.append(sizes)
    return tuple(out[:2])


def on_trial(guard: Guard) -> bool:
    """Whether ``guard`` is a remainder constraint adopted on trial (``EAGER_RUNS``, ``Guard.remainder``):
    onnxruntime matching eager PyTorch at the first sizes it excludes does not drop it, since the
    other sizes of their residue classes may differ (``if w % 2 != 0: if w >= 40: ...``); it is
    judged on every class by exporting them (``onnxport.remainder_sides``). A range whose expression takes a
    remainder (``seq >= 257`` of a padding to whole chunks) is not one (``residues.on_classes``)."""
    from onnxport.residues import on_classes

    return guard.method == EAGER_RUNS and guard.remainder and on_classes(guard)


def kept(guard: Guard, sizes: tuple) -> Guard:
    """``guard`` kept instead of adopted: the ONNX model matched eager PyTorch at ``sizes``."""
    return dataclasses.replace(guard, status=GuardStatus.KEPT, method=CHECKED, excluded=sizes)


def right_at(result, guard: Guard) -> bool:
    """Whether onnxruntime matches eager PyTorch at every size assignment in ``guard.excluded``,
    eager PyTorch running at each (``result`` has ``guard`` kept, so validation may choose those
    sizes)."""
    try:
        report = validate(result, sizes=[dict(e) for e in guard.excluded], values=[], include_example=False,
                          explain=False)
    except ExportError:
        return False
    return report.ok and not report.not_compared
