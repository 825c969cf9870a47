"""Ranges a rewritten branch left: the sizes the traced side excludes, which the other side takes.

A Python ``if`` on a size rewritten as ``torch.cond`` (``onnxport.rewrite``) exports both sides as
an ONNX ``If``, but torch.export traces each side for every size: a side written for the sizes its
predicate selects (``x[:4]`` under ``if x.shape[0] > 3``) narrows the whole program's range
(``n >= 4``), although at ``n = 1..3`` the ``If`` takes the other side. Here each such adopted
range, when its excluded sizes are few and listed whole, is checked by running the ONNX model there
against eager PyTorch; when they match at every one, the range is kept (not a constraint of the
export; validation keeps looking there), else it stays adopted.
"""

from __future__ import annotations

import dataclasses

from onnxport.capture.guards.conditions import NARROWED, SHOWN, Guard, GuardStatus
from onnxport.verify.default_floor import wrong_below

CHECKED = "a rewritten branch's other side takes these sizes: onnxruntime matches eager PyTorch there"


def narrowed_by_branch(guards: list[Guard], notes: list) -> list[Guard]:
    """The adopted ranges torch narrowed (one dim, a few excluded sizes listed whole) of a model
    whose ``if`` was rewritten (``notes``: ``ExportResult.rewrite_notes``)."""
    if not any(n.construct == "if" and n.rewritten for n in notes):
        return []
    return [g for g in guards if g.status is GuardStatus.ADOPTED and g.method == NARROWED and len(g.names) == 1
            and 0 < len(g.excluded) <= SHOWN]


def kept(guard: Guard) -> Guard:
    """``guard`` kept instead of adopted: the export holds on both sides of it."""
    return dataclasses.replace(guard, status=GuardStatus.KEPT, method=CHECKED)


def right_below(result, guard: Guard) -> bool:
    """Whether onnxruntime matches eager PyTorch at every size ``guard`` excludes (``result`` has
    ``guard`` kept, so validation may choose those sizes)."""
    return wrong_below(result, guard) is None
