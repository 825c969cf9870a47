"""View and layout ops: view/reshape/flatten/unflatten, permute/transpose/t, (un)squeeze, expand,
repeat, repeat_interleave, flip, roll, unfold."""

import pytest
import onnxport
import torch

from torch.export import Dim

from exportcheck import check_export, DTYPES, make_tensor as _make


class Views(torch.nn.Module):
    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        return (
            x.view(b, -1),                        # view with SymInt and -1
            x.reshape(-1, 4),
            x.reshape(b * t, 4),
            x.view(b, t, 2, 2),
            x.flatten(1),                          # flatten.using_ints
            x.flatten(),
            x.flatten(0, 1),
            x.unflatten(2, (2, -1)),               # unflatten.int with -1
            x.permute(2, 0, 1),
            x.transpose(0, -1),
            x[0].t(),
            x.unsqueeze(-1).unsqueeze(0),
        )


class Squeezes(torch.nn.Module):
    def forward(self, x):  # x: [b, 1, t, 1]
        return x.squeeze(), x.squeeze(1), x.squeeze(0), x.squeeze((1, 3)), x.squeeze(-1)


class Expands(torch.nn.Module):
    def forward(self, x, y):  # x: [b, 1, 4], y: [b, t, 4]
        b, t = y.shape[0], y.shape[1]
        return x.expand(-1, t, -1), x.expand(2, b, t, 4), x.expand_as(y), x[:, :, :1].expand(b, t, 3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_views(dtype):
    check_export(Views(), (_make((3, 5, 4), dtype),), {"x": {0: "b", 1: "t"}})


@pytest.mark.parametrize("dtype", DTYPES)
def test_squeeze_all_overloads(dtype):
    # squeeze() and squeeze(0) drop a dynamic axis of size 1 (the output's rank depends on the
    # size): no ONNX model does that, so the dims are declared from 2 on
    b, t = Dim("b", min=2), Dim("t", min=2)
    check_export(Squeezes(), (_make((3, 1, 5, 1), dtype),), {"x": {0: b, 2: t}},
                 expect_outputs={"output_0": ["b", "t"], "output_1": ["b", "t", 1], "output_2": ["b", 1, "t", 1]})


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_expand(dtype):
    check_export(Expands(), (_make((3, 1, 4), dtype), _make((3, 5, 4), dtype)), {"x": {0: "b"}, "y": {0: "b", 1: "t"}})


class Repeats(torch.nn.Module):
    def forward(self, x, r):
        return (
            x.repeat(2, 1, 3),
            x.repeat(2, 1, 1, 1),                        # extra leading repeat
            x.repeat(1, x.shape[0], 1),                  # SymInt repeat
            x.repeat_interleave(3, dim=1),
            x.repeat_interleave(2),                      # flattened
            torch.repeat_interleave(x, r, dim=2),        # tensor repeats
            torch.repeat_interleave(x, r[:1], dim=0),    # one repeat count as a tensor
            x.repeat_interleave(x.shape[0], dim=1),      # SymInt repeats
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeat_and_repeat_interleave(dtype):
    check_export(Repeats(), (_make((3, 5, 4), dtype), torch.tensor([1, 0, 3, 2])), {"x": {0: "b", 1: "t"}, "r": None})


class RepeatIndex(torch.nn.Module):
    def forward(self, r):
        return torch.repeat_interleave(r)


def test_repeat_interleave_tensor_dynamic_length():
    check_export(RepeatIndex(), (torch.tensor([2, 0, 3, 1, 1]),), {"r": {0: "n"}})


class FlipRollUnfold(torch.nn.Module):
    def forward(self, x):
        return (
            x.flip(0), x.flip(-1, 1),
            torch.roll(x, 2, 1), torch.roll(x, (-1, 3), (0, 2)), torch.roll(x, 7),
            torch.roll(x, x.shape[0], 1),
            x.unfold(1, 2, 1), x.unfold(2, 2, 2), x.unfold(1, 3, 2),
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_roll_unfold(dtype):
    # unfold needs size >= window: torch.export guards t >= 3
    check_export(FlipRollUnfold(), (_make((3, 6, 4), dtype),), {"x": {0: Dim("b"), 1: Dim("t", min=3)}})


class Diagonals(torch.nn.Module):
    def forward(self, x):  # x: [b, r, c]
        return x.diagonal(0, 1, 2), x.diagonal(1, -1, -2), x.diagonal(-2, 1, 2), x[0].diagonal(), x.diagonal(0, 0, 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_diagonal(dtype):
    check_export(Diagonals(), (_make((3, 4, 6), dtype),), {"x": {0: "b", 1: "r", 2: "c"}})


class Strided(torch.nn.Module):
    def forward(self, x, y):  # x: [b, 6] contiguous, y: [n]
        n = y.shape[0]
        return (
            x.as_strided((2, 3), (1, 2)),
            x.as_strided((x.shape[0], 2, 3), (6, 3, 1)),
            x.as_strided((2, 2), (2, 1), 3),                   # storage_offset
            y.as_strided((n - 2, 3), (1, 1)),                  # sliding windows, symbolic size
            x[1:].as_strided((2, 2), (1, 1)),                  # contiguous view with an offset
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_as_strided(dtype):
    check_export(Strided(), (_make((3, 6), dtype), _make((7,), dtype)), {"x": {0: "b"}, "y": {0: Dim("n", min=3)}})


def test_as_strided_non_contiguous_raises():
    class M(torch.nn.Module):
        def forward(self, x):
            return x.t().as_strided((2, 2), (1, 2))

    with pytest.raises(onnxport.errors.TranslationError, match="non-contiguous"):
        onnxport.to_onnx(M(), (torch.randn(3, 4),))


class ZeroSizes(torch.nn.Module):
    def forward(self, x, m):  # x: [b, 4], m: [b] bool (may select nothing)
        sel = x[m]                                              # [u, 4], u may be 0
        return (x[:, :0].reshape(x.shape[0], 0, 2), sel.view(sel.shape[0], 2, 2),
                sel.reshape(-1, 2).unflatten(0, (-1, 2)), x.new_zeros(0, 3).view(3, 0))


def test_zero_sizes():
    check_export(ZeroSizes(), (torch.randn(3, 4), torch.tensor([True, False, True])), {"x": {0: "b"}, "m": {0: "b"}},
                 inputs=[(torch.randn(5, 4), torch.zeros(5, dtype=torch.bool))])


class DiagonalWrites(torch.nn.Module):
    def forward(self, x, s):  # x: [b, r, c], s: [b, min(r, c)]
        y = x.clone()
        y.diagonal(0, 1, 2).zero_()                              # functionalized to diagonal_scatter
        z = x[0].clone().fill_diagonal_(2)                       # functionalized to as_strided_scatter
        return (y, z, torch.diagonal_scatter(x, s, 0, 1, 2), torch.diagonal_scatter(x, s[:, :3] * 2, 1, -1, -2),
                torch.as_strided_scatter(x[0], s[0, :3], (3,), (2,), 1))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_diagonal_and_as_strided_scatter(dtype):
    check_export(DiagonalWrites(), (_make((2, 4, 4), dtype), _make((2, 4), dtype)), {"x": {0: "b"}, "s": {0: "b"}})


class MoveDims(torch.nn.Module):
    def forward(self, x):  # [b, t, 4, 3]
        return torch.movedim(x, 1, -1), torch.movedim(x, (0, 3), (2, 0)), x.movedim(2, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_movedim(dtype):
    r = check_export(MoveDims(), (_make((2, 5, 4, 3), dtype),), {"x": {0: "b", 1: "t"}})
    assert torch.ops.aten.movedim.int in {n.target for n in r.program.graph.nodes}  # translated, not decomposed
