"""Before running size 1 in eager PyTorch, the other dims are moved to meet the equalities the export
adopted (``capture.guards.probe.satisfying``): those are read back from their Python form, which torch's
printer writes with ``torch.sym_float`` and ``math`` calls (Florence-2's vision tower adopts
``torch.sym_float(...) ** (-0.5) == 0.25``)."""

from __future__ import annotations

import sympy

from onnxport.capture.guards.conditions import Guard, GuardStatus
from onnxport.capture.guards.probe import satisfying


def _adopted(python: str, names: tuple) -> Guard:
    return Guard(python, GuardStatus.ADOPTED, None, python=python, names=names)


def test_an_equality_written_with_sym_float_moves_the_other_dim():
    g = _adopted("torch.sym_float(t) == 2 * torch.sym_float(s)", ("s", "t"))
    assert satisfying({"s": 1, "t": 5}, [g], {"s"}) == {"s": 1, "t": 2}


def test_an_equality_sympy_cannot_solve_leaves_the_sizes_unpromised():
    g = _adopted("torch.sym_float(1 + ((-1) + image) // 32) ** (-0.50000000000000000) == 0.25000000000000000",
                 ("image",))
    assert satisfying({"image": 1}, [g], {"image"}) is None  # 1 is not among the sizes it holds for
    assert satisfying({"image": 500}, [g], {"image"}) == {"image": 500}


def test_the_sides_of_an_equality_read_back_in_sympy():
    t, s = sympy.Symbol("t", integer=True), sympy.Symbol("s", integer=True)
    assert _adopted("math.floor(torch.sym_float(t) / 2) == s", ("s", "t")).equality() == (sympy.floor(t / 2), s)
    assert _adopted("t >= 2", ("t",)).equality() is None
    assert _adopted("t == (", ("t",)).equality() is None
