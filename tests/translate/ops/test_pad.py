"""Padding (onnxport/translate/ops/pad.py) against eager PyTorch at several sizes."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from exportcheck import check_export, count_ops, Fn
from onnxport.translate.registry import override

aten = torch.ops.aten


class Pad(torch.nn.Module):
    def __init__(self, pad, mode="constant", value=None):
        super().__init__()
        self.pad, self.mode, self.value = pad, mode, value

    def forward(self, x):
        if self.mode == "constant":
            return F.pad(x, self.pad, value=self.value if self.value is not None else 0.0)
        return F.pad(x, self.pad, mode=self.mode)


def _dyn(rank, spatial, lo=4):
    axes = {0: Dim("batch", min=1, max=64)}
    for i in range(spatial):
        axes[rank - 1 - i] = Dim(f"s{i}", min=lo, max=256)
    return {"x": axes}


MODE_CASES = [
    ("reflect", (2, 1)),
    ("reflect", (1, 2, 0, 3)),
    ("reflect", (1, 1, 2, 2, 1, 0)),
    ("replicate", (3, 0)),
    ("replicate", (1, 2, 3, 1)),
    ("replicate", (2, 1, 0, 1, 1, 1)),
    ("circular", (2, 1)),
    ("circular", (1, 3, 2, 0)),
    ("circular", (1, 1, 1, 2, 0, 1)),
]


@pytest.mark.slow
@pytest.mark.parametrize("opset", [18, 20])
@pytest.mark.parametrize("mode,pad", MODE_CASES, ids=[f"{m}-{p}" for m, p in MODE_CASES])
def test_pad_modes(mode, pad, opset):
    spatial = len(pad) // 2
    x = torch.randn(2, 3, *([5] * spatial))
    check_export(Pad(pad, mode), (x,), _dyn(2 + spatial, spatial), opset=opset)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("pad,value", [((1, 2), 0.0), ((0, 0, 2, 1), 1.0), ((1, -1, -2, 3), 1.0),
                                       ((1, 1, 1, 1, 1, 1), 0.0)])
def test_constant_pad(dtype, pad, value):
    x = torch.randn(2, 3, 6, 5)
    x = x.to(dtype) if dtype != torch.bool else x > 0
    value = value if dtype == torch.float32 else (int(value) if dtype == torch.int64 else bool(value))

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.constant_pad_nd(x, pad, value)

    check_export(M(), (x,), {"x": {0: "batch", 2: Dim("h", min=4), 3: Dim("w", min=4)}})


def test_pad_with_symbolic_amounts():
    class M(torch.nn.Module):
        def forward(self, x, y):
            # pad x's last axis to y's length: the amount is a SymInt
            return F.pad(x, (0, y.shape[-1] - x.shape[-1]), value=-1.0), F.pad(y, (1, 1), mode="reflect")

    x = torch.randn(2, 4)
    y = torch.randn(2, 9)
    t = Dim("t", min=4, max=32)
    check_export(M(), (x, y), {"x": {0: "batch", 1: t}, "y": {0: "batch", 1: t + 5}})


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_core_aten(mode):
    """With aten.pad decomposed, the core forms (reflection_pad2d, replication_pad2d, ...) translate."""
    x = torch.randn(2, 3, 6, 5)
    with override({aten.pad.default: None}):
        r = check_export(Pad((1, 2, 2, 1), mode), (x,), _dyn(4, 2))
    targets = {n.target for n in r.program.graph.nodes if n.op == "call_function"}
    assert aten.pad.default not in targets
    assert targets & {aten.reflection_pad2d.default, aten.replication_pad2d.default}
    assert count_ops(r, "Pad") == 1


# PyTorch has no bool reflection/replication padding kernels
DTYPE_CASES = [(m, torch.int64) for m in ("reflect", "replicate", "circular")] + [("circular", torch.bool)]


@pytest.mark.parametrize("mode,dtype", DTYPE_CASES, ids=[f"{m}-{d}" for m, d in DTYPE_CASES])
def test_pad_modes_other_dtypes(mode, dtype):
    x = torch.randn(2, 3, 6, 5) * 10
    x = x.to(dtype) if dtype != torch.bool else x > 0
    check_export(Pad((1, 2, 2, 1), mode), (x,), _dyn(4, 2))


def test_circular_padding_of_an_empty_batch():
    # onnxruntime's Pad in "wrap" mode fails on a tensor with an empty axis
    fn = lambda t: torch.nn.functional.pad(t, (1, 2), mode="circular")  # noqa: E731
    check_export(Fn(fn), (torch.randn(0, 3, 4),), sizes=[])


@pytest.mark.parametrize("mode", ["replicate", "reflect", "circular"])
def test_negative_amounts_crop(mode):
    fn = lambda t: torch.nn.functional.pad(t, (-2, 3, 1, -1), mode=mode)  # noqa: E731
    check_export(Fn(fn), (torch.randn(2, 3, 6, 7),), {"x": {0: "batch"}})


def test_replicate_padding_that_crops_a_whole_axis_repeats_its_last_element():
    fn = lambda t: torch.nn.functional.pad(t, (-4, 5, 2, -6), mode="replicate")  # noqa: E731
    check_export(Fn(fn), (torch.randn(2, 3, 6, 4),), {"x": {0: "batch"}})


class ConvBertSpan(torch.nn.Module):
    """ConvBERT's span convolution: a transposed activation unfolded with zero padding along time
    (a Pad behind a Transpose, which onnxruntime's transpose optimizer pushes through)."""

    def forward(self, x):  # x: [batch, time, channels]
        y = x.transpose(1, 2).unsqueeze(-1)
        y = F.unfold(y, kernel_size=[9, 1], padding=[4, 0])
        return y.transpose(1, 2).reshape(x.shape[0], -1, x.shape[2], 9)


def test_padding_behind_a_transpose_runs_in_onnxruntime_with_its_optimizations():
    check_export(ConvBertSpan(), (torch.randn(2, 7, 8),), {"x": {0: "batch", 1: "time"}},
                 sizes=[{"batch": 1, "time": 3}, {"batch": 3, "time": 12}])
