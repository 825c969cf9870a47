"""SymInt arithmetic, math on sizes and sizes read from data (item())."""

import math

import pytest
import torch

from exportcheck import check_export


class SizeArith(torch.nn.Module):
    def forward(self, x):
        n, t = x.shape[0], x.shape[1]
        y = x.reshape(n * t)  # product of symbols
        z = y[: (n * t) // 2 + t % 3]  # floordiv and mod of symbols
        return z * 2, torch.full((max(n, t) - 1,), 1.0)


def test_symint_arithmetic():
    check_export(SizeArith(), (torch.randn(4, 5),), {"x": {0: "n", 1: "t"}},
                 expect_inputs={"x": ["n", "t"]})


class MathOnSize(torch.nn.Module):
    def forward(self, x):
        return x.sum(1) / math.sqrt(x.size(1))


def test_math_sqrt_of_a_size_stays_dynamic():
    r = check_export(MathOnSize(), (torch.randn(2, 9, 4),), {"x": {0: "batch", 1: "time"}},
                     expect_inputs={"x": ["batch", "time", 4]})
    assert any(n.op_type == "Sqrt" for n in r.model.graph)


class SliceByData(torch.nn.Module):
    def forward(self, x, lengths):
        return x[:, : lengths.max()], torch.full((x.shape[0], lengths.max()), True)


def test_sizes_from_data_stay_dynamic():
    x = torch.randn(3, 10, 2)
    lengths = torch.tensor([4, 7, 2])
    r = check_export(SliceByData(), (x, lengths), {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}},
                     inputs=[(torch.randn(2, 6, 2), torch.tensor([6, 1])),
                             (torch.randn(4, 5, 2), torch.tensor([1, 1, 2, 1]))])
    out = r.model.graph.outputs[0]
    assert str(out.shape[0]) == "batch" and not isinstance(out.shape[1], int)


def test_tensor_split_at_indices_given_as_a_tensor():
    # torch.tensor_split asserts on the storage offsets of its slices (sym_storage_offset)
    class M(torch.nn.Module):
        def forward(self, x, idx):
            return torch.tensor_split(x, idx, dim=1)

    import onnxport
    result = onnxport.to_onnx(M(), (torch.randn(3, 8, 2), torch.tensor([2, 5])))
    for idx in ([2, 5], [1, 7], [0, 3]):
        x = torch.randn(3, 8, 2)
        report = result.validate(inputs=[(x, torch.tensor(idx))], sizes=[])
        assert report.ok, report


class ChooseAndTruncate(torch.nn.Module):
    """``torch.sym_ite`` of two sizes, and ``torch.sym_int`` of a size ratio that is negative at some
    sizes (Python's ``int`` rounds toward zero there, not down)."""

    def forward(self, x):
        n, t = x.shape
        larger = torch.sym_ite(n > t, n, t)
        ratio = torch.sym_int((n - 2 * t) / 3)
        return torch.arange(larger) + ratio


def test_sym_ite_and_sym_int_toward_zero():
    check_export(ChooseAndTruncate(), (torch.randn(5, 4),), {"x": {0: "n", 1: "t"}},
                 sizes=[{"n": 3, "t": 4}, {"n": 7, "t": 2}, {"n": 2, "t": 9}])


class PooledAboveSixteen(torch.nn.Module):
    """A size branch whose sides differ in length (``ceil(time / 2)`` above 16, ``time`` below): the
    rewritten ``torch.cond`` gives an output of a size known when it runs, summed by ``sym_sum``."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        if x.shape[1] > 16:
            x = torch.nn.functional.avg_pool1d(x.transpose(1, 2), 2, ceil_mode=True).transpose(1, 2)
        return self.proj(x)


@pytest.mark.slow
def test_sym_sum_of_a_branch_whose_sides_differ_in_length():
    result = check_export(PooledAboveSixteen(), (torch.randn(2, 10, 8),), {"x": {0: "batch", 1: "time"}},
                          sizes=[{"batch": 3, "time": 16}, {"batch": 2, "time": 17}, {"batch": 1, "time": 30}])
    assert any(n.op_type == "If" for n in result.model.graph)


class BitsOfSizes(torch.nn.Module):
    """Python's ``&`` and ``|`` of sizes (int64 bitwise, ONNX BitwiseAnd / BitwiseOr), and of size
    comparisons (bools, ONNX And / Or)."""

    def forward(self, x):
        w = x.shape[1]
        scale = (w & 6) | 1
        both = (w > 3) & (w < 9)
        either = (w < 2) | (w > 11)
        return x * scale, x.new_ones(1) * both, x.new_ones(1) * either


@pytest.mark.parametrize("width", [5, 12])
def test_bitwise_and_or_of_sizes(width):
    check_export(BitsOfSizes(), (torch.randn(2, width),), {"x": {1: "w"}},
                 sizes=[{"w": w} for w in (1, 2, 3, 4, 6, 7, 8, 9, 10, 13)])
