"""Size 1 of a dimension that only torch.export's default minimum kept from it, checked at export.

torch.export traces a dynamic size from 2 on (its 0/1 specialization), and a range it narrows from
above (``seq <= 512`` at ``position_ids[:, :seq]``) comes back with that 2 as its lower bound. No
condition of the model asks for it, so capture keeps size 1 promised (a kept guard with method
``DEFAULT_FLOOR``); here the ONNX model is run at size 1 against eager PyTorch, and the guard is
adopted as ``n >= 2`` only when they differ there.
"""

from __future__ import annotations

import dataclasses

from onnxport.capture.guards.conditions import DEFAULT_FLOOR, Guard, GuardStatus
from onnxport.errors import ExportError
from onnxport.verify.validate import validate


def floors(guards: list[Guard]) -> list[Guard]:
    """The kept guards ``n >= 2`` that only torch.export's default minimum made."""
    return [g for g in guards if g.status is GuardStatus.KEPT and g.method == DEFAULT_FLOOR]


def wrong_below(result, guard: Guard) -> str | None:
    """Why the export is not right at the sizes ``guard`` excludes (``{"seq": 1}``), or None when
    onnxruntime matches eager PyTorch there (``validate`` on those sizes, no value sets)."""
    try:
        report = validate(result, sizes=[dict(e) for e in guard.excluded], values=[], include_example=False)
    except ExportError as e:
        return str(e).splitlines()[0]
    if report.ok:
        return None
    failed = next((c for c in report.checks if not c.ok), None)
    return f"onnxruntime differs from eager PyTorch at {failed.why}" if failed is not None else "validation failed"


def adopted(guard: Guard, why: str) -> Guard:
    """``guard`` as an adopted constraint, its reason on the method."""
    names = tuple(dict.fromkeys(n for e in guard.excluded for n in e))
    return dataclasses.replace(guard, status=GuardStatus.ADOPTED, python=guard.text, names=names,
                               method=f"{DEFAULT_FLOOR}, kept as the export is wrong below it ({why})")
