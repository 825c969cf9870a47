"""The gamma function family: lgamma, digamma, polygamma, special_zeta (mvlgamma decomposes to
lgamma).

Semantics: torch.lgamma, torch.digamma, torch.polygamma, torch.special.zeta
(https://pytorch.org/docs/stable/special.html), with PyTorch's values at the poles (lgamma = inf,
digamma(0) = -inf, digamma at negative integers = NaN; zeta(x, q) = NaN for x < 1, inf for x = 1
and at non-positive integer q). ONNX has none of them: they are computed in double precision from
ONNX elementwise operators with the classical formulas (Abramowitz & Stegun 6.1.17, 6.1.40,
6.3.7, 6.3.18, 6.4.11), the recurrences shifting the argument to 10 or more, and, for zeta, the
Euler-Maclaurin summation of the Cephes Math Library's ``zeta`` (which PyTorch's kernel is).
"""

from __future__ import annotations

import math

import torch

from onnxport.translate.ops._double import const as _c
from onnxport.translate.ops._double import polevl
from onnxport.translate.ops._double import to_double as _f64
from onnxport.translate.registry import translates

aten = torch.ops.aten
_SHIFT = 10  # the recurrences move the argument to z + 10, where the asymptotic series converge to double accuracy


def _horner(ctx, z, coefficients):
    """coefficients[0] + coefficients[1] * z + ... (highest power last)."""
    return polevl(ctx, z, coefficients[::-1])


def _sin_pi_frac(ctx, x):
    """|sin(pi x)| from the fractional part of x, exact zeros at the integers whatever |x|."""
    frac = ctx.op.Sub(x, ctx.op.Floor(x))
    return ctx.op.Sin(ctx.op.Mul(frac, _c(ctx, math.pi)))


def _lgamma_f64(ctx, x):
    op = ctx.op
    reflect = op.Less(x, _c(ctx, 0.5))
    z = op.Where(reflect, op.Sub(_c(ctx, 1.0), x), x)
    # lgamma(z) = lgamma(z + 10) - sum_k log(z + k)  (A&S 6.1.15)
    logs = op.Log(z)
    for k in range(1, _SHIFT):
        logs = op.Add(logs, op.Log(op.Add(z, _c(ctx, float(k)))))
    w = op.Add(z, _c(ctx, float(_SHIFT)))
    # Stirling's series (A&S 6.1.40)
    iw = op.Reciprocal(w)
    iw2 = op.Mul(iw, iw)
    series = op.Mul(iw, _horner(ctx, iw2, [1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360]))
    stirling = op.Add(op.Sub(op.Mul(op.Sub(w, _c(ctx, 0.5)), op.Log(w)), w),
                      op.Add(_c(ctx, 0.5 * math.log(2 * math.pi)), series))
    positive = op.Sub(stirling, logs)
    # reflection (A&S 6.1.17): lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)
    reflected = op.Sub(op.Log(op.Div(_c(ctx, math.pi), _sin_pi_frac(ctx, x))), positive)
    out = op.Where(reflect, reflected, positive)
    return op.Where(op.IsInf(x), op.Abs(x), out)


@translates(aten.lgamma.default)
def lgamma(ctx, x):
    """lgamma(Tensor self) = log|Gamma(x)|: inf at the non-positive integers and at +-inf.

    Stirling's series at z + 10 with the recurrence Gamma(z + 1) = z Gamma(z) below it, and the
    reflection formula for x < 1/2 (A&S 6.1.17, 6.1.40), in double precision."""
    return ctx.cast(_lgamma_f64(ctx, _f64(ctx, x)), ctx.out_dtype)


def _digamma_f64(ctx, x):
    op = ctx.op
    reflect = op.Less(x, _c(ctx, 0.5))
    z = op.Where(reflect, op.Sub(_c(ctx, 1.0), x), x)
    # psi(z) = psi(z + 10) - sum_k 1 / (z + k)  (A&S 6.3.6)
    shift = op.Reciprocal(z)
    for k in range(1, _SHIFT):
        shift = op.Add(shift, op.Reciprocal(op.Add(z, _c(ctx, float(k)))))
    w = op.Add(z, _c(ctx, float(_SHIFT)))
    iw2 = op.Reciprocal(op.Mul(w, w))
    # psi(w) ~ log w - 1/(2w) - sum B_2k / (2k w^2k)  (A&S 6.3.18)
    series = op.Mul(iw2, _horner(ctx, iw2, [1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12]))
    positive = op.Sub(op.Sub(op.Sub(op.Log(w), op.Div(_c(ctx, 0.5), w)), series), shift)
    # reflection (A&S 6.3.7): psi(x) = psi(1 - x) - pi / tan(pi x), of the fractional part
    frac = op.Sub(x, op.Floor(x))
    angle = op.Mul(frac, _c(ctx, math.pi))
    reflected = op.Sub(positive, op.Div(op.Mul(op.Cos(angle), _c(ctx, math.pi)), op.Sin(angle)))
    out = op.Where(reflect, reflected, positive)
    nan = _c(ctx, float("nan"))
    out = op.Where(op.And(op.Less(x, _c(ctx, 0.0)), op.Equal(x, op.Floor(x))), nan, out)
    # digamma(+-0) = copysign(inf, -x); digamma(inf) = inf, digamma(-inf) = NaN
    out = op.Where(op.Equal(x, _c(ctx, 0.0)), op.Neg(op.Reciprocal(x)), out)
    return op.Where(op.IsInf(x, detect_negative=0), x, out)


