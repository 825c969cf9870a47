"""Size 1 of a dimension that only torch.export's default minimum kept from it, checked at export.

torch.export traces a dynamic size from 2 on (its 0/1 specialization): a range it narrows from above
(``seq <= 512`` at ``position_ids[:, :seq]``) comes back with that 2 as its lower bound, and a
comparison of a size with a number the model's code makes (``if x.shape[1] == 1:``, ``is_causal=n >
1``) is decided from it without a guard. No condition of the model asks for it, so capture keeps
size 1 promised (a kept guard ``n >= 2`` with method ``DEFAULT_FLOOR``); here the ONNX model is run at
size 1 against eager PyTorch. Where they match, the guard is marked ``checked``; where they differ,
the export takes size 1 on its own (``onnxport.pieces``), or, where it cannot, adopts ``n >= 2``.
"""

from __future__ import annotations

import dataclasses

from onnxport.capture.guards.conditions import DEFAULT_FLOOR, Guard, GuardStatus, adopted_of
from onnxport.errors import ExportError
from onnxport.verify.validate import validate


CHECKED = "onnxruntime matches eager PyTorch at size 1"
REFUSED_ALIKE = "not compared at size 1: eager PyTorch refuses the made-up inputs there as at the example's sizes"


def floors(guards: list[Guard]) -> list[Guard]:
    """The kept guards ``n >= 2`` that only torch.export's default minimum made, not yet checked, whose
    size 1 no adopted constraint already excludes (``h % 2 == 0``: the export does not hold at
    ``h = 1`` whatever it computes there)."""
    adopted = adopted_of(guards)
    return [g for g in guards if g.status is GuardStatus.KEPT and g.method == DEFAULT_FLOOR
            and all(a.holds(e) for a in adopted for e in g.excluded)]


def checked(guard: Guard) -> Guard:
    """``guard`` (of ``floors``) once the export matched eager PyTorch at the sizes it excludes:
    still kept (validation looks on both sides), not checked again."""
    return dataclasses.replace(guard, method=f"{DEFAULT_FLOOR}; {CHECKED}")


def wrong_below(result, guard: Guard) -> str | None:
    """Why the export is not right at the sizes ``guard`` excludes (``{"seq": 1}``), or None when
    onnxruntime matches eager PyTorch there (``validate`` on those sizes, no value sets); ``REFUSED_ALIKE``
    when eager PyTorch refuses the made-up inputs there as at the example's sizes (``refused_alike``)."""
    try:
        report = validate(result, sizes=[dict(e) for e in guard.excluded], values=[], include_example=False,
                          explain=False)
    except ExportError as e:
        if not _loads(result):  # onnxruntime runs the model at no size (a bfloat16 kernel it lacks): nothing learned
            return None
        return str(e).splitlines()[0]
    if report.ok:
        return None
    if report.checks and all(c.eager_refused for c in report.checks) and refused_alike(result, guard):
        return REFUSED_ALIKE
    failed = next((c for c in report.checks if not c.ok), None)
    return f"onnxruntime differs from eager PyTorch at {failed.why}" if failed is not None else "validation failed"


def refused_alike(result, guard: Guard) -> bool:
    """Whether eager PyTorch refuses the made-up inputs at the sizes ``guard`` excludes as it refuses them at
    the example's sizes (same line, same exception type: ``guards.probe.same_refusal``): a refusal of their
    values (a count of special tokens in random ids), so size 1 can be neither compared nor excluded."""
    from onnxport.capture.guards.probe import eager_refusal, same_refusal
    from onnxport.capture.inputs import dim_examples, dim_names

    names = dim_names(result.captured)
    examples, _ = dim_examples(result.captured, names)
    control = eager_refusal(result.module, result.captured, names, examples)
    if control is None:
        return False
    for sizes in guard.excluded:
        error = eager_refusal(result.module, result.captured, names, {**examples, **sizes})
        if error is None or not same_refusal(error, control):
            return False
    return True


def untested(guard: Guard) -> Guard:
    """``guard`` (of ``floors``) where size 1 could not be compared (``REFUSED_ALIKE``): still kept, not
    checked again, size 1 still promised (nothing the model does at size 1 was seen to differ)."""
    return dataclasses.replace(guard, method=f"{DEFAULT_FLOOR}; {REFUSED_ALIKE}")


def _loads(result) -> bool:
    """Whether onnxruntime loads the model at all."""
    from onnxport.verify.runner import OrtRunner

    try:
        OrtRunner(result.model_proto)
    except ExportError:
        return False
    return True


def adopted(guard: Guard, why: str) -> Guard:
    """``guard`` as an adopted constraint, its reason on the method."""
    names = tuple(dict.fromkeys(n for e in guard.excluded for n in e))
    return dataclasses.replace(guard, status=GuardStatus.ADOPTED, python=guard.text, names=names,
                               method=f"{DEFAULT_FLOOR}, kept as the export is wrong below it ({why})")
