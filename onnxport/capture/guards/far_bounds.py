"""A branch on a size whose other side only sizes far above the example reach: its bound adopted.

ESPnet's positional encodings hold a table of 5,000 positions and extend it when an input is longer
(``extend_pe``: ``if self.pe.size(1) >= x.size(1) * 2 - 1: return``). torch.export follows the side
the example takes, so the trace holds for ``time <= 20006`` (5,000 frames after the conv2d
subsampling) and no further. Refusing the branch would refuse a model that is right at every size
up to twenty thousand frames; exporting the other side on its own (``onnxport.pieces``) would trace
it and run eager PyTorch there, at sizes whose attention holds gigabytes, for a side few inputs
take. So such a bound is adopted: a constraint of the export like any other (``result.constraints``,
the ONNX metadata, validation keeping to it), stated in a warning naming the branch, the bound and
how to get the other side.

The rule (``far_bound``): the branch reads one dimension the user gave no maximum (a name without a
range, or a ``Dim`` with a minimum only; an explicit maximum stays a promise: the branch is refused as
before, and so is a condition on several dimensions); its condition holds at every size
from the dimension's minimum up to a bound ``B``, each size checked (the sizes the export keeps take the
traced side, none silently the other), and at none above it, checked as any condition is
(``conditions.check``: every size up to ``EXHAUSTIVE`` and sizes spread beyond, here also every size
within ``EXHAUSTIVE`` above ``B``); and the other side starts far above the example: at
``FAR_GROWTH`` times the example's size or more, and beyond the sizes ``onnxport.pieces`` scans for
where a condition changes (``pieces.SCANNED`` above the minimum). A bound nearer than that is left
to the other ways (eager PyTorch refusing the other side, exporting each side on its own), and a
condition of any other shape (a lower bound, a remainder, a window) is refused as before.
"""

from __future__ import annotations

import dataclasses

from onnxport.capture.guards.conditions import (EXHAUSTIVE, SHOWN, Guard, GuardStatus, SizeVar, _call, _compile,
                                               last_holding)
from onnxport.capture.guards.probe import EAGER_GROWTH

FAR_GROWTH = EAGER_GROWTH  # the other side starts at this many times the example's size or more: eager
# PyTorch is not asked there (``probe.refusal_at``)
SCANNED = 4096  # ... and beyond this many sizes above the minimum, where onnxport.pieces looks for a change
DENSE_TO = 1 << 20  # sizes above the minimum every one of which is checked below an adopted bound
FAR_SIDE = "a branch whose other side only sizes far above the example reach"  # the adopted guard's method


@dataclasses.dataclass(frozen=True)
class FarBound:
    """The bound ``dim <= bound`` a branch's traced side holds for, the branch's line, and the example's size."""

    dim: str
    bound: int
    branch: str
    example: int

    @property
    def text(self) -> str:
        return f"{self.dim} <= {self.bound}"

    def sets(self, python: str, names: tuple, lo: int) -> bool:
        """Whether the condition ``python`` over ``names`` is this bound (``upper_bound`` from ``lo``)."""
        try:
            return tuple(names) == (self.dim,) and upper_bound(python, self.dim, lo) == self.bound
        except Exception:  # noqa: BLE001 - a condition Python cannot compute is not this bound
            return False

    def mark(self, guard: Guard) -> Guard:
        """``guard``, the adopted ``dim <= bound``, as this module adopts it: at the branch's line, its
        note saying why, the sizes it excludes from ``bound + 1`` on, and no boundary sizes for validation
        (the bound's own sizes are what exporting the other side would have run: validation keeps below
        them, at its usual sizes)."""
        excluded = tuple({self.dim: s} for s in range(self.bound + 1, self.bound + SHOWN + 2))  # "..." beyond
        return dataclasses.replace(guard, text=self.text, status=GuardStatus.ADOPTED, where=self.branch,
                                   excluded=excluded, boundary=(), method=FAR_SIDE, note=self.note())

    def note(self) -> str:
        """What the adopted constraint's warning says after it: why, and how to get the other side."""
        return (f"the model's code branches on {self.dim} there: the trace follows the side the example "
                f"({self.dim} = {self.example}) takes, and the other side, from {self.dim} = {self.bound + 1} on "
                f"({(self.bound + 1) // max(self.example, 1)} times the example), was neither exported nor run; "
                f"Dim({self.dim!r}, max={self.bound}) states this bound and silences this warning, "
                f"torch.cond(pred, true_fn, false_fn, operands) in place of the branch exports both sides")


def upper_bound(python: str, name: str, lo: int) -> int | None:
    """``B`` when the condition ``python`` (over the one dim ``name``) holds at every size from
    ``lo`` up to ``B`` (each checked; ``B`` at most ``DENSE_TO`` above ``lo``) and fails at every size
    above it that is checked: every size up to ``EXHAUSTIVE`` above the minimum, sizes spread beyond
    up to ``SPREAD_TO`` (``SizeVar.sizes``), and, between the last of those where it holds and the
    first where it fails, the sizes ``conditions.last_holding`` checks. None for a condition of another
    shape, one that holds at every size checked, or a bound further than ``DENSE_TO``."""
    fn = _compile(python, (name,))
    sizes = SizeVar(None, name, max(1, lo), None, True).sizes(EXHAUSTIVE)
    values = [_call(fn, (s,)) for s in sizes]
    if all(values) or not values[0]:
        return None
    first = values.index(False)
    if any(values[first:]):
        return None
    bound = last_holding(fn, sizes[first - 1], sizes[first])
    if bound is None or bound - max(1, lo) > DENSE_TO:
        return None
    # the sizes spread between EXHAUSTIVE and the bound leave gaps: the traced side must hold at each of them
    return bound if all(_call(fn, (s,)) for s in range(sizes[0], bound + 1)) else None


def far_side(condition: tuple | None, branch: str | None, var: SizeVar | None, example: int | None) -> FarBound | None:
    """The bound a branch refused on ``condition`` (``(python, names)``, as ``conditions.branch_error``
    keeps it) at the line ``branch`` sets, where only sizes far above the example take its other side
    (see the module docstring), whatever the dim's declared maximum; ``var`` is the declared dim it
    reads (its promised range), ``example`` the example's size of it. None where the condition is not
    of that kind."""
    if condition is None or branch is None or var is None or example is None:
        return None
    python, names = condition
    if python is None or len(names) != 1 or names[0] != var.name:
        return None
    lo = max(1, var.lo)
    try:
        bound = upper_bound(python, var.name, lo)
    except Exception:  # noqa: BLE001 - a condition Python cannot compute is not one of this kind
        return None
    if bound is None or not lo <= example <= bound:
        return None
    if bound + 1 < FAR_GROWTH * max(example, 1) or bound + 1 <= lo + SCANNED:
        return None
    return FarBound(var.name, bound, branch, example)


def far_bound(condition: tuple | None, branch: str | None, var: SizeVar | None, example: int | None) -> FarBound | None:
    """``far_side``'s bound where it may be adopted: the dim has no declared (nor promised) maximum."""
    return far_side(condition, branch, var, example) if var is not None and var.hi is None else None
