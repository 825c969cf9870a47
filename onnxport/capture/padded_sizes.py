"""Padding to a whole multiple, captured as the multiple it makes.

Windowed vision models pad a feature map to a multiple of the window before partitioning it
(Swin's ``maybe_pad``: ``pad_right = (window - width % window) % window``; its patch merging pads
by ``width % 2``; SAM2's Hiera: ``padded = height + (-height) % window``). torch.export writes the
padded size as ``w + Mod(7 - Mod(w, 7), 7)``, which names ``w`` twice, and the window partition's
``view(B, padded // 7, 7, ...)`` asks torch to prove that sum divisible by 7; with every stage's
sizes built on the last, torch's reasoning on them (value ranges, runtime assertions, divisibility)
grew until SAM2's four-stage Hiera did not capture in ten minutes. The padded size is
``7 * ceil(w / 7)``, which names ``w`` once and is a multiple of 7 by its form (SAM2's Hiera: 75 s).

``ROUNDED_PADDING`` (a registered capture patch) has torch's symbolic addition, while torch.export
traces, write the sum of a size ``n`` and its pad to a multiple of ``k`` as ``k * ((n + k - 1) // k)``
when the pad is one of

* ``(k - n % k) % k`` or ``(-n) % k``;
* ``n % 2`` (``k = 2``),

the same integer at every ``n >= 0``: the padded tensor's size (``F.pad``'s meta adds the amount)
and the model's own ``height + pad_height`` get the one form. Only a computed size is padded so (a
stage's output, a convolution's ``(h - 1) // 4 + 1``), where naming it twice compounds; the pad of
an input's own size (a dim symbol) is one step and keeps torch's form, whose conditions torch's
solver leaves to onnxport (Mamba2's chunks of a sequence: written ``4 * ceil(seq / 4)``, the reshape
into chunks narrowed ``seq`` to ``>= 5``, which eager PyTorch does not need). Where the padded size
is one multiple (or none) at the example, torch's own form is kept: a count of chunks that is 1
there, read in the simple form, was decided as 1 in a reshape's layout check (Qwen3-Next's chunked
delta rule traced at 7 tokens failed at 130). Every other sum is torch's.

Semantics: integer identity ``n + (-n) mod k = k * ceil(n / k)`` for ``n >= 0``, ``k >= 1``; torch's
``torch.fx.experimental.sym_node`` builds the sum (``_optimized_add``).
"""

from __future__ import annotations

from typing import Callable

import sympy
from torch.fx.experimental import sym_node
from torch.utils._sympy.functions import FloorDiv

from onnxport.capture.patches import Patch, SetAttribute, always, register


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
        if getattr(n, "is_Symbol", True):  # an input's own size: one pad, nothing compounds
            continue
        k = multiple(amount, n)
        if k is not None:
            count = FloorDiv(n + (k - 1), sympy.Integer(k))
            return sympy.Integer(k) * count if _example_value(count) not in (None, 0, 1) else None
    return None


def _example_value(expr) -> int | None:
    """``expr``'s value at the example's sizes (the shape environment of the trace running), or None."""
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode()
    env = getattr(mode, "shape_env", None) if mode is not None else None
    if env is None:
        return None
    values = getattr(env, "backed_var_to_val", None)
    value = sympy.sympify(expr).xreplace(env.var_to_val if values is None else values)
    return int(value) if value.is_Integer else None


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
    "models otherwise grow torch's size expressions exponentially)", when=always, order=190))
