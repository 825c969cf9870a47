"""cat (with promotion and empty inputs), stack, split.Tensor, split_with_sizes, chunk, unbind."""

import pytest
import torch
from torch.export import Dim

from exportcheck import check_export, DTYPES, make_tensor as _make


class CatStack(torch.nn.Module):
    def forward(self, x, y):  # x: [b, t, 4], y: [b, s, 4]
        empty = x.new_zeros(0)
        return (
            torch.cat([x, y], 1),
            torch.cat([x, y, x], dim=-2),
            torch.cat([x, empty], 1),                  # legacy 1-D empty input is skipped
            torch.cat([x, x[:, :0]], 1),               # same-rank empty input
            torch.cat([x], 0),
            torch.stack([x, x], 0),
            torch.stack([x, x, x], -1),
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_stack(dtype):
    check_export(CatStack(), (_make((2, 3, 4), dtype), _make((2, 5, 4), dtype)),
                 {"x": {0: "b", 1: "t"}, "y": {0: "b", 1: "s"}},
                 expect_outputs={"output_0": ["b", "s + t", 4]})


class CatPromote(torch.nn.Module):
    def forward(self, x, i):
        return torch.cat([x, i], 1), torch.stack([i, x])


def test_cat_stack_promote_dtypes():
    check_export(CatPromote(), (torch.randn(3, 4), torch.randint(0, 9, (3, 4))), {"x": {0: "b"}, "i": {0: "b"}})


class Splits(torch.nn.Module):
    def forward(self, x):  # x: [b, t, 10]
        a = x.split(3, dim=2)                          # 3, 3, 3, 1
        b = x.split([2, 5, 3], dim=-1)                 # split_with_sizes
        c = x.chunk(4, dim=2)                          # 3, 3, 3, 1
        d = x.chunk(5, dim=-1)
        e = x[:, :, :3].unbind(2)
        f = x.split(4, 2)
        return (*a, *b, *c, *d, *e, *f)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_split_chunk_unbind(dtype):
    check_export(Splits(), (_make((4, 6, 10), dtype),), {"x": {0: "b", 1: "t"}})


class SplitDynamic(torch.nn.Module):
    def forward(self, x):  # split sizes that depend on a dynamic size
        n = x.shape[1]
        return x.split([2, n - 2], dim=1)


def test_split_with_symbolic_sizes():
    check_export(SplitDynamic(), (torch.randn(3, 7),), {"x": {1: Dim("t", min=5)}})


def test_opset18():
    check_export(Splits(), (torch.randn(4, 6, 10),), {"x": {0: "b", 1: "t"}}, opset=18)
    check_export(CatStack(), (torch.randn(2, 3, 4), torch.randn(2, 5, 4)),
                 {"x": {0: "b", 1: "t"}, "y": {0: "b", 1: "s"}}, opset=18)


class SplitHalves(torch.nn.Module):
    def forward(self, x):  # x: [4, 2*s]: piece counts are static, piece sizes symbolic
        return (*x.split(x.shape[1] // 2, 1), *x.chunk(2, 1), *x.split(2, 0))


def test_split_chunk_symbolic_piece_size():
    s = Dim("s", min=2, max=32)
    check_export(SplitHalves(), (torch.randn(4, 6),), {"x": {1: 2 * s}})
