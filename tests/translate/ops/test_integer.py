"""gcd, lcm and integer powers (tests ops/integer.py)."""

import torch

from exportcheck import check_export, Fn2

DYN = {"a": {0: "batch", 1: "n"}, "b": {0: "batch", 1: "n"}}


def test_gcd_lcm():
    # zeros, negatives, equal values, large values and consecutive Fibonacci numbers (Euclid's worst case)
    a = torch.tensor([[0, 0, 12, -12, 7, 2**40 * 3, 7540113804746346429, -5, 1, 1 << 62],
                      [18, -18, 0, 35, -35, 1000000007, 123456789012, 6, 6, 3]])
    b = torch.tensor([[0, 5, -18, 18, 7, 2**35 * 9, 4660046610375530309, 10, 1, 1 << 61],
                      [12, 12, 0, -14, 14, 998244353, 9876543210, -4, 9, 3]])
    check_export(Fn2(lambda x, y: (torch.gcd(x, y), torch.lcm(x % 100000, y % 100000))), (a, b), DYN)


def test_gcd_lcm_broadcast_int32():
    a = torch.tensor([[0, 4, -6, 9], [15, -21, 100, 1]], dtype=torch.int32)
    b = torch.tensor([6, -10, 0, 3], dtype=torch.int32)
    check_export(Fn2(lambda x, y: (torch.gcd(x, y), torch.lcm(x, y))), (a, b), {"a": {0: "batch"}, "b": None})


class RollingHash(torch.nn.Module):
    """BLT's byte-group hash (transformers' ``rolling_polynomial_hash``): ``prime ** arange(group)`` of int64,
    which overflows 2^63 and wraps around from the third power on."""

    def forward(self, ids):
        windows = torch.cat([torch.zeros(ids.shape[0], 7, dtype=torch.int64), ids], dim=1).unfold(1, 8, 1)
        powers = torch.tensor(1000000007, dtype=torch.int64) ** torch.arange(windows.shape[-1])
        return torch.sum(windows * powers, dim=-1) % 30000


def test_an_integer_power_past_int64_wraps_as_eager():
    ids = torch.randint(0, 256, (2, 9))
    check_export(RollingHash(), (ids,), {"ids": {0: "batch", 1: "n"}})


def test_integer_powers_of_tensors_scalars_and_negative_exponents():
    a = torch.tensor([[2, 3, -1, -1, 1, 0, 7, -3, 5, 2], [0, 1, 2, -2, 3, 11, -1, 4, 6, 9]])
    b = torch.tensor([[70, 40, 3, -2, -5, -1, 0, 21, 27, 63], [0, 9, 1, 5, -3, 17, -7, 31, 2, 1]])
    check_export(Fn2(lambda x, y: (torch.pow(x, y.abs() % 64) + torch.where(y < 0, torch.pow(x, y), 0),
                                   x ** 25, torch.pow(3, y.abs() % 64))), (a, b), DYN)


def test_an_int32_power_wraps_at_32_bits():
    a = torch.tensor([[3, -7, 12345, 2], [5, 6, 7, 8]], dtype=torch.int32)
    b = torch.tensor([[25, 13, 3, 31], [14, 17, 11, 9]], dtype=torch.int32)
    check_export(Fn2(lambda x, y: (torch.pow(x, y), x ** 11)), (a, b), DYN)


def test_integer_sums_wrap_over_axes_and_empty_axes():
    a = torch.tensor([[[1 << 62, 1 << 62, 3], [-(1 << 62), 7, 1 << 61]], [[5, -9, 1 << 60], [2, 2, 2]]])
    check_export(Fn2(lambda x, y: (x.sum(), x.sum((0, 2), keepdim=True), x.sum(-1), (y * 0)[:, :0].sum(1),
                                   x.to(torch.int32).sum(1, dtype=torch.int32))),
                 (a, a.clone()), {"a": {0: "batch", 2: "n"}, "b": {0: "batch", 2: "n"}})
