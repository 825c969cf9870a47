"""A size divided by a number with ``torch.div(..., rounding_mode=...)`` in transformers' code,
captured as a symbolic size.

transformers computes counts of chunks and windows as ``torch.div(seq_len, window, rounding_mode=
"trunc")`` (Longformer's ``_chunk`` and sliding-chunk attention, and some 70 model files), a form
written for the TorchScript ONNX exporter. Under torch.export a symbolic size passed to ``torch.div``
becomes a tensor; the ``.view`` that takes the quotient as a size reads it back with ``.item()``,
which makes it a data-dependent size (``u1``), and the shape checks after it cannot be decided
(``GuardOnDataDependentSymNode: Eq(u1, 1)``). ``SYMBOLIC_SIZE_DIVISION`` (a registered capture
patch) gives the call, while torch.export traces and when transformers' code makes it with a
symbolic size and Python integers, the size Python's integer division gives: ``a // b`` for
``rounding_mode="floor"``, and for ``"trunc"`` where both operands are known non-negative (sizes and
positive window counts; trunc and floor agree there). Every other call, tensors included, runs
``torch.div`` as before; eager execution outside the trace is unchanged.

Semantics: ``torch.div`` (``rounding_mode="trunc"`` rounds toward zero, ``"floor"`` down), Python's
``//`` on integers.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register

LIBRARY = "transformers."


def _integer(x: Any) -> bool:
    return isinstance(x, (int, torch.SymInt)) and not isinstance(x, bool)


def symbolic_quotient(a: Any, b: Any, rounding_mode: str | None) -> Any:
    """``a`` divided by ``b`` as an integer (a ``SymInt`` when either is one) for ``torch.div``'s
    ``rounding_mode``, or None when that is not known without a guard on the sizes (true division,
    a "trunc" whose operands may be negative, non-integer operands)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    if not (_integer(a) and _integer(b)) or rounding_mode not in ("floor", "trunc"):
        return None
    if rounding_mode == "trunc" and not (statically_known_true(a >= 0) and statically_known_true(b > 0)):
        return None
    return a // b


def _make(original: Callable) -> Callable:
    def div(input, other, *args, rounding_mode=None, **kwargs):  # noqa: A002 - torch.div's parameter names
        symbolic = isinstance(input, torch.SymInt) or isinstance(other, torch.SymInt)
        if symbolic and not args and not kwargs and \
                str(sys._getframe(1).f_globals.get("__name__", "")).startswith(LIBRARY):
            quotient = symbolic_quotient(input, other, rounding_mode)
            if quotient is not None:
                return quotient
        return original(input, other, *args, rounding_mode=rounding_mode, **kwargs)

    return div


SYMBOLIC_SIZE_DIVISION = register(Patch(
    "size division symbolic", lambda: [SetAttribute(torch, "div", _make)],
    "torch.div: while torch.export traces, a call from transformers' code dividing a symbolic size by an integer "
    "with rounding_mode 'floor' (or 'trunc' of non-negative operands) gives the symbolic quotient a // b instead of "
    "a tensor read back as a data-dependent size; every other call runs torch.div as before", when=always, order=150))
