"""The values of 0-d tensors computed from sizes: exact ratios of sizes and the aten ops on them.

``Ratio(n, d)`` is ``n / d`` with ``n`` an int or a size expression (``SymInt``) and ``d`` a positive
int: ``(length - 7) / 4 + 1`` stays exact, so its ``ceil`` is the integer ``(length - 4 + 3) // 4`` and the
guards torch.export records on it are integer arithmetic of the sizes (float expressions of sizes made
sympy's simplification grow without bound over a stack of convolutions). ``RULES`` maps each aten
overload whose 0-d result ``capture.scalar_values`` follows to the function of its arguments' values: a
``Ratio``, a truth value (``bool`` / ``SymBool``) for a comparison, or ``None`` where it is not known.

Semantics: the aten ops' definitions (``add``'s ``alpha``, ``div``'s ``rounding_mode``, ``Tensor.to``
truncating toward zero), on exact rationals.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any, Callable

import torch

aten = torch.ops.aten


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A known scalar as ``n / d``: ``n`` an int or a size expression, ``d`` a positive int. A quotient
    of sizes stays exact (``ceil((length - 7) / 4 + 1)`` is the integer ``(length - 7 + 4 + 3) // 4``),
    so the guards torch.export records on it are integer arithmetic of the sizes."""

    n: Any
    d: int = 1

    @staticmethod
    def of(x: Any) -> "Ratio | None":
        if isinstance(x, bool):
            return Ratio(int(x))
        if isinstance(x, (int, torch.SymInt)):
            return Ratio(x)
        if isinstance(x, float) and math.isfinite(x):
            n, d = x.as_integer_ratio()
            return Ratio(n, d)
        return None

    def norm(self) -> "Ratio":
        n, d = self.n, self.d
        if d < 0:
            n, d = -n, -d
        if isinstance(n, int):
            g = math.gcd(n, d) or 1
            n, d = n // g, d // g
        return Ratio(n, d)

    @property
    def symbolic(self) -> bool:
        return isinstance(self.n, torch.SymInt)

    def __add__(self, o: "Ratio") -> "Ratio":
        if self.d == o.d:
            return Ratio(self.n + o.n, self.d).norm()
        return Ratio(self.n * o.d + o.n * self.d, self.d * o.d).norm()

    def __neg__(self) -> "Ratio":
        return Ratio(-self.n, self.d)

    def __sub__(self, o: "Ratio") -> "Ratio":
        return self + (-o)

    def __mul__(self, o: "Ratio") -> "Ratio":
        return Ratio(self.n * o.n, self.d * o.d).norm()

    def __truediv__(self, o: "Ratio") -> "Ratio | None":
        if not isinstance(o.n, int) or o.n == 0:
            return None  # a division by a size: not a ratio with an int denominator
        return Ratio(self.n * o.d, self.d * o.n).norm()

    def floordiv(self, o: "Ratio") -> "Ratio":
        return Ratio((self.n * o.d) // (self.d * o.n))

    def ceil(self) -> "Ratio":
        return self if self.d == 1 else Ratio(-((-self.n) // self.d))

    def floor(self) -> "Ratio":
        return self if self.d == 1 else Ratio(self.n // self.d)

    def trunc(self) -> Any:
        """Toward zero, as ``Tensor.to(torch.int64)``: exact where ``d`` is 1 or ``n`` is a number."""
        if self.d == 1:
            return self.n
        if isinstance(self.n, int):
            return int(self.n / self.d) if abs(self.n) < 2 ** 52 else None
        return torch.sym_int(torch.sym_float(self.n) / self.d)

    def compare(self, o: "Ratio", op: Callable) -> Any:
        return op(self.n * o.d, o.n * self.d)

    def as_number(self, dtype: torch.dtype) -> Any:
        """The value ``item()`` of a tensor of ``dtype`` holding it gives."""
        if dtype.is_floating_point:
            return torch.sym_float(self.n) / self.d if self.d != 1 else torch.sym_float(self.n)
        return self.trunc()


def is_truth(x: Any) -> bool:
    """``x`` is a truth value (a comparison's result), ``bool`` or ``SymBool``, not a number."""
    return isinstance(x, (bool, torch.SymBool))


def _equal(a: Any, b: Any, equal: bool = True) -> Any:
    """``a == b`` (``a != b`` where ``equal`` is False). A truth value compared with 0 or 1 (``bool(t)``
    of a bool tensor is ``t != 0``) is that truth value or its negation."""
    if is_truth(b) and not is_truth(a):
        a, b = b, a
    if is_truth(a):
        if is_truth(b) or b.d != 1 or b.n not in (0, 1):
            return None
        return a if (b.n == 1) == equal else torch.sym_not(a)
    return a.compare(b, operator.eq if equal else operator.ne)


def _extreme(pick: Callable) -> Callable:
    def rule(a: Ratio, b: Ratio | None = None) -> Ratio | None:
        if b is None:
            return a
        return Ratio(pick(a.n * b.d, b.n * a.d), a.d * b.d).norm()

    return rule


def _clamp(a: Ratio, low: Ratio | None = None, high: Ratio | None = None) -> Ratio:
    if low is not None:
        a = _extreme(torch.sym_max)(a, low)
    return a if high is None else _extreme(torch.sym_min)(a, high)


def _div_mode(a: Ratio, b: Ratio, rounding_mode: str | None = None) -> Ratio | None:
    if rounding_mode is None:
        return a / b
    return a.floordiv(b) if rounding_mode == "floor" else None


def _scaled(b: Ratio, alpha: Any) -> Ratio | None:
    scale = Ratio.of(alpha)
    return None if scale is None else b * scale


def _compare(op: Callable) -> Callable:
    return lambda a, b: None if is_truth(a) or is_truth(b) else a.compare(b, op)


def _add(a: Ratio, b: Ratio | None) -> Ratio | None:
    return None if b is None else a + b


_ARITHMETIC = {  # the .Tensor and .Scalar overloads alike
    "add": lambda a, b, alpha=1: _add(a, _scaled(b, alpha)),
    "sub": lambda a, b, alpha=1: _add(a, _scaled(-b, alpha)),
    "rsub": lambda a, b, alpha=1: _add(b, _scaled(-a, alpha)),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "gt": _compare(operator.gt), "ge": _compare(operator.ge),
    "lt": _compare(operator.lt), "le": _compare(operator.le),
    "eq": _equal, "ne": lambda a, b: _equal(a, b, False),
}

# the ops whose 0-d result gets a value: aten overload -> the function of the arguments' values (Ratio,
# or a truth value for a comparison); None where the rule does not know it
RULES: dict[Any, Callable[..., Any]] = {
    **{getattr(getattr(aten, name), overload): rule for name, rule in _ARITHMETIC.items()
       for overload in ("Tensor", "Scalar")},
    aten.div.Tensor_mode: _div_mode,
    aten.div.Scalar_mode: _div_mode,
    aten.floor_divide.default: lambda a, b: a.floordiv(b),
    aten.reciprocal.default: lambda a: Ratio(1) / a,
    aten.neg.default: lambda a: -a,
    aten.ceil.default: lambda a: a.ceil(),
    aten.floor.default: lambda a: a.floor(),
    aten.clone.default: lambda a, **_: a,
    aten.alias.default: lambda a: a,
    aten.lift_fresh_copy.default: lambda a: a,
    aten._to_copy.default: lambda a, **_: a,
    aten.to.dtype: lambda a, *_, **__: a,
    aten.scalar_tensor.default: lambda a, **_: a,
    aten.clamp.default: _clamp,
    aten.clamp_min.default: lambda a, low: _clamp(a, low),
    aten.clamp_max.default: lambda a, high: _clamp(a, None, high),
    aten.maximum.default: _extreme(torch.sym_max),
    aten.minimum.default: _extreme(torch.sym_min),
}
