"""special.ndtri and erfinv (tests ops/normal.py)."""

import torch

from exportcheck import check_export, Fn

DYN = {"x": {0: "batch", 1: "n"}}


def test_ndtri():
    # 0 and 1 (-inf, inf), outside [0, 1] (NaN), the three ranges of the approximation and tiny tails
    edges = torch.tensor([0.0, 1.0, -0.5, 1.5, 1e-30, 1e-10, 0.1353, 0.1354, 0.5, 0.8646, 0.8647, 0.9999999,
                          1 - 2**-24, 2**-126, 0.25, 0.75])
    x = torch.cat([torch.linspace(0.0, 1.0, 16), edges]).reshape(2, -1)
    # other sizes draw random values, mostly outside [0, 1]: sigmoid brings them in. Not large
    # values: sigmoid saturates to exactly 1 in one runtime and to 1 - 2**-24 in the other, which
    # ndtri turns into inf against a finite value
    check_export(Fn(lambda t: (torch.special.ndtri(t), torch.special.ndtri(t.sigmoid()))), (x,), DYN,
                 rtol=1e-5, atol=1e-6, values=["symmetric", "zeros", "special"])


def test_erfinv():
    edges = torch.tensor([-1.0, 1.0, -1.5, 2.0, 0.0, -0.0, 1e-30, -1e-7, 0.7, -0.7, 0.99999994, -0.99999994,
                          0.9, -0.999, 0.5, 1e-3])
    x = torch.cat([torch.linspace(-1.0, 1.0, 16), edges]).reshape(2, -1)
    check_export(Fn(lambda t: (torch.erfinv(t), torch.erfinv(t.tanh()))), (x,), DYN, rtol=1e-5, atol=1e-6,
                 values=["symmetric", "zeros", "special"])  # tanh saturates as sigmoid does in test_ndtri
    check_export(Fn(torch.erfinv), (torch.tensor([[-2, -1, 0], [1, 2, 0]]),), DYN)
