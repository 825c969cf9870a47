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
sizes: a ``Ratio`` (``capture.scalar_ratio``: a quotient of sizes kept exact, so ``ceil`` of it is
integer division), given to the fake tensor as its ``item_memo``, which torch's ``item()`` returns and
drops when the tensor is written to; a comparison's truth value is read when ``item()`` asks for it, a
guard on the sizes. The graph still computes the tensors as the model does (the ONNX model reads the
buffer and computes the padding with the model's dtypes); the expression is what the export reasons
with: guards on it are guards on sizes, decided like any other.

The expression is exact where a float32 tensor rounds: the two can differ where a quotient of sizes
lies within float32 rounding of an integer (lengths of tens of millions of samples); the ONNX model
computes as eager PyTorch does, and ``validate()`` checks other sizes.

Semantics: torch's fake tensor constants (``FakeTensor.constant``) and ``item_memo``
(``torch/_subclasses/fake_tensor.py``, ``fake_impls.local_scalar_dense``).
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch
from torch.utils.weak import WeakIdKeyDictionary

from onnxport.capture.patches import Patch, SetAttribute, register
from onnxport.capture.scalar_ratio import RULES, Ratio, is_truth

SMALL_BUFFER = 16  # elements: configuration held in buffers (strides, kernel sizes, per-block flags)

aten = torch.ops.aten
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
        return memo if is_truth(memo) else Ratio.of(memo)
    if is_truth(value):
        return value
    return Ratio.of(value)


def _value_of(func: Any, args: tuple, kwargs: dict) -> Any:
    """The value of ``func``'s 0-d result, or ``None`` where an argument or the rule does not know it."""
    known = [_known(a) for a in args]
    if any(k is None for k in known):
        return None
    options = {}
    for key, a in kwargs.items():
        if isinstance(a, torch.Tensor):
            a = _known(a)
            if a is None:
                return None
        elif key not in ("alpha", "rounding_mode"):
            continue  # dtype, device, layout: what the result holds is cast by _number
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
        return value if is_truth(value) else value.compare(Ratio(0), operator.ne)
    if is_truth(value):
        return None
    return value.as_number(dtype)


def _dispatch_with_values(original: Callable) -> Callable:
    from torch._subclasses.fake_tensor import FakeTensor

    def dispatch(self, func, types, args=(), kwargs=None):
        if func in ITEM and len(args) == 1 and is_truth(held := _value(args[0])):
            return bool(held)  # a guard on the sizes, decided as any other
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
    "computed through 0-d tensors stays a size", (None,), when=lambda trace: (trace.request.model,), order=300))
