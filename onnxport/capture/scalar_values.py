"""Scalars a model computes from its small buffers and its sizes stay known while torch.export traces.

Two forms that torch.export turns into values known only when the model runs, although every value in
them is fixed by the model or by the input's sizes:

* a branch on a small buffer: ``if self.attn_mask_probs[i] > 0`` (EoMT). torch.export gives every
  buffer a fake value, so the ``bool`` is a data-dependent guard and the export stops. The buffer is an
  initializer of the ONNX model, fixed as the branch it decides.
* sizes computed through 0-d tensors: EnCodec, Mimi, WavTokenizer and Pocket TTS keep a convolution's
  stride and kernel size as buffers and compute the padding a length needs as
  ``torch.ceil((length - kernel_size + padding_total) / stride + 1).to(torch.int64) - 1``, a 0-d tensor
  whose ``int()`` becomes an unbacked symbol; ``if length <= max_pad`` on it is then refused.

The patch marks each buffer of at most ``SMALL_BUFFER`` elements as a constant of the fake tensor mode
(its real value, a copy, kept beside the fake one: torch's constant propagation then computes the ops
on it and ``item()`` gives the number), and gives the 0-d result of an elementwise op whose every input
is a number, a size (``SymInt``) or a 0-d tensor with a known value the value as an expression of the
sizes: a ``Ratio`` (a quotient of sizes kept exact, so ``ceil`` of it is integer division), given to the
fake tensor as its ``item_memo``, which torch's ``item()`` returns and drops when the tensor is written
to; a comparison's truth value is read when ``item()`` asks for it, a guard on the sizes. The graph still computes the tensors as the model does (the ONNX model reads the
buffer and computes the padding with the model's dtypes); the expression is what the export reasons
with: guards on it are guards on sizes, decided like any other.

The expression is exact where a float32 tensor rounds: the two can differ where a quotient of sizes
lies within float32 rounding of an integer (lengths of tens of millions of samples); the ONNX model
computes as eager PyTorch does, and ``validate()`` checks other sizes.

Semantics: torch's fake tensor constants (``FakeTensor.constant``) and ``item_memo``
(``torch/_subclasses/fake_tensor.py``, ``fake_impls.local_scalar_dense``).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any, Callable

import torch
from torch.utils.weak import WeakIdKeyDictionary

from onnxport.capture.patches import Patch, SetAttribute, register

SMALL_BUFFER = 16  # elements: configuration held in buffers (strides, kernel sizes, per-block flags)

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


def _truth(x: Any) -> bool:
    return isinstance(x, (bool, torch.SymBool))


def _equal(a: Any, b: Any, equal: bool = True) -> Any:
    """``a == b`` (``a != b`` where ``equal`` is False). A truth value compared with 0 or 1 (``bool(t)``
    of a bool tensor is ``t != 0``) is that truth value or its negation."""
    if _truth(b) and not _truth(a):
        a, b = b, a
    if _truth(a):
        if _truth(b) or b.d != 1 or b.n not in (0, 1):
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
    return lambda a, b: None if _truth(a) or _truth(b) else a.compare(b, op)


_COMPARISONS = {"gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le}

# the ops whose 0-d result gets a value: aten overload -> the function of the arguments' values (Ratio,
# or a truth value for a comparison); None where the rule does not know it
RULES: dict[Any, Callable[..., Any]] = {
    **{getattr(aten, name).Tensor: rule for name, rule in (
        ("add", lambda a, b, alpha=1: _add(a, _scaled(b, alpha))),
        ("sub", lambda a, b, alpha=1: _add(a, _scaled(-b, alpha))),
        ("rsub", lambda a, b, alpha=1: _add(b, _scaled(-a, alpha))),
        ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b))},
    **{getattr(aten, name).Scalar: rule for name, rule in (
        ("add", lambda a, b, alpha=1: _add(a, _scaled(b, alpha))),
        ("sub", lambda a, b, alpha=1: _add(a, _scaled(-b, alpha))),
        ("rsub", lambda a, b, alpha=1: _add(b, _scaled(-a, alpha))),
        ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b))},
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
    **{getattr(aten, name).Tensor: _compare(op) for name, op in _COMPARISONS.items()},
    **{getattr(aten, name).Scalar: _compare(op) for name, op in _COMPARISONS.items()},
    aten.eq.Tensor: _equal, aten.eq.Scalar: _equal,
    aten.ne.Tensor: lambda a, b: _equal(a, b, False), aten.ne.Scalar: lambda a, b: _equal(a, b, False),
}


def _add(a: Ratio, b: Ratio | None) -> Ratio | None:
    return None if b is None else a + b


ITEM = (aten._local_scalar_dense.default, aten.item.default)
_VALUES: WeakIdKeyDictionary = WeakIdKeyDictionary()  # 0-d fake tensor -> (its value, its version)


def _value(tensor: Any) -> Any:
    """The value recorded for ``tensor`` (a Ratio or a truth value), ``None`` where there is none or
    the tensor was written to since."""
    entry = _VALUES.get(tensor) if isinstance(tensor, torch.Tensor) else None
    if entry is None or entry[1] != tensor._version:
        return None
    return entry[0]


def _known(value: Any) -> Any:
    """The value a rule reads for an argument: a Ratio (a number, a size, a 0-d tensor whose value is
    known), a truth value, or ``None`` when it is not known."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            return None
        known = _value(value)
        if known is not None:
            return known
        constant = getattr(value, "constant", None)
        if constant is not None:
            number = constant.item()
            return number if isinstance(number, bool) else Ratio.of(number)
        memo = getattr(value, "item_memo", None)
        return memo if _truth(memo) else Ratio.of(memo)
    if _truth(value):
        return value
    return Ratio.of(value)


