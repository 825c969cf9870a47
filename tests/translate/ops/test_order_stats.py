"""median along an axis and nanmedian (tests ops/order_stats.py)."""

import pytest
import torch

from exportcheck import check_export, Fn

DYN = {"x": {0: "batch", 1: "n"}}


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_median_and_nanmedian_along_an_axis(dim):
    fn = lambda t: (*torch.median(t, dim), *torch.median(t, dim, keepdim=True),  # noqa: E731
                    *torch.nanmedian(t, dim), torch.nanmedian(t))
    check_export(Fn(fn), (torch.randn(4, 5, 3),), DYN)


def test_ties_pick_the_first_occurrence_like_pytorch():
    x = torch.tensor([[3, 1, 1, 2, 2, 3], [0, 0, 0, 0, 0, 0], [5, 4, 4, 4, 1, 1]])
    fn = lambda t: (*torch.median(t, 1), *torch.median(t.float(), 0), torch.nanmedian(t))  # noqa: E731
    check_export(Fn(fn), (x,))


def test_nan_makes_median_nan_and_is_skipped_by_nanmedian():
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, -1.0], [nan, nan, nan, nan], [2.0, 5.0, nan, nan]])
    # the index of an all-NaN slice depends on PyTorch's selection algorithm: only its value is compared
    fn = lambda t: (*torch.median(t, 1), torch.nanmedian(t, 1).values, *torch.nanmedian(t[[0, 2]], 1),  # noqa: E731
                    torch.nanmedian(t), torch.nanmedian(t[1]))
    check_export(Fn(fn), (x,))
