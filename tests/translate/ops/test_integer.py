"""gcd and lcm (tests ops/integer.py)."""

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
