"""Bessel functions of the first and second kind: special_bessel_j0 / j1 / y0 / y1.

Semantics: torch.special.bessel_j0 / j1 / y0 / y1 (https://pytorch.org/docs/stable/special.html):
J0 even, J1 odd, Y0 / Y1 -inf at 0 and NaN below. ONNX has none of them: they are evaluated in
double precision as the Cephes Math Library's j0.c / j1.c (PyTorch's kernels,
ATen/native/Math.h): a rational function of x^2 on [0, 5], and beyond 5 Hankel's asymptotic form
sqrt(2 / (pi x)) (P(x) cos(x - phase) - (5 / x) Q(x) sin(x - phase)) with rational P, Q of
25 / x^2; Y adds (2 / pi) log(x) J(x) (and -2 / (pi x) for Y1) to its own rational function.
"""

from __future__ import annotations

import math

import torch

from onnxport.translate.ops._double import const as _c
from onnxport.translate.ops._double import in_double
from onnxport.translate.ops._double import polevl as _poly
from onnxport.translate.registry import translates

aten = torch.ops.aten

# Cephes j0.c / j1.c coefficients, highest power first
_J0_PP = (
    0.0007969367292973471, 0.08283523921074408, 1.239533716464143,
    5.447250030587687, 8.74716500199817, 5.303240382353949,
    1.0,
)
_J0_PQ = (
    0.0009244088105588637, 0.08562884743544745, 1.2535274390105895,
    5.470977403304171, 8.761908832370695, 5.306052882353947,
    1.0,
)
_J0_QP = (
    -0.011366383889846916, -1.2825271867050931, -19.553954425773597,
    -93.20601521237683, -177.68116798048806, -147.07750515495118,
    -51.41053267665993, -6.050143506007285,
)
_J0_QQ = (
    64.3178256118178, 856.4300259769806, 3882.4018360540163,
    7240.467741956525, 5930.727011873169, 2062.0933166032783,
    242.0057402402914,
)
_J0_RP = (
    -4794432209.782018, 1956174919465.5657, -249248344360967.72,
    9708622510473064.0,
)
_J0_RQ = (
    499.563147152651, 173785.4016763747, 48440965.83399621,
    11185553704.535683, 2112775201154.892, 310518229857422.56,
    3.1812195594320496e+16, 1.7108629408104315e+18,
)
_J1_PP = (
    0.0007621256162081731, 0.07313970569409176, 1.1271960812968493,
    5.112079511468076, 8.424045901417724, 5.214515986823615,
    1.0,
)
_J1_PQ = (
    0.0005713231280725487, 0.06884559087544954, 1.105142326340617,
    5.073863861286015, 8.399855543276042, 5.209828486823619,
    1.0,
)
_J1_QP = (
    0.05108625947501766, 4.982138729512334, 75.82382841325453,
    366.7796093601508, 710.8563049989261, 597.4896124006136,
    211.68875710057213, 25.207020585802372,
)
_J1_QQ = (
    74.23732770356752, 1056.4488603826283, 4986.410583376536,
    9562.318924047562, 7997.041604473507, 2826.1927851763908,
    336.0936078106983,
)
_J1_RP = (
    -899971225.7055594, 452228297998.19403, -72749424522181.83,
    3682957328638529.0,
)
_J1_RQ = (
    620.8364781180543, 256987.25675774884, 83514679.14319493,
    22151159547.97925, 4749141220799.914, 784369607876235.9,
    8.952223361846274e+16, 5.322786203326801e+18,
)
_Y0_YP = (
    15592.436785523574, -14663929.59039716, 5435264770.518765,
    -982136065717.9115, 87590639439536.7, -3466283033847297.0,
    4.4273326857256984e+16, -1.8495080043698668e+16,
)
_Y0_YQ = (
    1041.2835366425984, 626107.330137135, 268919633.39381415,
    86400248710.3935, 20297961275010.555, 3171577528429750.5,
    2.5059625617265306e+17,
)
_Y1_YP = (
    1263204747.9017804, -647355876379.1603, 114509511541823.73,
    -8127702555013251.0, 2.024394757135949e+17, -7.788771962659501e+17,
)
_Y1_YQ = (
    594.3015923461282, 235564.09294306856, 73481194.44597217,
    18760131610.870617, 3882312774962.3857, 620557727146953.8,
    6.871410873553005e+16, 3.9727060811656064e+18,
)


