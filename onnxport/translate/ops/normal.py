"""The inverse of the normal distribution function and of erf: special_ndtri, erfinv.

Semantics: torch.special.ndtri (the x with Phi(x) = p: -inf at 0, inf at 1, NaN outside [0, 1])
and torch.erfinv (the x with erf(x) = y: +-inf at +-1, NaN outside [-1, 1]),
https://pytorch.org/docs/stable/special.html. ONNX has neither: ndtri is Cephes' rational
approximation (Cephes ndtri.c, PyTorch's calc_ndtri in ATen/native/Math.h) in double
precision, and erfinv(y) = ndtri((1 + y) / 2) / sqrt(2), where (1 + y) / 2 and its complement
(1 - y) / 2 are exact in double for a float32 y, so the tails keep their accuracy.
"""

from __future__ import annotations

import math

import torch

from onnxport.translate.ops._double import F64
from onnxport.translate.ops._double import const as _c
from onnxport.translate.ops._double import polevl as _polevl
from onnxport.translate.registry import translates

aten = torch.ops.aten
_EXP_M2 = 0.13533528323661269189  # exp(-2), where Cephes switches to the tail approximations

# Cephes ndtri.c: P0 / Q0 on |p - 1/2| <= 3/8, P1 / Q1 and P2 / Q2 in z = sqrt(-2 log p) for z < 8 and z >= 8,
# highest power first
_P0 = (
    -59.96335010141079, 98.00107541859997, -56.67628574690703, 13.931260938727968,
    -1.2391658386738125,
)
_Q0 = (
    1.0, 1.9544885833814176, 4.676279128988815, 86.36024213908905,
    -225.46268785411937, 200.26021238006066, -82.03722561683334, 15.90562251262117,
    -1.1833162112133,
)
_P1 = (
    4.0554489230596245, 31.525109459989388, 57.16281922464213, 44.08050738932008,
    14.684956192885803, 2.1866330685079025, -0.1402560791713545, -0.03504246268278482,
    -0.0008574567851546854,
)
_Q1 = (
    1.0, 15.779988325646675, 45.39076351288792, 41.3172038254672,
    15.04253856929075, 2.504649462083094, -0.14218292285478779, -0.03808064076915783,
    -0.0009332594808954574,
)
_P2 = (
    3.2377489177694603, 6.915228890689842, 3.9388102529247444, 1.3330346081580755,
    0.20148538954917908, 0.012371663481782003, 0.00030158155350823543, 2.6580697468673755e-06,
    6.239745391849833e-09,
)
_Q2 = (
    1.0, 6.02427039364742, 3.6798356385616087, 1.3770209948908132,
    0.21623699359449663, 0.013420400608854318, 0.00032801446468212774, 2.8924786474538068e-06,
    6.790194080099813e-09,
)


def _ndtri_f64(ctx, p, q):
    """ndtri(p) given p and its complement q = 1 - p (each exact), Cephes' three ranges."""
    op = ctx.op
    upper = op.Greater(p, _c(ctx, 1 - _EXP_M2))
    y = op.Where(upper, q, p)  # the smaller tail
    # central range
    yc = op.Sub(p, _c(ctx, 0.5))
    y2 = op.Mul(yc, yc)
    central = op.Mul(op.Add(yc, op.Mul(yc, op.Div(op.Mul(y2, _polevl(ctx, y2, _P0)), _polevl(ctx, y2, _Q0)))),
                     _c(ctx, math.sqrt(2 * math.pi)))
    # tails, on y kept inside (0, exp(-2)] so that no branch divides by zero
    ys = op.Min(op.Max(y, _c(ctx, 1e-300)), _c(ctx, _EXP_M2))
    x = op.Sqrt(op.Mul(op.Log(ys), _c(ctx, -2.0)))
    x0 = op.Sub(x, op.Div(op.Log(x), x))
    z = op.Reciprocal(x)
    x1 = op.Where(op.Less(x, _c(ctx, 8.0)),
                  op.Div(op.Mul(z, _polevl(ctx, z, _P1)), _polevl(ctx, z, _Q1)),
                  op.Div(op.Mul(z, _polevl(ctx, z, _P2)), _polevl(ctx, z, _Q2)))
    tail = op.Sub(x0, x1)
    tail = op.Where(upper, tail, op.Neg(tail))
    out = op.Where(op.Greater(y, _c(ctx, _EXP_M2)), central, tail)
    out = op.Where(op.Equal(p, _c(ctx, 0.0)), _c(ctx, -math.inf), out)
    out = op.Where(op.Equal(q, _c(ctx, 0.0)), _c(ctx, math.inf), out)
    outside = op.Or(op.Less(p, _c(ctx, 0.0)), op.Greater(p, _c(ctx, 1.0)))
    return op.Where(outside, _c(ctx, math.nan), out)


@translates(aten.special_ndtri.default)
def special_ndtri(ctx, x):
    """special_ndtri(Tensor self): the inverse of the standard normal distribution function,
    Cephes ndtri (PyTorch's kernel) in double precision."""
    p = ctx.cast(x, F64)
    return ctx.cast(_ndtri_f64(ctx, p, ctx.op.Sub(_c(ctx, 1.0), p)), ctx.out_dtype)


@translates(aten.erfinv.default)
def erfinv(ctx, x):
    """erfinv(Tensor self): the inverse error function, erfinv(y) = ndtri((1 + y) / 2) / sqrt(2)
    (erf(x) = 2 Phi(x sqrt 2) - 1, A&S 7.1.22 / 26.2.29), Cephes ndtri in double precision."""
    y = ctx.cast(x, F64)
    p = ctx.op.Mul(ctx.op.Add(y, _c(ctx, 1.0)), _c(ctx, 0.5))
    q = ctx.op.Mul(ctx.op.Sub(_c(ctx, 1.0), y), _c(ctx, 0.5))
    return ctx.cast(ctx.op.Mul(_ndtri_f64(ctx, p, q), _c(ctx, math.sqrt(0.5))), ctx.out_dtype)
