"""signbit, ldexp, special.erfcx and log_ndtr (tests ops/special.py)."""

import pytest
import torch

from exportcheck import check_export, Fn, Fn2

DYN = {"x": {0: "batch", 1: "n"}}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_signbit(dtype):
    x = torch.tensor([[-2.0, -0.0, 0.0, 3.0], [-1e30, 1.0, -1e-30, 1e30]]).to(dtype)
    check_export(Fn(torch.signbit), (x,), DYN)


def test_ldexp():
    fn = lambda a, b: (torch.ldexp(a, b), torch.ldexp(a, b.float()), torch.ldexp(b, b))  # noqa: E731
    check_export(Fn2(fn), (torch.randn(3, 4), torch.randint(-5, 6, (3, 4))),
                 {"a": {0: "batch", 1: "n"}, "b": {0: "batch", 1: "n"}})


def test_erfcx_and_log_ndtr_over_a_wide_range():
    # wide values: exp(x^2) overflows and 1 - erf(x) cancels beyond x = 4 in float32
    x = torch.cat([torch.linspace(-9, 40, 24), torch.tensor([0.0, 1.99, 2.0, 2.01, 1e4])]).reshape(1, -1).repeat(2, 1)
    fn = lambda t: (torch.special.erfcx(t), torch.special.log_ndtr(t), torch.special.erfcx(t.long()))  # noqa: E731
    check_export(Fn(fn), (x,), {"x": {0: "batch"}})


def test_erfc_keeps_its_digits_in_the_tail():
    # 1 - erf(x) keeps 4 significant digits of erfc at x = 2 and one at x = 3 in float32: an output
    # holding only the tail (its scale erfc(1.5) = 0.034), judged against float64, sees the loss
    tail = torch.cat([torch.linspace(1.5, 9.0, 31), torch.tensor([1.99, 2.0, 2.01])]).reshape(1, -1).repeat(2, 1)
    report = check_export(Fn(torch.erfc), (tail,), {"x": {0: "batch"}}, values=[]).validate(values=[])
    assert all(c.basis == "float64 reference" for c in report.checks), report
    check_export(Fn(torch.erfc), (torch.linspace(-6, 6, 40).reshape(2, -1),), {"x": {0: "batch"}})
