"""Validation of a model exported in pieces (``onnxport.pieces``): the joined model compared with
eager PyTorch on the sizes of every piece.

Each piece's own validation (``verify.validate``: its example, the sizes its range and guards call
for, the value kinds) runs with the joined model in place of the piece's: every piece's interval is
reached through the joined model's ``If``s, and a size on the wrong side of a bound shows as a
difference there. Rows are labelled with the piece (``sizes 2 p1``), their reasons with its interval.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from onnxport.verify.report import ValidationReport


def validate_pieces(result, inputs: Any = None, sizes: Any = None, *, values: Any = None, atol: float | None = None,
                    rtol: float | None = None, runtime: str = "onnxruntime") -> ValidationReport:
    """``ValidationReport`` of ``result`` (an ``ExportResult`` with ``pieces``) over each piece.

    ``sizes`` (dicts ``{dim: size}``) go to the piece whose interval holds them (a size set that
    leaves the split dim out goes to the example's piece); ``inputs`` are compared once, with the
    example's piece. Other arguments (``runtime``: what runs the model) and errors: ``verify.validate.validate``."""
    checks = []
    for k, (interval, piece) in enumerate(result.pieces):
        example = interval.own
        mine = None if sizes is None else [s for s in sizes if (s.get(interval.dim) in interval if interval.dim in s
                                                                else example)]
        if sizes and not mine:  # sizes were given, none of them in this piece (an empty list: none asked anywhere)
            continue
        if mine is not None and interval.lower == interval.upper:  # the dim is static in a piece of one size
            mine = [{k: v for k, v in m.items() if k != interval.dim} for m in mine]
        report = piece.replace(model=result.model).validate(inputs if example else None, mine, values=values,
                                                            atol=atol, rtol=rtol, runtime=runtime)
        checks += [dataclasses.replace(c, inputs=f"{c.inputs} p{k + 1}", why=f"{c.why}; piece {k + 1}: {interval}")
                   for c in report.checks]
    return ValidationReport(tuple(checks), runtime=report.runtime if checks else runtime)
