"""i0, special.i0e / i1 / i1e, the modified Bessel functions I0, I1, K0, K1 (plain and scaled) and
special.spherical_bessel_j0 (tests ops/bessel.py)."""

import pytest
import torch

from exportcheck import check_export, Fn

DYN = {"x": {0: "batch", 1: "n"}}
S = torch.special
# both sides of the expansions' breaks (2, 8), zero, negatives, values where exp(x) overflows float32
EDGES = torch.tensor([-100.0, -9.0, -8.0, -2.0, -1e-3, 0.0, 1e-3, 0.5, 2.0, 2.01, 7.99, 8.0, 8.01, 30.0, 88.0, 100.0])


def _wide():
    return torch.cat([torch.linspace(-40.0, 40.0, 16), EDGES]).reshape(4, 8)


@pytest.mark.slow
@pytest.mark.parametrize("fn", [torch.i0, S.i0e, S.i1, S.i1e, S.modified_bessel_i0, S.modified_bessel_i1],
                         ids=["i0", "i0e", "i1", "i1e", "modified_bessel_i0", "modified_bessel_i1"])
def test_first_kind(fn):
    # the edges as given, overflow included; generated values stay below 85: just above 88.7 eager
    # float32 overflows exp(x) to inf where the double-precision translation is still finite
    check_export(Fn(fn), (_wide(),), DYN, rtol=1e-5, atol=1e-6, sizes=[], values=[], min_sets=1)
    check_export(Fn(lambda t: fn(t.clamp(-85.0, 85.0))), (_wide(),), DYN, rtol=1e-5, atol=1e-6)
    check_export(Fn(fn), (torch.arange(-12, 12).reshape(4, 6),), DYN, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn", [S.modified_bessel_k0, S.modified_bessel_k1, S.scaled_modified_bessel_k0,
                                S.scaled_modified_bessel_k1],
                         ids=["k0", "k1", "scaled_k0", "scaled_k1"])
def test_second_kind(fn):
    # NaN below 0, inf at 0
    check_export(Fn(fn), (_wide(),), DYN, rtol=1e-5, atol=1e-6)
    check_export(Fn(lambda t: fn(t.abs() + 1e-2)), (_wide(),), DYN, rtol=1e-5, atol=1e-6)


def test_spherical_bessel_j0():
    x = torch.cat([_wide(), torch.tensor([[float("inf"), float("-inf"), 1e30, -1e-30, 0.3, 0.7, 1e4, -3.0]])])
    check_export(Fn(S.spherical_bessel_j0), (x,), DYN, rtol=1e-5, atol=1e-6)
