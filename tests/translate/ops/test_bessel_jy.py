"""special.bessel_j0 / j1 / y0 / y1 (tests ops/bessel_jy.py)."""

import pytest
import torch

from exportcheck import check_export, Fn

DYN = {"x": {0: "batch", 1: "n"}}
S = torch.special
# zero, negatives (Y: NaN), both sides of the break at 5, small and large arguments
EDGES = torch.tensor([-30.0, -5.0, -1e-6, 0.0, 1e-6, 1e-3, 2.404825, 4.99, 5.0, 5.01, 10.0, 100.0, 1e3, 3.8317,
                      -7.5, 0.5])


@pytest.mark.parametrize("fn", [S.bessel_j0, S.bessel_j1, S.bessel_y0, S.bessel_y1], ids=["j0", "j1", "y0", "y1"])
def test_bessel_jy(fn):
    x = torch.cat([torch.linspace(-20.0, 40.0, 16), EDGES]).reshape(2, -1)
    check_export(Fn(fn), (x,), DYN, rtol=1e-4, atol=1e-5)
    check_export(Fn(fn), (torch.arange(-6, 10).reshape(2, 8),), DYN, rtol=1e-4, atol=1e-5)
