"""Input tensors at other sizes: one ``InputSpec`` per input, one ``make_inputs`` for all.

An ``InputSpec`` says how to make one input at any sizes of the dynamic dimensions: its dtype, its
dims (ints, dim names, or expressions over dim names such as ``2*h``) and what its values look like
(the example's spread for floats, a range for integers, sequence lengths tied to a dim, masks).
Specs come from an export's example inputs (``specs_from_captured``) or from an export config's
declarations (``onnxport.config``); ``make_inputs`` builds the tensors from either, for capture's
probe of the smallest sizes, for validation and for config exports.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import sympy
import torch
from torch.utils import _pytree as pytree

from onnxport.capture.captured import Captured, expr_of


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
        lengths_of: integers are the lengths of this dim: 1..size, the longest equal to the size.
        pad: ``(lengths input, batch axis, time axis)``: the steps past each length are zero.
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
    lengths_of: str | None = None
    pad: tuple | None = None

    def shape(self, sizes: dict[str, int]) -> list[int]:
        """The shape at ``sizes`` (dim name -> size)."""
        out = []
        for d in self.dims:
            if isinstance(d, int):
                out.append(d)
            elif isinstance(d, str):
                out.append(int(sizes[d]))
            else:
                out.append(int(d.xreplace({s: sympy.Integer(sizes[str(s)]) for s in d.free_symbols})))
        return out


def make_inputs(specs: list[InputSpec], sizes: dict[str, int], seed: int = 0) -> dict[str, torch.Tensor]:
    """Random tensors for ``specs`` at ``sizes`` (dim name -> size), seeded; lengths tied to their
    dim and, where a spec asks, the steps past each length zeroed."""
    gen = torch.Generator().manual_seed(seed)
    out = {s.name: _make(s, s.shape(sizes), sizes, gen) for s in specs}
    for s in specs:
        if s.pad is not None and s.pad[0] in out:
            _zero_padding(out[s.name], out[s.pad[0]], s.pad[1], s.pad[2])
    return out


def _make(s: InputSpec, shape: list[int], sizes: dict, gen: torch.Generator) -> torch.Tensor:
    if s.dtype.is_floating_point:
        return (torch.randn(shape, generator=gen) * s.std + s.mean).to(s.dtype)
    if s.dtype.is_complex:
        return torch.randn(shape, generator=gen, dtype=s.dtype)
    if s.dtype == torch.bool:
        if s.full:
            return torch.ones(shape, dtype=torch.bool)
        out = torch.rand(shape, generator=gen) > 0.5
        if out.dim() >= 2 and out.shape[-1] >= 2:
            # masks: no row all True or all False (a fully masked row is an edge case of its own,
            # where eager's fast paths and its regular path disagree)
            out[..., 0], out[..., -1] = False, True
        return out
    if s.lengths_of is not None:
        n = int(sizes[s.lengths_of])
        out = torch.randint(1, max(n, 1) + 1, shape, generator=gen)
        if out.numel():
            out[tuple(int(torch.randint(0, d, (1,), generator=gen)) for d in out.shape)] = n
        return out.to(s.dtype)
    out = torch.randint(s.low, s.high + 1, shape, generator=gen)
    if s.nonzero:
        out[out == 0] = 1 if s.high >= 1 else -1
    return out.to(s.dtype)


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
        (sym,) = expr.free_symbols
        name = names.get(sym, str(sym))
        if name not in examples:
            roots = [r for r in sympy.solve(sympy.Eq(expr, real), sym) if getattr(r, "is_Integer", False)]
            if roots:
                examples[name] = int(roots[0])
    ranges = {}
    for sym, vr in captured.program.range_constraints.items():
        lo = int(vr.lower) if getattr(vr.lower, "is_Integer", False) else 0
        hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else 1 << 30
        ranges[names.get(sym, str(sym))] = (lo, hi)
    for sym, var in captured.variables.items():  # what the export holds for
        ranges[names.get(sym, var.name)] = (var.lo, var.hi if var.hi is not None else 1 << 30)
    return {n: examples[n] for n in examples}, ranges


def specs_from_captured(captured: Captured, names: dict) -> list[InputSpec]:
    """An ``InputSpec`` per tensor input, like the example: its dtype, its dims in the dims' names,
    floats with the example's mean and spread, integers in its range (no zeros where it has none),
    1-D positive integers whose largest value is a dim's example size as that dim's lengths."""
    examples, _ = dim_examples(captured, names)
    by_size = {}
    for name, size in examples.items():
        by_size.setdefault(size, name)
    specs = []
    for inp in captured.inputs:
        val, t = inp.value, inp.example
        if not (isinstance(val, torch.Tensor) and isinstance(t, torch.Tensor)):
            continue
        dims = tuple(_dim(expr_of(d), names) for d in val.shape)
        specs.append(_like(inp.name, t, dims, by_size))
    return specs


def _dim(expr: Any, names: dict) -> Any:
    if isinstance(expr, int) or (hasattr(expr, "is_number") and expr.is_number):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return names.get(expr, str(expr))
    return expr.xreplace({s: sympy.Symbol(names.get(s, str(s)), integer=True, positive=True) for s in expr.free_symbols})


def _like(name: str, t: torch.Tensor, dims: tuple, by_size: dict) -> InputSpec:
    if t.dtype.is_floating_point:
        std = float(t.float().std()) if t.numel() > 1 else 1.0
        std = std if math.isfinite(std) and std > 0 else 1.0
        return InputSpec(name, t.dtype, dims, mean=float(t.float().mean()) if t.numel() else 0.0, std=std)
    if t.dtype == torch.bool:
        return InputSpec(name, t.dtype, dims, full=bool(t.numel() and bool(t.all())))
    if t.dtype.is_complex or t.numel() == 0:
        return InputSpec(name, t.dtype, dims, low=0, high=0)
    lo, hi = int(t.min()), int(t.max())
    lengths_of = by_size.get(hi) if t.dim() == 1 and lo >= 1 else None
    return InputSpec(name, t.dtype, dims, low=lo, high=hi, lengths_of=lengths_of,
                     nonzero=lo <= 0 <= hi and not bool((t == 0).any()))


def inputs_like_example(captured: Captured, names: dict, sizes: dict[str, int], seed: int = 0) -> tuple[tuple, dict]:
    """``(args, kwargs)`` shaped like the export's example, every dynamic dimension at ``sizes``
    (dim name -> size); Python values and other leaves as in the example."""
    made = make_inputs(specs_from_captured(captured, names), sizes, seed)
    flat, spec = pytree.tree_flatten(captured.example)
    by_index = {i: made[inp.name] for i, inp in enumerate(captured.inputs) if inp.name in made}
    new_flat = [by_index.get(i, leaf) for i, leaf in enumerate(flat)]
    return tuple(pytree.tree_unflatten(new_flat, spec))
