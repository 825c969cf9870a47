"""lgamma, digamma, polygamma, mvlgamma and special.zeta (tests ops/gamma.py)."""

import pytest
import torch

from exportcheck import check_export, Fn, Fn2


def _wide():
    # negative non-integers, the poles (0, negative integers), the zeros of lgamma (1, 2), large values
    edges = torch.tensor([-7.5, -2.0, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 1.5, 2.0, 9.9, 10.0, 1e3, 1e6, 3e30])
    return torch.cat([torch.linspace(-20.3, 30.1, 16), edges]).reshape(2, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_lgamma_and_digamma(dtype):
    x = _wide() if dtype == torch.float32 else torch.arange(-6, 10).reshape(2, 8)
    fn = lambda t: (torch.lgamma(t), torch.digamma(t), torch.mvlgamma(t.abs() + 3, 3))  # noqa: E731
    check_export(Fn(fn), (x.to(dtype),), {"x": {0: "batch", 1: "n"}}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma(n):
    x = torch.cat([torch.linspace(-9.7, 20.2, 12),
                   torch.tensor([-3.5, -0.25, 0.0, 0.3, 1.0, 2.0, 1e3, 1e5])]).reshape(4, 5)
    check_export(Fn(lambda t: torch.polygamma(n, t)), (x,), rtol=1e-4, atol=1e-5, values=[])
    # other sizes and values draw random ones; close to the negative poles eager float32 loses digits
    # (sin(pi x) of x near an integer), which the double precision translation keeps, so they run on x > 0
    check_export(Fn(lambda t: torch.polygamma(n, t.abs() + 0.05)), (x,), {"x": {0: "batch", 1: "n"}},
                 rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_zeta():
    x = torch.tensor([[1.0, 1.5, 2.0, 3.0, 4.0, 0.5], [2.0, 7.0, 12.5, 30.0, 1.0001, 5.0]])
    q = torch.tensor([[1.0, 2.0, -1.5, -0.5, 0.0, 1.0], [1e-3, 3.0, 0.2, 1.0, 1.0, -2.0]])
    dyn = {"a": {0: "batch", 1: "n"}, "b": {0: "batch", 1: "n"}}
    check_export(Fn2(torch.special.zeta), (x, q), dyn, rtol=1e-5, atol=1e-6)
    check_export(Fn(lambda t: torch.special.zeta(t, 2.0)), (x + 1,), {"x": {0: "batch", 1: "n"}}, rtol=1e-5)
