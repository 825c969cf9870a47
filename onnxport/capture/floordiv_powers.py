"""Floor divisions of sizes by a factor the dividend holds squared, cancelled.

torch's ``FloorDiv(p, q)`` cancels a common factor of dividend and divisor (``FloorDiv(b * h * w, w)`` is
``FloorDiv(b * h, 1)``, ``b * h``) by a syntactic search, ``simple_floordiv_gcd``: a factor of ``q`` that
appears in every term of ``p``. A size multiplied by itself is a power in sympy (``h * h`` is ``h**2``),
and a power is not the factor it raises, so ``FloorDiv(b * h**2 * c, h * c)`` stays whole. A square
feature map makes exactly that: MaskFormer's Swin backbone with a square image (one dim for height and
width) views its ``h * h`` patches back into windows, ``view(-1, h // 12, 12, h // 12, 12, c)``, and the
``-1`` is the number of elements divided by the rest. The uncancelled quotients nest stage after stage,
and torch's reasoning on them (value ranges, guards, runtime assertions) took minutes per trace.

``FLOORDIV_POWERS`` (a registered capture patch) extends the search while torch.export traces: where it
finds no common factor, a factor ``x**k`` of ``q`` (``x`` itself: ``k = 1``) is common with exponent
``min(k, the least exponent of x in any term of p)``. Dividing both by the same nonzero factor leaves
``p / q`` as it is, hence its floor (``q = 0`` is a division by zero either way). The 2-stage backbone at
64x64 captures in 139 s instead of 346 s, with the same program.

Semantics: ``torch.utils._sympy.functions.FloorDiv`` and ``simple_floordiv_gcd`` (torch's own cancellation,
extended to powers).
"""

from __future__ import annotations

from typing import Callable

import sympy
from torch.utils._sympy import functions

from onnxport.capture.patches import Patch, SetAttribute, always, register


def exponents(term: sympy.Basic) -> dict:
    """``{factor: exponent}`` of the non-numeric factors of the product ``term`` (``x**k`` with ``k`` a
    positive integer counts as ``x`` ``k`` times; another power is a factor of its own)."""
    out: dict = {}
    for f in sympy.Mul.make_args(term):
        if f.is_Number:
            continue
        if isinstance(f, sympy.Pow) and f.exp.is_Integer and f.exp > 0:
            out[f.base] = out.get(f.base, 0) + int(f.exp)
        else:
            out[f] = out.get(f, 0) + 1
    return out


def power_gcd(p: sympy.Basic, q: sympy.Basic) -> sympy.Basic:
    """The product of the factors ``x**m`` of ``q`` found in every term of ``p``, ``m`` the least
    exponent of ``x`` among them and ``q`` (``1`` when there is none)."""
    terms = [exponents(t) for t in sympy.Add.make_args(p)]
    common = sympy.S.One
    for x, k in exponents(q).items():
        m = min([k] + [t.get(x, 0) for t in terms])
        if m > 0:
            common *= x ** m
    return common


def _has_power(expr: sympy.Basic) -> bool:
    return any(isinstance(f, sympy.Pow) for t in sympy.Add.make_args(expr) for f in sympy.Mul.make_args(t))


def _make(original: Callable) -> Callable:
    def simple_floordiv_gcd(p, q):
        gcd = original(p, q)
        if gcd != 1 or not (_has_power(p) or _has_power(q)):
            return gcd
        return power_gcd(p, q)

    return simple_floordiv_gcd


def _changes() -> list:
    if not hasattr(functions, "simple_floordiv_gcd"):
        return []  # a torch whose FloorDiv cancels otherwise: left as it is
    return [SetAttribute(functions, "simple_floordiv_gcd", _make)]


FLOORDIV_POWERS = register(Patch(
    "floor division cancelling powers", _changes,
    "torch's FloorDiv simplification: while torch.export traces, a factor of the divisor that the dividend "
    "holds as a power (h * h is h**2) is cancelled as a plain common factor is, so the quotients of square "
    "feature maps do not nest stage after stage", when=always, order=191))
