"""Residue classes of sizes: where remainder constraints hold, and the ONNX model telling the class.

A constraint on a remainder of sizes (``h % 2 == 0``, ``(w % 4) != 1``; ``Guard.remainder``) holds on
whole residue classes: whether it holds at a size depends on the size modulo its divisor only.
``residues_of(guards, examples)`` takes the dims such constraints read and the least common multiple
of their divisors (the period); each class is a tuple of remainders, one per dim, and is represented
by the sizes at or above the example's that have those remainders (``Residues.sizes``). A guard holds
on a class where it holds at its representative; that it depends on the remainders alone is checked
at sizes one or more periods above (``Residues.periodic``), not assumed.

``condition_model(residues, classes, model)``: an ONNX model of ``model``'s inputs whose one output
says whether the inputs' sizes are in ``classes``: each dim's size read from the first input axis
carrying its name (``Shape``), its remainder (``Mod``), the class's index in a table of the classes
(``Gather``) compared with 1 (``Equal``), for ``join_pieces.join_on``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re

import onnx
from onnx import helper

from onnxport.capture.guards.conditions import Guard

MAX_CLASSES = 256  # residue classes a set of remainder constraints may make (dims x period)
_SHIFTS = (1, 3, 17)  # periods above a representative where a guard must hold alike
_DIVISOR = re.compile(r"%\s*(\S+)")
_FLOOR = re.compile(r"//\s*(\S+)")
_MASK = re.compile(r"(?:\b(\d+)\s*[&|])|(?:[&|]\s*\(*(\d+)\b)|[&|]")  # a bitwise and/or, its number if any


@dataclasses.dataclass(frozen=True)
class Residues:
    """The residue classes of ``dims`` modulo ``period``; ``base``: dim -> the size the
    representatives start from (the example's); ``low``: dim -> the smallest size of its range."""

    dims: tuple[str, ...]
    period: int
    base: dict
    low: dict

    def classes(self) -> list[tuple[int, ...]]:
        """Every class, a remainder per dim."""
        return list(itertools.product(range(self.period), repeat=len(self.dims)))

    def of(self, sizes: dict[str, int]) -> tuple[int, ...]:
        """The class of ``sizes`` (dim name -> size)."""
        return tuple(sizes[d] % self.period for d in self.dims)

    def sizes(self, cls: tuple[int, ...], shift: dict[str, int] | None = None,
              start: dict | None = None) -> dict[str, int]:
        """The representative of ``cls``: for each dim the first size at or above ``base`` (or ``start``)
        with its remainder (``shift``: dim -> periods added)."""
        start = start or self.base
        return {d: start[d] + (r - start[d]) % self.period + (shift or {}).get(d, 0) * self.period
                for d, r in zip(self.dims, cls)}

    def where(self, guards: list[Guard]) -> frozenset:
        """The classes where every one of ``guards`` holds."""
        return frozenset(c for c in self.classes() if all(g.holds(self.sizes(c)) for g in guards))

    def periodic(self, guard: Guard) -> bool:
        """Whether ``guard`` reads only these dims and holds alike at each class's representative,
        at sizes ``_SHIFTS`` periods above it, one dim at a time, and at the class's smallest sizes in
        the range."""
        if not set(guard.names) <= set(self.dims):
            return False
        for c in self.classes():
            at = guard.holds(self.sizes(c))
            if guard.holds(self.sizes(c, start=self.low)) != at or \
                    any(guard.holds(self.sizes(c, {d: k})) != at for d in guard.names for k in _SHIFTS):
                return False
        return True


def divisors(guard: Guard) -> list[int] | None:
    """Periods of the remainders ``guard``'s condition takes, their least common multiple one of the
    condition: ``w % 4`` -> 4; a bitwise ``&`` or ``|`` with a number ``m`` keeps or sets the low bits of
    ``m``'s length, so ``w & 3`` and ``w | 1`` repeat every 4 and 2 sizes (the next power of two above
    ``m``); a remainder of a floor division, ``(w // 8) % 2``, repeats every 16 sizes, so each divisor is
    multiplied by the product of the condition's floor divisors (``w -> w + 16`` adds 2 to ``w // 8``);
    with floor divisions only (``(w // 4) * 4 != w``), their product. None where a divisor or a mask is
    not a number (a remainder by another size, ``w & h``), or there is none."""
    found = _DIVISOR.findall(guard.python)
    masks = _MASK.findall(guard.python)
    floors = _FLOOR.findall(guard.python)
    numbers = [re.match(r"\(*(\d+)", f) for f in found + floors]
    if not (numbers or masks) or not all(numbers) or not all(m[0] or m[1] for m in masks):
        return None
    values = [int(m.group(1)) for m in numbers]
    periods = values[:len(found)] + [1 << int(m[0] or m[1]).bit_length() for m in masks]
    scale = math.prod(values[len(found):])
    return [v * scale for v in periods] or [scale]  # ``(w // 4) * 4 != w``: a remainder unwritten


def reads_remainder(guard: Guard) -> bool:
    """Whether ``guard``'s condition takes a remainder (``Guard.remainder``: a ``Mod`` in torch's expression)
    or a bitwise ``&`` / ``|`` of sizes."""
    return guard.remainder or bool(_MASK.search(guard.python))


def on_classes(guard: Guard) -> bool:
    """Whether ``guard``'s truth depends on its dims' sizes modulo its divisors only: a remainder condition
    (``w % 2 == 0``), not a range whose expression takes a remainder (``seq >= 257`` written with ``seq % 256``
    by a padding to whole chunks). Checked at the sizes ``1 .. period`` (every dim alike) against the same
    sizes ``_SHIFTS`` periods above."""
    found = divisors(guard)
    if not found or not guard.names:
        return False
    period = math.lcm(*found)
    for k in range(1, period + 1):
        at = guard.holds({n: k for n in guard.names})
        if any(guard.holds({n: k + shift * period for n in guard.names}) != at for shift in _SHIFTS):
            return False
    return True


def residues_of(guards: list[Guard], examples: dict[str, int], lows: dict[str, int] | None = None) -> Residues | None:
    """The residue classes ``guards`` (remainder constraints) divide their dims' sizes into
    (``examples``: dim name -> the example's size; ``lows``: dim name -> the smallest size of its range,
    1 where missing); None where a divisor is not a number, a dim has
    no example, the classes are more than ``MAX_CLASSES``, or a guard does not hold alike on a class."""
    dims: list[str] = []
    period = 1
    for guard in guards:
        found = divisors(guard)
        if found is None or not guard.names or any(n not in examples for n in guard.names):
            return None
        for k in found:
            period = math.lcm(period, k)
        dims += [n for n in guard.names if n not in dims]
    if period ** len(dims) > MAX_CLASSES:
        return None
    residues = Residues(tuple(dims), period, {d: examples[d] for d in dims},
                        {d: max(1, (lows or {}).get(d, 1)) for d in dims})
    return residues if all(residues.periodic(g) for g in guards) else None


def condition_model(residues: Residues, classes: frozenset, model: onnx.ModelProto) -> onnx.ModelProto | None:
    """An ONNX model of ``model``'s inputs (those carrying the dims) whose one output, a bool tensor of
    one element, is true where the inputs' sizes are in ``classes``; None where an input axis named by
    a dim is not found (the dim is static in the model)."""
    sources = {}
    for d in residues.dims:
        found = next(((inp, axis) for inp in model.graph.input
                      for axis, dim in enumerate(inp.type.tensor_type.shape.dim) if dim.dim_param == d), None)
        if found is None:
            return None
        sources[d] = found
    p = residues.period
    nodes = [helper.make_node("Constant", [], ["residue/period"], value=helper.make_tensor(
        "residue/period", onnx.TensorProto.INT64, [1], [p]))]
    index = None
    for d, (inp, axis) in sources.items():
        nodes += [helper.make_node("Shape", [inp.name], [f"residue/{d}/size"], start=axis, end=axis + 1),
                  helper.make_node("Mod", [f"residue/{d}/size", "residue/period"], [f"residue/{d}/rem"])]
        if index is None:
            index = f"residue/{d}/rem"
        else:
            nodes += [helper.make_node("Mul", [index, "residue/period"], [f"residue/{d}/scaled"]),
                      helper.make_node("Add", [f"residue/{d}/scaled", f"residue/{d}/rem"], [f"residue/{d}/index"])]
            index = f"residue/{d}/index"
    table = [int(c in classes) for c in residues.classes()]  # itertools.product order: the index's
    nodes += [helper.make_node("Constant", [], ["residue/table"], value=helper.make_tensor(
                  "residue/table", onnx.TensorProto.INT64, [len(table)], table)),
              helper.make_node("Constant", [], ["residue/one"], value=helper.make_tensor(
                  "residue/one", onnx.TensorProto.INT64, [1], [1])),
              helper.make_node("Gather", ["residue/table", index], ["residue/hit"], axis=0),
              helper.make_node("Equal", ["residue/hit", "residue/one"], ["residue/in_classes"])]
    inputs = [inp for inp in model.graph.input if any(inp is s[0] for s in sources.values())]
    graph = helper.make_graph(nodes, "residue_classes", inputs,
                              [helper.make_tensor_value_info("residue/in_classes", onnx.TensorProto.BOOL, [1])])
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
    out = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    out.ir_version = model.ir_version
    return out
