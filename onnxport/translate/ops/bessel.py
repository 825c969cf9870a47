"""Modified Bessel functions: i0, special_i0e, special_i1, special_i1e, special_modified_bessel_i0 / i1
/ k0 / k1, special_scaled_modified_bessel_k0 / k1, and special_spherical_bessel_j0.

Semantics: torch.i0 and torch.special (https://pytorch.org/docs/stable/special.html): I0, I1 are
even / odd in x, K0, K1 are inf at 0 and NaN below. ONNX has none of them: they are evaluated in
double precision as the Cephes Math Library does (PyTorch's kernels, ATen/native/Math.h): a
Chebyshev expansion (Clenshaw's recurrence, Cephes ``chbevl``) of exp(-x) I(x) on [0, 8] and of
exp(-x) sqrt(x) I(x) on (8, inf), of K on [0, 2] and (2, inf), with Cephes' coefficients.
"""

from __future__ import annotations

import torch

from onnxport.translate.ops._double import const as _c
from onnxport.translate.ops._double import in_double as _unary
from onnxport.translate.registry import translates

aten = torch.ops.aten

# Cephes i0.c, i1.c, k0.c, k1.c Chebyshev coefficients (as in ATen/native/Math.h)
_I0E_A = (
    -4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16, 1.715391285555133e-15,
    -1.1685332877993451e-14, 7.676185498604936e-14, -4.856446783111929e-13, 2.95505266312964e-12,
    -1.726826291441556e-11, 9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07, 1.1173875391201037e-06,
    -4.4167383584587505e-06, 1.6448448070728896e-05, -5.754195010082104e-05, 0.00018850288509584165,
    -0.0005763755745385824, 0.0016394756169413357, -0.004324309995050576, 0.010546460394594998,
    -0.02373741480589947, 0.04930528423967071, -0.09490109704804764, 0.17162090152220877,
    -0.3046826723431984, 0.6767952744094761,
)
_I0E_B = (
    -7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17, 3.461222867697461e-17,
    -2.8276239805165836e-16, -3.425485619677219e-16, 1.7725601330565263e-15, 3.8116806693526224e-15,
    -9.554846698828307e-15, -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
    7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11, -3.1499165279632416e-11,
    1.1889147107846439e-11, 4.94060238822497e-10, 3.3962320257083865e-09, 2.266668990498178e-08,
    2.0489185894690638e-07, 2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943,
    0.8044904110141088,
)
_I1E_A = (
    2.7779141127610464e-18, -2.111421214358166e-17, 1.5536319577362005e-16, -1.1055969477353862e-15,
    7.600684294735408e-15, -5.042185504727912e-14, 3.223793365945575e-13, -1.9839743977649436e-12,
    1.1736186298890901e-11, -6.663489723502027e-11, 3.625590281552117e-10, -1.8872497517228294e-09,
    9.381537386495773e-09, -4.445059128796328e-08, 2.0032947535521353e-07, -8.568720264695455e-07,
    3.4702513081376785e-06, -1.3273163656039436e-05, 4.781565107550054e-05, -0.00016176081582589674,
    0.0005122859561685758, -0.0015135724506312532, 0.004156422944312888, -0.010564084894626197,
    0.024726449030626516, -0.05294598120809499, 0.1026436586898471, -0.17641651835783406,
    0.25258718644363365,
)
_I1E_B = (
    7.517296310842105e-18, 4.414348323071708e-18, -4.6503053684893586e-17, -3.209525921993424e-17,
    2.96262899764595e-16, 3.3082023109209285e-16, -1.8803547755107825e-15, -3.8144030724370075e-15,
    1.0420276984128802e-14, 4.272440016711951e-14, -2.1015418427726643e-14, -4.0835511110921974e-13,
    -7.198551776245908e-13, 2.0356285441470896e-12, 1.4125807436613782e-11, 3.2526035830154884e-11,
    -1.8974958123505413e-11, -5.589743462196584e-10, -3.835380385964237e-09, -2.6314688468895196e-08,
    -2.512236237870209e-07, -3.882564808877691e-06, -0.00011058893876262371, -0.009761097491361469,
    0.7785762350182801,
)
_K0_A = (
    1.374465435613523e-16, 4.25981614279661e-14, 1.0349695257633842e-11, 1.904516377220209e-09,
    2.5347910790261494e-07, 2.286212103119452e-05, 0.001264615411446926, 0.0359799365153615,
    0.3442898999246285, -0.5353273932339028,
)
_K0_B = (
    5.300433772686263e-18, -1.6475804301524212e-17, 5.2103915050390274e-17, -1.678231096805412e-16,
    5.512055978524319e-16, -1.848593377343779e-15, 6.3400764774050706e-15, -2.2275133269916698e-14,
    8.032890775363575e-14, -2.9800969231727303e-13, 1.140340588208475e-12, -4.514597883373944e-12,
    1.8559491149547177e-11, -7.957489244477107e-11, 3.577397281400301e-10, -1.69753450938906e-09,
    8.574034017414225e-09, -4.660489897687948e-08, 2.766813639445015e-07, -1.8317555227191195e-06,
    1.39498137188765e-05, -0.00012849549581627802, 0.0015698838857300533, -0.0314481013119645,
    2.4403030820659555,
)
_K1_A = (
    -7.023863479386288e-18, -2.427449850519366e-15, -6.666901694199329e-13, -1.4114883926335278e-10,
    -2.213387630734726e-08, -2.4334061415659684e-06, -0.0001730288957513052, -0.006975723859639864,
    -0.12261118082265715, -0.3531559607765449, 1.5253002273389478,
)
_K1_B = (
    -5.756744483665017e-18, 1.7940508731475592e-17, -5.689462558442859e-17, 1.838093544366639e-16,
    -6.057047248373319e-16, 2.038703165624334e-15, -7.019837090418314e-15, 2.4771544244813043e-14,
    -8.976705182324994e-14, 3.3484196660784293e-13, -1.2891739609510289e-12, 5.13963967348173e-12,
    -2.1299678384275683e-11, 9.218315187605006e-11, -4.1903547593418965e-10, 2.015049755197033e-09,
    -1.0345762465678097e-08, 5.7410841254500495e-08, -3.5019606030878126e-07, 2.406484947837217e-06,
    -1.936197974166083e-05, 0.00019521551847135162, -0.002857816859622779, 0.10392373657681724,
    2.7206261904844427,
)


