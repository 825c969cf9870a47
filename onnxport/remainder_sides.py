"""A branch on a remainder of sizes, traced on its other side where that side holds at every size.

diffusers' UNet reads ``for dim in sample.shape[-2:]: if dim % default_overall_up_factor != 0:
forward_upsample_size = True; break``: where a latent size is not a multiple, the upsampling is asked
for the skip's size; where it is, a scale of 2 gives that same size. Capture adopts such a branch's
condition on trial (``capture.steps.remainder_branch``), on the side the example takes; where the
example is a multiple (32 x 32), the traced side doubles sizes and onnxruntime differs from eager
PyTorch at the odd sizes, so the constraint (``height % 2 == 0``) is kept. The other side, traced,
may hold at every size: the general path a model takes where the size is not a multiple usually
computes the special one too.

``either_side(result, export_at, notices)``: for the remainder constraints ``settle`` kept
(``flipped``: adopted on trial, onnxruntime differing where they exclude), the model is exported
once more at the first sizes above the example where each of them is false (``other_side_sizes``),
and that export is taken where it adopts fewer constraints (its own remainder constraints dropped:
onnxruntime matched eager PyTorch on the example's side too) and onnxruntime matches eager PyTorch at
the example's sizes, with a notice saying so (its ``example`` is the user's inputs, as the first
export's: ``export_at`` builds it so); otherwise the first export stands, its constraints stated. One
try per export.
"""

from __future__ import annotations

from typing import Any, Callable

from onnxport.capture.guards.conditions import EAGER_RUNS, Guard
from onnxport.errors import ExportError

SEARCHED = 64  # sizes above the example tried for each dim of a flipped constraint


def flipped(result: Any) -> list[Guard]:
    """The remainder constraints (``h % 2 == 0``) ``result`` adopts though eager PyTorch runs beyond them
    (adopted on trial, ``EAGER_RUNS``): after ``settle``, those where onnxruntime differs from eager
    PyTorch there (the others it has dropped). A remainder constraint is one whose condition takes a
    remainder of sizes (``Guard.remainder``: a ``Mod`` in torch's expression)."""
    return [g for g in result.constraints if g.method == EAGER_RUNS and g.remainder]


def other_side_sizes(result: Any, guards: list[Guard]) -> dict[str, int] | None:
    """dim name -> size: the example's sizes, each dim a constraint of ``guards`` reads moved to the first
    size above the example (at most ``SEARCHED`` above) where every one of them is false; None where no
    such sizes are found, or a dim is related to others (its size follows theirs)."""
    from onnxport.capture.inputs import dim_examples, dim_names

    sizes = dict(dim_examples(result.captured, dim_names(result.captured))[0])
    related = set(result.captured.relations or ())
    for guard in guards:
        if any(n in related or n not in sizes for n in guard.names):
            return None
        for name in guard.names:
            if not guard.holds(sizes):
                break
            moved = next((s for s in range(sizes[name] + 1, sizes[name] + SEARCHED + 1)
                          if not guard.holds({**sizes, name: s})), None)
            if moved is not None:
                sizes[name] = moved
    return sizes if not any(g.holds(sizes) for g in guards) else None


def _right_on_this_side(other: Any, result: Any) -> bool:
    """Whether ``other`` (traced on the other side) matches eager PyTorch in onnxruntime at the sizes of
    ``result``'s example (its own decision on the branch, a ``!=`` it may only keep, is not taken on
    trust)."""
    from onnxport.capture.inputs import dim_examples, dim_names
    from onnxport.verify.validate import validate

    sizes = [dict(dim_examples(result.captured, dim_names(result.captured))[0])]
    try:
        return validate(other, sizes=sizes, values=[], include_example=False, explain=False).ok
    except ExportError:
        return False


def either_side(result: Any, export_at: Callable[[tuple, dict], Any], notices: list[str]) -> Any:
    """``result``, or the export at the other side of its flipped remainder constraints where that one
    adopts fewer constraints (see the module's docstring). ``export_at(args, kwargs)`` exports the model
    traced at other inputs (the same stages and constraints stage), its result's ``example`` the user's
    inputs (``result.example``); a failure there leaves ``result``."""
    from onnxport.capture.inputs import dim_names, inputs_like_example

    guards = flipped(result)
    sizes = other_side_sizes(result, guards) if guards else None
    if sizes is None:
        return result
    try:
        args, kwargs = inputs_like_example(result.captured, dim_names(result.captured), sizes, seed=0)
        other = export_at(args, kwargs)
    except (ExportError, ValueError, RuntimeError):  # the other side does not export: the first one stands
        return result
    if len(other.constraints) >= len(result.constraints) or not _right_on_this_side(other, result):
        return result
    shown = ", ".join(f"{n}={sizes[n]}" for n in dict.fromkeys(n for g in guards for n in g.names))
    notices.append(f"the trace at the example holds only where {' and '.join(g.text for g in guards)} (at "
                   f"{guards[0].where}), and onnxruntime differs from eager PyTorch beyond; traced at {shown}, on "
                   "the other side of that branch, the export holds there and at the example's sizes alike "
                   "(onnxruntime matches eager PyTorch on both sides): onnxport took that trace")
    return other
