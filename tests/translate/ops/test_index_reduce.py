"""index_reduce (tests ops/indexing.py)."""

import pytest
import torch

from exportcheck import check_export, Fn2


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    x = torch.tensor([[-3.0, 0.0, 2.0, 1e6], [5.0, -1.0, 0.5, -7.0], [0.0, 4.0, -2.0, 9.0]]) * 3
    src = torch.tensor([[1.0, -2.0, 3.0], [0.0, 6.0, -1e5], [8.0, -9.0, 2.0]]) * 3
    index = torch.tensor([3, 0, 3])  # repeated, and columns 1, 2 untouched
    fn = lambda a, s: (a.index_reduce(1, index, s, reduce, include_self=include_self),  # noqa: E731
                       a.index_reduce(0, index[:2] % 2, a[:2] * -2 + 1, reduce, include_self=include_self))
    check_export(Fn2(fn), (x.to(dtype), src.to(dtype)), {"a": {0: "rows"}, "b": {0: "rows"}}, rtol=1e-5, atol=1e-5)