def _chbevl(ctx, y, coefficients):
    """Cephes chbevl: sum' c_i T_i(y / 2) by Clenshaw's recurrence."""
    op = ctx.op
    b0, b1, b2 = _c(ctx, coefficients[0]), _c(ctx, 0.0), None
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = op.Add(op.Sub(op.Mul(y, b1), b2), _c(ctx, c))
    return op.Mul(op.Sub(b0, b2), _c(ctx, 0.5))


def _scaled_i(ctx, ax, a, b):
    """exp(-|x|) I(|x|) (without the factor x for I1) from the two Chebyshev expansions."""
    op = ctx.op
    small = _chbevl(ctx, op.Sub(op.Div(ax, _c(ctx, 2.0)), _c(ctx, 2.0)), a)
    big_x = op.Max(ax, _c(ctx, 8.0))  # the (8, inf) expansion, kept away from a division by 0
    big = op.Div(_chbevl(ctx, op.Sub(op.Div(_c(ctx, 32.0), big_x), _c(ctx, 2.0)), b), op.Sqrt(big_x))
    return small, big, op.LessOrEqual(ax, _c(ctx, 8.0))


def _i0e(ctx, x):
    ax = ctx.op.Abs(x)
    small, big, is_small = _scaled_i(ctx, ax, _I0E_A, _I0E_B)
    return ctx.op.Where(is_small, small, big)


def _i1e(ctx, x):
    op = ctx.op
    ax = op.Abs(x)
    small, big, is_small = _scaled_i(ctx, ax, _I1E_A, _I1E_B)
    out = op.Where(is_small, op.Mul(small, ax), big)
    return op.Where(op.Less(x, _c(ctx, 0.0)), op.Neg(out), out)


@translates(aten.i0.default, aten.special_modified_bessel_i0.default)
def i0(ctx, x):
    """i0(Tensor self) = I0(x), the modified Bessel function of the first kind of order 0:
    exp(|x|) times Cephes' i0e expansion."""
    return _unary(ctx, x, lambda c, v: c.op.Mul(c.op.Exp(c.op.Abs(v)), _i0e(c, v)))


@translates(aten.special_i0e.default)
def special_i0e(ctx, x):
    """special_i0e(Tensor self) = exp(-|x|) I0(x) (Cephes i0e)."""
    return _unary(ctx, x, _i0e)