def _hankel(ctx, x, order: int, second_kind: bool):
    """Cephes' form for x > 5 (x is kept >= 5 by the caller); Y0 / Y1 share J0 / J1's P and Q."""
    op = ctx.op
    p = _J0_PP if order == 0 else _J1_PP
    pq = _J0_PQ if order == 0 else _J1_PQ
    qp = _J0_QP if order == 0 else _J1_QP
    qq = _J0_QQ if order == 0 else _J1_QQ
    w = op.Div(_c(ctx, 25.0), op.Mul(x, x))
    big_p = op.Div(_poly(ctx, w, p), _poly(ctx, w, pq))
    big_q = op.Mul(op.Div(_c(ctx, 5.0), x), op.Div(_poly(ctx, w, qp), _poly(ctx, w, qq)))
    angle = op.Sub(x, _c(ctx, math.pi / 4 if order == 0 else 3 * math.pi / 4))
    if second_kind:
        wave = op.Add(op.Mul(big_p, op.Sin(angle)), op.Mul(big_q, op.Cos(angle)))
    else:
        wave = op.Sub(op.Mul(big_p, op.Cos(angle)), op.Mul(big_q, op.Sin(angle)))
    return op.Div(op.Mul(wave, _c(ctx, math.sqrt(2 / math.pi))), op.Sqrt(x))


def _j_small(ctx, x, order: int):
    """J0 / J1 on [0, 5] (Cephes j0.c / j1.c): its zeros factored out of the rational function."""
    op = ctx.op
    x2 = op.Mul(x, x)
    rp, rq = (_J0_RP, _J0_RQ) if order == 0 else (_J1_RP, _J1_RQ)
    zeros = (5.78318596294678452118e+00, 3.04712623436620863991e+01) if order == 0 else \
        (1.46819706421238932572e+01, 4.92184563216946036703e+01)
    out = op.Mul(op.Mul(op.Sub(x2, _c(ctx, zeros[0])), op.Sub(x2, _c(ctx, zeros[1]))),
                 op.Div(_poly(ctx, x2, rp), _poly(ctx, x2, rq)))
    return out if order == 0 else op.Mul(out, x)


def _j(ctx, x, order: int):
    op = ctx.op
    ax = op.Abs(x)
    small = _j_small(ctx, op.Min(ax, _c(ctx, 5.0)), order)
    big = _hankel(ctx, op.Max(ax, _c(ctx, 5.0)), order, second_kind=False)
    out = op.Where(op.LessOrEqual(ax, _c(ctx, 5.0)), small, big)
    if order == 1:
        out = op.Where(op.Less(x, _c(ctx, 0.0)), op.Neg(out), out)
    return out


def _y(ctx, x, order: int):
    op = ctx.op
    xs = op.Min(op.Max(x, _c(ctx, 1e-300)), _c(ctx, 5.0))
    x2 = op.Mul(xs, xs)
    log_term = op.Mul(op.Log(xs), _j_small(ctx, xs, order))
    if order == 0:
        small = op.Add(op.Div(_poly(ctx, x2, _Y0_YP), _poly(ctx, x2, _Y0_YQ)), op.Mul(log_term, _c(ctx, 2 / math.pi)))
    else:
        small = op.Add(op.Mul(xs, op.Div(_poly(ctx, x2, _Y1_YP), _poly(ctx, x2, _Y1_YQ))),
                       op.Mul(op.Sub(log_term, op.Reciprocal(xs)), _c(ctx, 2 / math.pi)))
    big = _hankel(ctx, op.Max(x, _c(ctx, 5.0)), order, second_kind=True)
    out = op.Where(op.LessOrEqual(x, _c(ctx, 5.0)), small, big)
    out = op.Where(op.Equal(x, _c(ctx, 0.0)), _c(ctx, -math.inf), out)
    return op.Where(op.Less(x, _c(ctx, 0.0)), _c(ctx, math.nan), out)


@translates(aten.special_bessel_j0.default)
def special_bessel_j0(ctx, x):
    """special_bessel_j0(Tensor self) = J0(x), Cephes j0 in double precision."""
    return in_double(ctx, x, lambda c, v: _j(c, v, 0))


@translates(aten.special_bessel_j1.default)
def special_bessel_j1(ctx, x):
    """special_bessel_j1(Tensor self) = J1(x), odd in x, Cephes j1 in double precision."""
    return in_double(ctx, x, lambda c, v: _j(c, v, 1))


@translates(aten.special_bessel_y0.default)
def special_bessel_y0(ctx, x):
    """special_bessel_y0(Tensor self) = Y0(x): -inf at 0, NaN below; Cephes y0 in double precision."""
    return in_double(ctx, x, lambda c, v: _y(c, v, 0))


@translates(aten.special_bessel_y1.default)
def special_bessel_y1(ctx, x):
    """special_bessel_y1(Tensor self) = Y1(x): -inf at 0, NaN below; Cephes y1 in double precision."""
    return in_double(ctx, x, lambda c, v: _y(c, v, 1))
