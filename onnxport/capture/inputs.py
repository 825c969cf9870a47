"""Input tensors at other sizes and of other values: one ``InputSpec`` per input, one
``make_inputs`` for all.

An ``InputSpec`` says how to make one input at any sizes of the dynamic dimensions: its dtype, its
dims (ints, dim names, or expressions over dim names such as ``2*h``) and what its values look like
(the example's spread for floats, a range for integers, sequence lengths tied to a dim, masks).
Specs come from an export's example inputs (``specs_from_captured``) or from an export config's
declarations (``onnxport.config``); ``make_inputs`` builds the tensors from either, for capture's
probe of the smallest sizes, for validation and for config exports.

``make_inputs(..., values=KIND)`` makes values the example does not reach (``VALUE_KINDS``), for
validation:

* ``"example"``: floats with the example's mean and spread, integers in the example's range;
* ``"symmetric"``: floats centred on zero, as spread as the example's values are far from it
  (an example in [1, 2) gives values in about (-5, 5));
* ``"zeros"``: floats exactly zero;
* ``"large"``: floats centred on zero, ``LARGE`` times as spread (magnitudes up to about 30x);
* ``"special"``: floats like the example with NaN, +inf and -inf at a few places each (validation
  compares them where eager's outputs stay finite);
* ``"range"``: integers across their plausible range: ``0..vocab - 1`` for an input indexing a
  table (an embedding, ``capture.tables``), the declared range of a config, the example's own
  for 0/1 flags (an integer attention mask), else up to four times past the example's.

Lengths stay lengths and masks stay masks (a prefix mask, made from lengths, stays one) in every kind.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import sympy
import torch
from torch.utils import _pytree as pytree

from onnxport.capture.captured import Captured, expr_of
from onnxport.capture.tables import indexed_tables
from onnxport.errors import NegativeSizeError, ValidationError

VALUE_KINDS = ("symmetric", "zeros", "large", "special", "range")
LARGE = 10.0  # spread of the "large" values over the example's magnitude
MAX_ELEMENTS = 1 << 28  # elements of one input set beyond which make_inputs refuses (1 GiB of float32)
SPECIALS = (float("nan"), float("inf"), float("-inf"))


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """How to make one input tensor.

    Attributes:
        name: the input's flat name.
        dtype: its torch dtype.
        dims: per axis an int, a dim name, or a sympy expression over dim names (``2*h``).
        mean, std: floats are normal with this mean and spread.
        low, high: integers are uniform in ``low..high`` inclusive.
        nonzero: integers hold no zeros (they may divide).
        full: bools are all True (a mask the example keeps full).
        prefix: bools are True on a prefix of the last axis, per row (a mask made from lengths):
            1..size steps, one row for all of them.
        lengths_of: integers are the lengths of this dim (a name, or a sympy expression over dim names for
            an axis of a derived size, ``4*T``): 1..size, the longest equal to the size.
        pad: ``(lengths input, batch axis, time axis)``: the steps past each length are zero.
        vocab: integers index the rows of a table this long (an embedding): ``"range"`` values
            span ``0..vocab - 1``.
        declared: ``low..high`` is a declared range (a config's): ``"range"`` values span it.
    """

    name: str
    dtype: torch.dtype
    dims: tuple
    mean: float = 0.0
    std: float = 1.0
    low: int = 0
    high: int = 9
    nonzero: bool = False
    full: bool = False
    prefix: bool = False
    lengths_of: Any = None
    pad: tuple | None = None
    vocab: int | None = None
    declared: bool = False

    def shape(self, sizes: dict[str, int]) -> list[int]:
        """The shape at ``sizes`` (dim name -> size)."""
        return [size_at(d, sizes) for d in self.dims]

    def plausible_range(self) -> tuple[int, int]:
        """``(low, high)`` inclusive of the ``"range"`` values: the table's rows, the declared
        range, the example's own for 0/1 flags (an integer attention mask), else the example's
        range stretched to four times its top (and its bottom when negative)."""
        if self.vocab is not None:
            return 0, max(self.vocab - 1, 0)
        if self.declared or 0 <= self.low <= self.high <= 1:
            return self.low, self.high
        low = self.low * 4 if self.low < 0 else self.low
        return low, max(self.high * 4, self.high + 16)


def size_at(d: Any, sizes: dict[str, int]) -> int:
    """The size of one axis (an int, a dim name, or a sympy expression over dim names) at ``sizes``."""
    if isinstance(d, int):
        return d
    if isinstance(d, str):
        return int(sizes[d])
    return int(d.xreplace({s: sympy.Integer(sizes[str(s)]) for s in d.free_symbols}))


def as_input_set(extra: Any, example: str = "inputs=[(x2,), ((x3, lengths3), {})]") -> tuple[tuple, dict]:
    """An input set the user gave, as ``(args, kwargs)``: a tensor, an args tuple/list, or
    ``(args, kwargs)``.

    Raises:
        ValidationError: anything else (``example``: how the caller's argument is written, for the hint).
    """
    if isinstance(extra, torch.Tensor):
        return (extra,), {}
    if (isinstance(extra, tuple) and len(extra) == 2 and isinstance(extra[0], (tuple, list))
            and isinstance(extra[1], dict)):
        return tuple(extra[0]), dict(extra[1])
    if isinstance(extra, (tuple, list)):
        return tuple(extra), {}
    raise ValidationError(f"an input set must be a tensor, an args tuple or (args, kwargs), not {type(extra).__name__}",
                          hint=f"e.g. {example}")


def elements(specs: list[InputSpec], sizes: dict[str, int]) -> int:
    """Elements of all the inputs ``specs`` make at ``sizes``."""
    return sum(math.prod(s.shape(sizes)) for s in specs)


def make_inputs(specs: list[InputSpec], sizes: dict[str, int], seed: int = 0,
                values: str = "example") -> dict[str, torch.Tensor]:
    """Random tensors for ``specs`` at ``sizes`` (dim name -> size), seeded; lengths tied to their
    dim and, where a spec asks, the steps past each length zeroed. ``values`` is ``"example"`` or
    one of ``VALUE_KINDS`` (see the module docstring).

    Raises ``ValidationError`` when the inputs would hold more than ``MAX_ELEMENTS`` elements
    (sizes of another order than a model's inputs), naming the largest input, and ``NegativeSizeError``
    when an input's size computed from the dims (a dim related to others) is negative at ``sizes``.
    """
    if values != "example" and values not in VALUE_KINDS:
        raise ValueError(f"values must be 'example' or one of {VALUE_KINDS}, not {values!r}")
    shapes = {s.name: s.shape(sizes) for s in specs}
    negative = next(((n, shape) for n, shape in shapes.items() if any(d < 0 for d in shape)), None)
    if negative is not None:
        raise NegativeSizeError(
            f"sizes {', '.join(f'{k}={v}' for k, v in sizes.items())} give input {negative[0]!r} the shape "
            f"{list(negative[1])}: a size computed from the dims is negative there",
            hint="choose sizes that satisfy result.constraints (a dim the export relates to others is computed "
                 "from them)")
    total = sum(math.prod(v) for v in shapes.values())
    if total > MAX_ELEMENTS:
        name = max(shapes, key=lambda n: math.prod(shapes[n]))
        raise ValidationError(
            f"inputs at {', '.join(f'{k}={v}' for k, v in sizes.items())} would hold {total:,} elements "
            f"({name}: {list(shapes[name])}), more than the {MAX_ELEMENTS:,} onnxport makes",
            hint="choose smaller sizes (a config's [dims] example, min and max)")
    gen = torch.Generator().manual_seed(seed)
    out = {s.name: _make(s, shapes[s.name], sizes, gen, values) for s in specs}
    for s in specs:
        if s.pad is not None and s.pad[0] in out:
            _zero_padding(out[s.name], out[s.pad[0]], s.pad[1], s.pad[2])
    return out


def _make(s: InputSpec, shape: list[int], sizes: dict, gen: torch.Generator, values: str) -> torch.Tensor:
    if s.dtype.is_floating_point:
        return _floats(s, shape, gen, values).to(s.dtype)
    if s.dtype.is_complex:
        return torch.randn(shape, generator=gen, dtype=s.dtype)
    if s.dtype == torch.bool:
        if s.full:
            return torch.ones(shape, dtype=torch.bool)
        if s.prefix and len(shape) >= 2 and shape[-1] >= 1:
            n = shape[-1]
            lengths = torch.randint(1, n + 1, shape[:-1], generator=gen)
            if lengths.numel():
                lengths.view(-1)[int(torch.randint(0, lengths.numel(), (1,), generator=gen))] = n
            return torch.arange(n) < lengths.unsqueeze(-1)
        out = torch.rand(shape, generator=gen) > 0.5
        if out.dim() >= 2 and out.shape[-1] >= 2:
            # masks: no row all True or all False (a fully masked row is an edge case of its own,
            # where eager's fast paths and its regular path disagree)
            out[..., 0], out[..., -1] = False, True
        return out
    if s.lengths_of is not None:
        n = size_at(s.lengths_of, sizes)
        out = torch.randint(1, max(n, 1) + 1, shape, generator=gen)
        if out.numel():
            out[tuple(int(torch.randint(0, d, (1,), generator=gen)) for d in out.shape)] = n
        return out.to(s.dtype)
    low, high = s.plausible_range() if values == "range" else (s.low, s.high)
    info = torch.iinfo(s.dtype)
    low, high = max(low, info.min), min(high, info.max - 1)  # high + 1 must fit the dtype too
    out = torch.randint(low, high + 1, shape, generator=gen)
    if values == "range" and out.numel():  # both ends of the range, once each
        out.view(-1)[0] = high
        if out.numel() > 1:
            out.view(-1)[-1] = low
    if s.nonzero:
        out[out == 0] = 1 if high >= 1 else -1
    return out.to(s.dtype)


def _floats(s: InputSpec, shape: list[int], gen: torch.Generator, values: str) -> torch.Tensor:
    scale = math.sqrt(s.mean ** 2 + s.std ** 2)  # how far the example's values are from zero
    if values == "zeros":
        return torch.zeros(shape)
    if values == "symmetric":
        return torch.randn(shape, generator=gen) * max(scale, 1e-3)
    if values == "large":
        return torch.randn(shape, generator=gen) * (LARGE * max(scale, 1.0))
    out = torch.randn(shape, generator=gen) * s.std + s.mean
    if values == "special" and out.numel():
        flat = out.view(-1)
        places = torch.randperm(flat.numel(), generator=gen)[:max(1, flat.numel() // 8)]
        for i, p in enumerate(places.tolist()):
            flat[p] = SPECIALS[i % len(SPECIALS)]
    return out


def _zero_padding(x: torch.Tensor, lengths: torch.Tensor, b_axis: int, t_axis: int) -> None:
    steps = torch.arange(x.shape[t_axis])
    valid = steps.unsqueeze(0) < lengths.to(torch.int64).reshape(-1, 1)  # [b, t]
    shape = [1] * x.dim()
    if b_axis > t_axis:
        valid = valid.t()
    shape[min(b_axis, t_axis)], shape[max(b_axis, t_axis)] = valid.shape
    x.masked_fill_(~valid.reshape(shape), 0)


# ------------------------------------------------------------------------------ from an export
def dim_names(captured: Captured, named: dict | None = None) -> dict[sympy.Symbol, str]:
    """torch's symbol -> the dimension's name (``named``, e.g. the ONNX dim_params, first; then the
    declared names)."""
    out = {s: v.name for s, v in captured.variables.items()}
    out.update(named or {})
    return out


def dim_examples(captured: Captured, names: dict) -> tuple[dict[str, int], dict[str, tuple]]:
    """``({dim name: example size}, {dim name: (min, max)})`` of the export's dynamic dimensions;
    a dim only seen inside an expression (``4*h``) gets the size solving it at the example."""
    examples: dict[str, int] = {}
    derived = []
    for inp in captured.inputs:
        val, leaf = inp.value, inp.example
        if not (isinstance(val, torch.Tensor) and isinstance(leaf, torch.Tensor)):
            continue
        for d, real in zip(val.shape, leaf.shape):
            expr = expr_of(d)
            if isinstance(expr, sympy.Symbol):
                examples.setdefault(names.get(expr, str(expr)), int(real))
            elif isinstance(expr, sympy.Expr) and len(expr.free_symbols) == 1:
                derived.append((expr, int(real)))
    for expr, real in derived:
        _solve_into(examples, expr, real, names)
    ranges = {}
    for sym, vr in captured.program.range_constraints.items():
        lo = int(vr.lower) if getattr(vr.lower, "is_Integer", False) else 0
        hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else 1 << 30
        ranges[names.get(sym, str(sym))] = (lo, hi)
    for sym, var in captured.variables.items():  # what the export holds for
        ranges[names.get(sym, var.name)] = (var.lo, var.hi if var.hi is not None else 1 << 30)
    return {n: examples[n] for n in examples}, ranges


def sizes_of(captured: Captured, names: dict, inputs: tuple[tuple, dict]) -> dict[str, int]:
    """``{dim name: size}`` of the dynamic dims in an input set ``(args, kwargs)`` flattened as the
    example is (the dims an input axis holds alone, or in a derived form: ``T`` of an axis ``4*T``)."""
    out: dict[str, int] = {}
    derived = []
    for inp, leaf in zip(captured.inputs, pytree.tree_leaves(inputs)):
        if isinstance(inp.value, torch.Tensor) and isinstance(leaf, torch.Tensor) and inp.value.dim() == leaf.dim():
            for d, real in zip(inp.value.shape, leaf.shape):
                expr = expr_of(d)
                if isinstance(expr, sympy.Symbol):
                    out.setdefault(names.get(expr, str(expr)), int(real))
                elif isinstance(expr, sympy.Expr) and len(expr.free_symbols) == 1:
                    derived.append((expr, int(real)))
    for expr, real in derived:
        _solve_into(out, expr, real, names)
    return out


def _solve_into(out: dict[str, int], expr: sympy.Expr, real: int, names: dict) -> None:
    """``out[name]`` of the one symbol of ``expr`` (an axis ``4*T`` of size ``real``) when not yet
    there and a whole size solves it."""
    (sym,) = expr.free_symbols
    name = names.get(sym, str(sym))
    if name not in out:
        roots = [r for r in sympy.solve(sympy.Eq(expr, real), sym) if getattr(r, "is_Integer", False)]
        if roots:
            out[name] = int(roots[0])


def specs_from_captured(captured: Captured, names: dict) -> list[InputSpec]:
    """An ``InputSpec`` per tensor input, like the example: its dtype, its dims in the dims' names,
    floats with the example's mean and spread, integers in its range (no zeros where it has none),
    1-D positive integers whose largest value is a dim's example size as that dim's lengths, and
    integers the program uses to index a table (an embedding) with that table's length
    (``capture.tables.indexed_tables``)."""
    examples, _ = dim_examples(captured, names)
    by_size: dict[int, Any] = {}
    for name, size in examples.items():
        by_size.setdefault(size, name)
    for inp in captured.inputs:  # an axis of a derived size (``4*T``): lengths may be of it
        if isinstance(inp.value, torch.Tensor) and isinstance(inp.example, torch.Tensor):
            for d, real in zip(inp.value.shape, inp.example.shape):
                expr = expr_of(d)
                if isinstance(expr, sympy.Expr) and not isinstance(expr, sympy.Symbol) and expr.free_symbols:
                    by_size.setdefault(int(real), _dim(expr, names))
    tables = indexed_tables(captured)
    specs = []
    for inp in captured.inputs:
        val, t = inp.value, inp.example
        if not (isinstance(val, torch.Tensor) and isinstance(t, torch.Tensor)):
            continue
        dims = tuple(_dim(expr_of(d), names) for d in val.shape)
        specs.append(_like(inp.name, t, dims, by_size, tables.get(inp.name)))
    return specs


def _dim(expr: Any, names: dict) -> Any:
    if isinstance(expr, int) or (hasattr(expr, "is_number") and expr.is_number):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return names.get(expr, str(expr))
    return expr.xreplace({s: sympy.Symbol(names.get(s, str(s)), integer=True, positive=True)
                          for s in expr.free_symbols})


def _like(name: str, t: torch.Tensor, dims: tuple, by_size: dict, vocab: int | None = None) -> InputSpec:
    if t.dtype.is_floating_point:
        finite = t.float()[torch.isfinite(t.float())]
        std = float(finite.std()) if finite.numel() > 1 else 1.0
        std = std if math.isfinite(std) and std > 0 else 1.0
        mean = float(finite.mean()) if finite.numel() else 0.0
        return InputSpec(name, t.dtype, dims, mean=mean, std=std)
    if t.dtype == torch.bool:
        full = bool(t.numel() and bool(t.all()))
        return InputSpec(name, t.dtype, dims, full=full, prefix=not full and _is_prefix_mask(t))
    if t.dtype.is_complex or t.numel() == 0:
        return InputSpec(name, t.dtype, dims, low=0, high=0, vocab=vocab)
    lo, hi = int(t.min()), int(t.max())
    lengths_of = by_size.get(hi) if t.dim() == 1 and lo >= 1 and vocab is None else None
    return InputSpec(name, t.dtype, dims, low=lo, high=hi, lengths_of=lengths_of,
                     nonzero=lo <= 0 <= hi and not bool((t == 0).any()), vocab=vocab)


def _is_prefix_mask(t: torch.Tensor) -> bool:
    """Whether every row of ``t`` (along its last axis) is True on a non-empty prefix, False after."""
    if t.dim() < 2 or t.shape[-1] < 2 or not t.numel():
        return False
    return bool(t[..., 0].all()) and bool((t[..., 1:] <= t[..., :-1]).all())


def inputs_like_example(captured: Captured, names: dict, sizes: dict[str, int], seed: int = 0,
                        values: str = "example", specs: list[InputSpec] | None = None) -> tuple[tuple, dict]:
    """``(args, kwargs)`` shaped like the export's example, every dynamic dimension at ``sizes``
    (dim name -> size), values of the kind ``values`` (``make_inputs``); Python values and other
    leaves as in the example. ``specs`` (by input name) replace those made from the example."""
    made = make_inputs(specs if specs is not None else specs_from_captured(captured, names), sizes, seed, values)
    flat, spec = pytree.tree_flatten(captured.example)
    by_index = {i: made[inp.name] for i, inp in enumerate(captured.inputs) if inp.name in made}
    new_flat = [by_index.get(i, leaf) for i, leaf in enumerate(flat)]
    return tuple(pytree.tree_unflatten(new_flat, spec))