@translates(aten.special_i1.default, aten.special_modified_bessel_i1.default)
def special_i1(ctx, x):
    """special_i1(Tensor self) = I1(x), odd in x: exp(|x|) times Cephes' i1e expansion."""
    return _unary(ctx, x, lambda c, v: c.op.Mul(c.op.Exp(c.op.Abs(v)), _i1e(c, v)))


@translates(aten.special_i1e.default)
def special_i1e(ctx, x):
    """special_i1e(Tensor self) = exp(-|x|) I1(x) (Cephes i1e)."""
    return _unary(ctx, x, _i1e)


def _k(ctx, x, order: int, scaled: bool):
    """K0 / K1 (times exp(x) when ``scaled``) as Cephes k0.c / k1.c: NaN below 0, inf at 0."""
    op = ctx.op
    a, b = (_K0_A, _K0_B) if order == 0 else (_K1_A, _K1_B)
    small_x = op.Min(op.Max(x, _c(ctx, 1e-300)), _c(ctx, 2.0))
    y = op.Sub(op.Mul(small_x, small_x), _c(ctx, 2.0))
    log_half = op.Log(op.Mul(small_x, _c(ctx, 0.5)))
    if order == 0:
        i = op.Mul(op.Exp(small_x), _i0e(ctx, small_x))
        small = op.Sub(_chbevl(ctx, y, a), op.Mul(log_half, i))
    else:
        i = op.Mul(op.Exp(small_x), _i1e(ctx, small_x))
        small = op.Add(op.Mul(log_half, i), op.Div(_chbevl(ctx, y, a), small_x))
    big_x = op.Max(x, _c(ctx, 2.0))
    big = op.Div(_chbevl(ctx, op.Sub(op.Div(_c(ctx, 8.0), big_x), _c(ctx, 2.0)), b), op.Sqrt(big_x))
    if scaled:
        small = op.Mul(small, op.Exp(small_x))
    else:
        big = op.Mul(big, op.Exp(op.Neg(big_x)))
    out = op.Where(op.LessOrEqual(x, _c(ctx, 2.0)), small, big)
    out = op.Where(op.Equal(x, _c(ctx, 0.0)), _c(ctx, float("inf")), out)
    return op.Where(op.Less(x, _c(ctx, 0.0)), _c(ctx, float("nan")), out)


@translates(aten.special_modified_bessel_k0.default)
def special_modified_bessel_k0(ctx, x):
    """special_modified_bessel_k0(Tensor self) = K0(x), Cephes k0: the [0, 2] expansion less
    log(x / 2) I0(x), exp(-x) / sqrt(x) times the (2, inf) one."""
    return _unary(ctx, x, lambda c, v: _k(c, v, 0, scaled=False))


@translates(aten.special_modified_bessel_k1.default)
def special_modified_bessel_k1(ctx, x):
    """special_modified_bessel_k1(Tensor self) = K1(x), Cephes k1: log(x / 2) I1(x) plus the [0, 2]
    expansion over x, exp(-x) / sqrt(x) times the (2, inf) one."""
    return _unary(ctx, x, lambda c, v: _k(c, v, 1, scaled=False))


@translates(aten.special_scaled_modified_bessel_k0.default)
def special_scaled_modified_bessel_k0(ctx, x):
    """special_scaled_modified_bessel_k0(Tensor self) = exp(x) K0(x) (Cephes k0e)."""
    return _unary(ctx, x, lambda c, v: _k(c, v, 0, scaled=True))


@translates(aten.special_scaled_modified_bessel_k1.default)
def special_scaled_modified_bessel_k1(ctx, x):
    """special_scaled_modified_bessel_k1(Tensor self) = exp(x) K1(x) (Cephes k1e)."""
    return _unary(ctx, x, lambda c, v: _k(c, v, 1, scaled=True))


@translates(aten.special_spherical_bessel_j0.default)
def special_spherical_bessel_j0(ctx, x):
    """special_spherical_bessel_j0(Tensor self) = sin(x) / x, 1 at 0 and 0 at +-inf (PyTorch's
    spherical_bessel_j0_forward), in double precision."""
    def j0(c, v):
        op = c.op
        safe = op.Where(op.Equal(v, _c(c, 0.0)), _c(c, 1.0), v)
        out = op.Where(op.Equal(v, _c(c, 0.0)), _c(c, 1.0), op.Div(op.Sin(safe), safe))
        return op.Where(op.IsInf(v), _c(c, 0.0), out)
    return _unary(ctx, x, j0)