def _value_of(func: Any, args: tuple, kwargs: dict) -> Any:
    """The value of ``func``'s 0-d result, or ``None`` where an argument or the rule does not know it."""
    known = [_known(a) for a in args]
    if any(k is None for k in known):
        return None
    options = {}
    for key, a in kwargs.items():
        if isinstance(a, torch.Tensor) or key in ("alpha",):
            options[key] = _known(a) if isinstance(a, torch.Tensor) else a
            if options[key] is None:
                return None
        elif key == "rounding_mode":
            options[key] = a
    values = [*known, *options.values()]
    if not any(isinstance(v, torch.SymBool) or (isinstance(v, Ratio) and v.symbolic) for v in values):
        return None  # numbers only: torch's constant propagation has it
    try:
        return RULES[func](*known, **options)
    except (TypeError, ZeroDivisionError, ValueError, AttributeError):
        return None


def _number(value: Any, dtype: torch.dtype) -> Any:
    """``item()`` of a tensor of ``dtype`` holding ``value``."""
    if dtype == torch.bool:
        return value if _truth(value) else value.compare(Ratio(0), operator.ne)
    if _truth(value):
        return None
    return value.as_number(dtype)


def _dispatch_with_values(original: Callable) -> Callable:
    from torch._subclasses.fake_tensor import FakeTensor

    def dispatch(self, func, types, args=(), kwargs=None):
        if func in ITEM and len(args) == 1 and _truth(truth := _value(args[0])):
            return bool(truth)  # a guard on the sizes, decided as any other
        out = original(self, func, types, args, kwargs if kwargs is not None else {})
        if func in RULES and type(out) is FakeTensor and out.dim() == 0 and out.constant is None \
                and out.item_memo is None:
            value = _value_of(func, tuple(args), dict(kwargs or {}))
            number = None if value is None else _number(value, out.dtype)
            if number is not None:
                if isinstance(value, Ratio) and not out.dtype.is_floating_point:
                    value = Ratio.of(number)  # an integer tensor holds the value truncated
                if isinstance(number, torch.SymBool):
                    _VALUES[out] = (number, out._version)  # read when the truth value is: item() is the guard
                elif isinstance(number, (torch.SymInt, torch.SymFloat)):
                    out.item_memo = number
                    _VALUES[out] = (value, out._version)
                else:  # the sizes decide it: a number, held as torch holds constants
                    out.constant = torch.tensor(number, dtype=out.dtype)
                    self.fake_tensor_converter.add_constant_storage_mapping(out)
        return out

    return dispatch


def _from_tensor_with_constants(small: dict[int, torch.Tensor]) -> Callable[[Callable], Callable]:
    def make(original: Callable) -> Callable:
        def from_tensor(self, tensor, *args, **kwargs):
            fake = original(self, tensor, *args, **kwargs)
            real = small.get(id(tensor))
            if real is not None and fake.constant is None and not self.is_our_fake(real):
                fake.constant = real.detach().clone()
                self.fake_tensor_converter.add_constant_storage_mapping(fake)
            return fake

        return from_tensor

    return make


def _small_buffers(model: Any) -> dict[int, torch.Tensor]:
    if not isinstance(model, torch.nn.Module):
        return {}
    return {id(b): b for _, b in model.named_buffers(remove_duplicate=False)
            if b.numel() <= SMALL_BUFFER and b.device.type == "cpu" and not b.is_complex()
            and type(b) in (torch.Tensor, torch.nn.Buffer)}


def _changes(model: Any) -> list:
    from torch._subclasses.fake_tensor import FakeTensorMode

    return [SetAttribute(FakeTensorMode, "dispatch", _dispatch_with_values),
            SetAttribute(FakeTensorMode, "from_tensor", _from_tensor_with_constants(_small_buffers(model)))]


KNOWN_SCALARS = register(Patch(
    "scalars known from small buffers and sizes", _changes,
    "torch's FakeTensorMode.from_tensor gives a buffer of at most 16 elements its real value as a constant, and "
    "FakeTensorMode.dispatch gives the 0-d result of arithmetic on numbers, sizes and known 0-d tensors its value "
    "as an expression of the sizes (item_memo): a branch on a small buffer is decided by its value, a size "
    "computed through 0-d tensors stays a size", (None,)))
