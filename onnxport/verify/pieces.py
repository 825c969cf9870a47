"""Validation of a model exported in pieces (``onnxport.pieces``): the joined model compared with
eager PyTorch on the sizes of every piece.

Each piece's own validation (``verify.validate``: its example, the sizes its range and guards call
for, the value kinds) runs with the joined model in place of the piece's: every piece's interval is
reached through the joined model's ``If``s, and a size on the wrong side of a bound shows as a
difference there. Rows are labelled with the piece (``sizes 2 p1``), their reasons with its interval.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from onnxport.verify.report import ValidationReport


class Piece(Protocol):
    """What validation reads of one piece of ``ExportResult.pieces`` (``pieces.Interval``: sizes of
    one dim; ``value_sides.ValueSide``: one side of a branch on a state's value); its ``str`` names
    it in each row's reason."""

    own: bool  # the user's example takes this piece: the inputs given are compared with it

    def sizes_of(self, sizes: list[dict]) -> list[dict]:
        """The size sets (``{dim: size}``) of ``sizes`` this piece is validated at, as its export
        takes them."""


def validate_pieces(result, inputs: Any = None, sizes: Any = None, *, values: Any = None, atol: float | None = None,
                    rtol: float | None = None, runtime: str = "onnxruntime") -> ValidationReport:
    """``ValidationReport`` of ``result`` (an ``ExportResult`` with ``pieces``: ``(Piece, result)``
    pairs) over each piece.

    ``sizes`` (dicts ``{dim: size}``) go to the pieces that take them (``Piece.sizes_of``: a size set
    that leaves the split dim out goes to the example's piece); ``inputs`` are compared once, with the
    example's piece. Other arguments (``runtime``: what runs the model) and errors: ``verify.validate.validate``."""
    checks = []
    for k, (part, piece) in enumerate(result.pieces):
        mine = None if sizes is None else part.sizes_of(sizes)
        if sizes and not mine:  # sizes were given, none of them in this piece (an empty list: none asked anywhere)
            continue
        report = piece.replace(model=result.model).validate(inputs if part.own else None, mine, values=values,
                                                            atol=atol, rtol=rtol, runtime=runtime)
        checks += [dataclasses.replace(c, inputs=f"{c.inputs} p{k + 1}", why=f"{c.why}; piece {k + 1}: {part}")
                   for c in report.checks]
    return ValidationReport(tuple(checks), runtime=report.runtime if checks else runtime)
