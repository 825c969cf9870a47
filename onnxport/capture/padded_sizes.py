"""Padding to a whole multiple, captured as the multiple it makes.

Windowed vision models pad a feature map to a multiple of the window before partitioning it
(Swin's ``maybe_pad``: ``pad_right = (window - width % window) % window``; its patch merging pads
by ``width % 2``; SAM2's Hiera: ``padded = height + (-height) % window``). torch.export writes the
padded size as ``w + Mod(7 - Mod(w, 7), 7)``, which names ``w`` twice; the next stage pads that
size again, so the expression doubles with every pad and torch's reasoning on it (value ranges,
runtime assertions) grows exponentially with the depth (a four-stage Swin did not capture in ten
minutes). The padded size is ``7 * ceil(w / 7)``, which names ``w`` once.

``ROUNDED_PADDING`` (a registered capture patch) has torch's symbolic addition, while torch.export
traces, write the sum of a size ``n`` and its pad to a multiple of ``k`` as ``k * ((n + k - 1) // k)``
when the pad is one of

* ``(k - n % k) % k`` or ``(-n) % k``;
* ``n % 2`` (``k = 2``),

the same integer at every ``n >= 0``: the padded tensor's size (``F.pad``'s meta adds the amount)
and the model's own ``height + pad_height`` get the one form. Every other sum is torch's.

Semantics: integer identity ``n + (-n) mod k = k * ceil(n / k)`` for ``n >= 0``, ``k >= 1``; torch's
``torch.fx.experimental.sym_node`` builds the sum (``_optimized_add``).
"""

from __future__ import annotations

from typing import Callable

import sympy
from torch.fx.experimental import sym_node
from torch.utils._sympy.functions import FloorDiv

from onnxport.capture.patches import Patch, SetAttribute, register


def _mod_args(expr) -> tuple | None:
    """``(dividend, divisor)`` of torch's ``Mod`` / ``PythonMod`` of an integer divisor, else None."""
    if type(expr).__name__ in ("Mod", "PythonMod") and len(expr.args) == 2 and expr.args[1].is_Integer:
        return expr.args[0], int(expr.args[1])
    return None


def multiple(amount, size) -> int | None:
    """``k`` when the sympy expression ``amount`` is the pad that takes ``size`` to the next multiple
    of ``k`` in one of the forms above, else None."""
    outer = _mod_args(amount)
    if outer is None:
        return None
    inner, k = outer
    if k == 2 and inner == size:
        return 2
    if k < 1:
        return None
    if inner == -size:
        return k
    rest = _mod_args(-(inner - k))
    return k if rest is not None and rest == (size, k) else None


def padded(lhs, rhs):
    """``k * ((n + k - 1) // k)`` when one of ``lhs``, ``rhs`` is a size ``n`` and the other its pad
    to a multiple of ``k``, else None."""
    for n, amount in ((lhs, rhs), (rhs, lhs)):
        k = multiple(amount, n)
        if k is not None:
            return sympy.Integer(k) * FloorDiv(n + (k - 1), sympy.Integer(k))
    return None


def _make(original: Callable) -> Callable:
    def optimized_add(lhs, rhs, *args, **kwargs):
        out = padded(lhs, rhs)
        return (False, out) if out is not None else original(lhs, rhs, *args, **kwargs)

    return optimized_add


def _changes() -> list:
    return [SetAttribute(sym_node, "_optimized_add", _make)] if hasattr(sym_node, "_optimized_add") else []


ROUNDED_PADDING = register(Patch(
    "padding to a whole multiple", _changes,
    "torch's symbolic addition: while torch.export traces, a size plus its pad to a multiple of k ((k - n % k) % k, "
    "(-n) % k, or n % 2) is written k * ceil(n / k), the same integer, naming n once (nested pads of windowed "
    "models otherwise grow torch's size expressions exponentially)"))
