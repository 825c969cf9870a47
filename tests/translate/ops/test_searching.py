"""searchsorted and bucketize (tests ops/searching.py)."""

import pytest
import torch

from exportcheck import check_export, Fn2

DYN2 = {"a": {0: "n"}, "b": {0: "batch", 1: "k"}}


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d(right):
    seq = torch.tensor([-1e30, -5.0, -1.0, 0.0, 0.0, 2.5, 7.0, 1e30])
    values = torch.tensor([[-1e31, -5.0, -0.0, 0.0, 1.0, 2.5], [7.0, 8.0, 1e30, 1e31, -3.0, 0.5]])
    fn = lambda s, v: (torch.searchsorted(s, v, right=right),  # noqa: E731
                       torch.searchsorted(s, v, side="right" if right else "left", out_int32=True),
                       torch.bucketize(v, s, right=right))
    # other sizes draw random sequences: sort them first, as searchsorted requires. Not NaN: PyTorch
    # orders NaN after every number, the translation's comparisons with NaN are false
    # (docs/reliability.md, known differences)
    check_export(Fn2(lambda s, v: fn(s.sort().values, v)), (seq, values), DYN2,
                 values=["symmetric", "zeros", "large"])


def test_searchsorted_rows_sorter_and_int64():
    seq = torch.tensor([[3, 1, 2, 2, -4], [10, 0, -7, 5, 5]])
    values = torch.tensor([[2, -5, 0], [5, 11, -7]])
    fn = lambda s, v: (torch.searchsorted(s, v, sorter=s.argsort(stable=True)),  # noqa: E731
                       torch.searchsorted(s.sort().values, v, right=True), torch.bucketize(v, s[0].sort().values))
    check_export(Fn2(fn), (seq, values), {"a": {0: "batch", 1: "n"}, "b": {0: "batch", 1: "k"}})
    check_export(Fn2(lambda s, v: torch.searchsorted(s.sort().values, v.float())), (seq[0], values),
                 {"a": {0: "n"}, "b": {0: "batch", 1: "k"}})