@translates(aten.digamma.default)
def digamma(ctx, x):
    """digamma(Tensor self) = d/dx log Gamma(x): -inf at +0, NaN at the negative integers.

    The asymptotic series at z + 10 with the recurrence psi(z + 1) = psi(z) + 1/z below it, and the
    reflection formula for x < 1/2 (A&S 6.3.6, 6.3.7, 6.3.18), in double precision."""
    return ctx.cast(_digamma_f64(ctx, _f64(ctx, x)), ctx.out_dtype)


# Cephes zeta's Euler-Maclaurin divisors: (2k)! / B_2k
_ZETA_A = [12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18]
_ZETA_TERMS = 30  # terms summed directly: q + 30 >= 9 (Cephes' threshold) for q >= -21


def _zeta_f64(ctx, x, q):
    op = ctx.op
    s = None
    for k in range(_ZETA_TERMS + 1):
        b = op.Pow(op.Add(q, _c(ctx, float(k))), op.Neg(x))
        s = b if s is None else op.Add(s, b)
    w = op.Add(q, _c(ctx, float(_ZETA_TERMS)))
    # the tail sum_{k > N} (q + k)^-x by Euler-Maclaurin from w = q + N, as Cephes' zeta (w^-x counted
    # above, half of it taken back)
    s = op.Add(s, op.Sub(op.Div(op.Mul(b, w), op.Sub(x, _c(ctx, 1.0))), op.Mul(b, _c(ctx, 0.5))))
    a = _c(ctx, 1.0)
    for i, divisor in enumerate(_ZETA_A):
        a = op.Mul(a, op.Add(x, _c(ctx, float(2 * i))))
        b = op.Div(b, w)
        s = op.Add(s, op.Div(op.Mul(a, b), _c(ctx, divisor)))
        a = op.Mul(a, op.Add(x, _c(ctx, float(2 * i + 1))))
        b = op.Div(b, w)
    inf, nan = _c(ctx, float("inf")), _c(ctx, float("nan"))
    non_positive = op.LessOrEqual(q, _c(ctx, 0.0))
    s = op.Where(op.And(non_positive, op.Not(op.Equal(x, op.Floor(x)))), nan, s)
    s = op.Where(op.And(non_positive, op.Equal(q, op.Floor(q))), inf, s)
    s = op.Where(op.Less(x, _c(ctx, 1.0)), nan, s)
    return op.Where(op.Equal(x, _c(ctx, 1.0)), inf, s)


@translates(aten.special_zeta.default, aten.special_zeta.self_scalar, aten.special_zeta.other_scalar)
def special_zeta(ctx, x, q):
    """special_zeta(Tensor self, Tensor other) = sum_{k >= 0} (q + k)^-x, the Hurwitz zeta function.

    The first 31 terms summed, the tail by Euler-Maclaurin with the 12 Bernoulli terms of Cephes'
    zeta (PyTorch's kernel), in double precision."""
    return ctx.cast(_zeta_f64(ctx, _f64(ctx, x), _f64(ctx, q)), ctx.out_dtype)


def _trigamma_f64(ctx, x):
    op = ctx.op
    reflect = op.Less(x, _c(ctx, 0.5))
    z = op.Where(reflect, op.Sub(_c(ctx, 1.0), x), x)
    shift = op.Reciprocal(op.Mul(z, z))
    for k in range(1, _SHIFT):
        zk = op.Add(z, _c(ctx, float(k)))
        shift = op.Add(shift, op.Reciprocal(op.Mul(zk, zk)))
    w = op.Add(z, _c(ctx, float(_SHIFT)))
    iw = op.Reciprocal(w)
    iw2 = op.Mul(iw, iw)
    # psi'(w) ~ 1/w + 1/(2w^2) + sum B_2k / w^(2k+1)  (A&S 6.4.12)
    series = op.Add(op.Add(iw, op.Mul(iw2, _c(ctx, 0.5))),
                    op.Mul(op.Mul(iw, iw2),
                          _horner(ctx, iw2, [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6])))
    positive = op.Add(series, shift)
    # reflection: psi'(1 - x) + psi'(x) = pi^2 / sin^2(pi x)
    sin = _sin_pi_frac(ctx, x)
    reflected = op.Sub(op.Div(_c(ctx, math.pi ** 2), op.Mul(sin, sin)), positive)
    return op.Where(reflect, reflected, positive)


@translates(aten.polygamma.default)
def polygamma(ctx, n, x):
    """polygamma(int n, Tensor self): the n-th derivative of digamma. n = 0 is digamma, n = 1 the
    trigamma series (A&S 6.4.11-12 with the reflection formula, as PyTorch's trigamma), n >= 2
    (-1)^(n+1) n! zeta(n + 1, x) as PyTorch computes it (A&S 6.4.10)."""
    xd = _f64(ctx, x)
    if n == 0:
        out = _digamma_f64(ctx, xd)
    elif n == 1:
        out = _trigamma_f64(ctx, xd)
    else:
        out = ctx.op.Mul(_zeta_f64(ctx, _c(ctx, float(n + 1)), xd),
                         _c(ctx, (1.0 if n % 2 else -1.0) * math.factorial(n)))
    return ctx.cast(out, ctx.out_dtype)
