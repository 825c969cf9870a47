"""Pooling (onnxport/translate/ops/pool.py) against eager PyTorch at several sizes."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from exportcheck import check_export, count_ops, Fn
from onnxport.translate.registry import override

aten = torch.ops.aten


def _dyn(dims, lo=None, batch=True):
    """Dynamic batch and spatial axes: spatial axes Dim.AUTO, or from ``lo`` on when given."""
    axes = {0: Dim("batch", min=1, max=64)} if batch else {}
    first = 2 if batch else 1
    for i in range(dims):
        axes[first + i] = Dim.AUTO if lo is None else Dim(f"s{i}", min=lo)
    return {"x": axes}


def _assert_dynamic(result, axes):
    dims = result.model.graph.inputs[0].shape
    assert all(not isinstance(dims[a], int) for a in axes), f"input dims {dims} are not symbolic at {axes}"


def _input(dims, size, dtype=torch.float32):
    x = torch.randn(2, 3, *([size] * dims))
    return x if dtype == torch.float32 else (x * 10).to(dtype)


MAX_CASES = [
    (1, dict(kernel_size=2)),
    (1, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (1, dict(kernel_size=3, stride=2, dilation=2)),
    (2, dict(kernel_size=2)),
    (2, dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), ceil_mode=True)),
    (2, dict(kernel_size=3, stride=3, padding=1, dilation=2, ceil_mode=True)),
    (3, dict(kernel_size=2, stride=2, ceil_mode=True)),
]
FN = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


@pytest.mark.slow
@pytest.mark.parametrize("indices", [False, True], ids=["values", "indices"])
@pytest.mark.parametrize("dims,kw", MAX_CASES, ids=[f"{c[0]}d-{c[1]}" for c in MAX_CASES])
def test_max_pool(dims, kw, indices):
    if indices:
        model = Fn(lambda x: FN[dims](x, return_indices=True, **kw))
    else:
        model = Fn(lambda x: FN[dims](x, **kw))
    # a dilated ceil-mode window of a size-1 axis lies in the padding only: PyTorch gives -inf there
    # (ONNX MaxPool the lowest float) and indices past the input, so these compare from size 2 on
    lo = 2 if kw.get("dilation", 1) > 1 and kw.get("ceil_mode") else None
    r = check_export(model, (_input(dims, 9),), _dyn(dims, lo))
    assert count_ops(r, "MaxPool") == 1
    # torch.export (2.13) specializes the length of max_pool1d without indices: only the batch stays dynamic
    _assert_dynamic(r, [0] if (dims == 1 and not indices) else [0] + list(range(2, 2 + dims)))


def test_max_pool_uint8():
    x = torch.randint(0, 255, (2, 3, 8, 7), dtype=torch.uint8)
    check_export(Fn(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True)), (x,), _dyn(2))


def test_max_pool_unbatched_and_core_form():
    model = Fn(lambda x: F.max_pool2d(x, 2, return_indices=True))
    check_export(model, (torch.randn(3, 8, 6),), _dyn(2, batch=False))
    with override({aten.max_pool2d.default: None}):
        r = check_export(Fn(lambda x: F.max_pool2d(x, 3, 2, 1)), (_input(2, 8),), _dyn(2))
    assert aten.max_pool2d_with_indices.default in {n.target for n in r.program.graph.nodes}


AVG_CASES = [
    (1, dict(kernel_size=2)),
    (1, dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    (1, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (1, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    (2, dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0))),
    (2, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=True)),
    (2, dict(kernel_size=3, stride=2, padding=1, divisor_override=5)),
    (2, dict(kernel_size=2, divisor_override=3, count_include_pad=False)),
    (3, dict(kernel_size=2, stride=1, padding=1, count_include_pad=False)),
]
AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@pytest.mark.parametrize("dims,kw", AVG_CASES, ids=[f"{c[0]}d-{c[1]}" for c in AVG_CASES])
def test_avg_pool(dims, kw):
    r = check_export(Fn(lambda x: AVG[dims](x, **kw)), (_input(dims, 9),), _dyn(dims))
    assert count_ops(r, "AveragePool") == 1
    _assert_dynamic(r, [0] + list(range(2, 2 + dims)))


def test_avg_pool_divisor_override_with_ceil_mode():
    from onnxport.errors import TranslationError

    model = Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=2))
    for h, w in ((8, 8), (7, 6)):  # static sizes: the window counts are constants
        check_export(model, (torch.randn(2, 3, h, w),))
    with pytest.raises(TranslationError, match="divisor_override"):
        check_export(model, (_input(2, 8),), _dyn(2))


ADAPTIVE_CASES = [
    (1, 1, True, "Cast"),  # dynamic length: the mean accumulated in float64 (_accurate.py)
    (1, 3, True, "Slice"),  # dynamic length: PyTorch's window formula
    (1, 4, False, "AveragePool"),  # static 12 divisible by 4
    (1, 5, False, "Slice"),  # static 12 not divisible by 5
    (2, (1, 1), True, "ReduceMean"),  # dynamic height and width: a ReduceMean per axis (eager refuses an empty plane)
    (2, (1, 1), False, "ReduceMean"),  # static and short: one ReduceMean (closer to float64 than GlobalAveragePool)
    (2, (2, 3), True, "Slice"),
    (2, (3, None), True, "Slice"),
    (2, (4, 6), False, "AveragePool"),
    (3, 1, True, "ReduceMean"),
]
ADAPTIVE = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}


@pytest.mark.slow
@pytest.mark.parametrize("dims,out,dynamic,onnx_op", ADAPTIVE_CASES, ids=[str(c) for c in ADAPTIVE_CASES])
def test_adaptive_avg_pool(dims, out, dynamic, onnx_op):
    x = torch.randn(2, 3, *([12] * dims))
    dyn = _dyn(dims) if dynamic else {"x": {0: "batch"}}
    r = check_export(Fn(lambda x: ADAPTIVE[dims](x, out)), (x,), dyn)
    assert count_ops(r, onnx_op) >= 1


@pytest.mark.parametrize("shape", [(2, 3, 130, 130), (3, 20000)])
def test_global_average_over_a_long_static_plane_is_summed_in_levels(shape):
    pool = F.adaptive_avg_pool2d if len(shape) == 4 else F.adaptive_avg_pool1d  # (3, 20000): unbatched
    x = torch.randn(shape) * 1000 + 300
    r = check_export(Fn(lambda x: pool(x, 1)), (x,), {"x": {0: "batch"}})
    assert count_ops(r, "GlobalAveragePool") == 0 and count_ops(r, "ReduceSum") >= 2


def test_adaptive_avg_pool_unbatched():
    check_export(Fn(lambda x: F.adaptive_avg_pool2d(x, (2, 3))), (torch.randn(3, 9, 7),), _dyn(2, batch=False))


def test_adaptive_avg_pool_core_form():
    x = torch.randn(2, 3, 10, 7)
    with override({aten.adaptive_avg_pool2d.default: None}):
        r = check_export(Fn(lambda x: F.adaptive_avg_pool2d(x, (3, 2))), (x,), _dyn(2))
    assert aten._adaptive_avg_pool2d.default in {n.target for n in r.program.graph.nodes}


class CeilSweep(torch.nn.Module):
    """Many ceil-mode poolings of one input: kernel, stride, padding, dilation, count_include_pad."""

    CONFIGS = [(k, s, p, d) for k in (2, 3, 4) for s in (1, 2, 3) for p in range(k // 2 + 1) for d in (1, 2)]

    def forward(self, x):
        outs = []
        for k, s, p, d in self.CONFIGS:
            if d * (k - 1) + 1 > x.shape[-1] + 2 * p:
                continue
            outs.append(F.max_pool1d(x, k, s, p, d, ceil_mode=True, return_indices=True)[1])
            x2 = torch.stack([x, -x], dim=1)  # [N, 2, L]: a 2-D plane, so indices span both axes
            outs.extend(F.max_pool2d(x2, (2, k), (1, s), (1, p), (1, d), ceil_mode=True, return_indices=True))
            if d == 1:
                outs.append(F.avg_pool1d(x, k, s, p, ceil_mode=True, count_include_pad=True))
                outs.append(F.avg_pool1d(x, k, s, p, ceil_mode=True, count_include_pad=False))
                outs.append(F.avg_pool2d(x2, (2, k), (1, s), (1, p), ceil_mode=True, divisor_override=3))
        return tuple(outs)


@pytest.mark.slow
@pytest.mark.parametrize("length", [5, 7])
def test_ceil_mode_static_sizes(length):
    """Static sizes: ceil mode is written with ceil_mode=0 and end pads (ONNX shape inference does
    not drop a last window starting in the padding, so the checker would reject ceil_mode=1)."""
    r = check_export(CeilSweep(), (torch.randn(2, length),))
    assert all(n.attributes["ceil_mode"].value == 0 for n in r.model.graph if n.op_type in ("MaxPool", "AveragePool"))


class CeilSweep2d(torch.nn.Module):
    """Ceil-mode poolings of [N, C, H, W] with windows along the (static) height."""

    def forward(self, x):
        outs = []
        for k, s, p, d in CeilSweep.CONFIGS:
            if d * (k - 1) + 1 > x.shape[2] + 2 * p:
                continue
            outs.extend(F.max_pool2d(x, (k, 2), (s, 1), (p, 1), (d, 1), ceil_mode=True, return_indices=True))
            if d == 1:
                outs.append(F.avg_pool2d(x, (k, 2), (s, 1), (p, 0), ceil_mode=True, count_include_pad=False))
        return tuple(outs)


@pytest.mark.slow
@pytest.mark.parametrize("height", [5])
def test_ceil_mode_partly_static_sizes(height):
    """Static height, dynamic batch and width: ceil_mode=1 stays, the height's end pads are cut so
    that ONNX shape inference agrees with PyTorch's count."""
    r = check_export(CeilSweep2d(), (torch.randn(2, 3, height, 6),), {"x": {0: "batch", 3: Dim.AUTO}})
    _assert_dynamic(r, [0, 3])


def test_max_pool1d_after_strided_conv_keeps_time_dynamic():
    """max_pool1d's traced kernel would pin the length; the range torch needs (time >= 7) is adopted
    for the plain-string dim, said in a warning and listed in the result's constraints."""
    import warnings

    model = torch.nn.Sequential(torch.nn.Conv1d(4, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.MaxPool1d(3, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(model, (torch.randn(2, 4, 41),), {"input": {0: "batch", 2: "time"}},
                         sizes=[{"batch": 1, "time": 7}, {"batch": 3, "time": 100}])
    assert [str(d) for d in r.model.graph.inputs[0].shape] == ["batch", "4", "time"]
    assert any("time >= 7" in str(w.message) for w in caught)
    assert [str(c) for c in r.constraints] == ["time >= 7"]


@pytest.mark.parametrize("n,size,out", [(1, (7,), 3), (2, (6, 7), (3, 2)), (2, (6, 8), (3, 4)),
                                        (3, (4, 5, 3), (2, 3, None))])
def test_adaptive_max_pool_values_and_indices(n, size, out):
    pool = (F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d)[n - 1]

    class M(torch.nn.Module):
        def forward(self, x):
            return (*pool(x, out, return_indices=True), pool(x[0], out))

    check_export(M(), (torch.randn(2, 3, *size),), {"x": {0: "batch", 1: "channels"}})


def test_integer_pooling_is_refused():
    import onnxport

    with pytest.raises(onnxport.UnsupportedOpError, match="floating-point"):
        onnxport.to_onnx(Fn(lambda t: F.avg_pool2d(t, 2)), (torch.randint(0, 5, (1, 2, 6, 6)),))


@pytest.mark.parametrize("n", [2, 3])  # PyTorch has no integer max_pool1d kernel
def test_integer_max_pooling(n):
    pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[n - 1]
    fn = lambda t: (pool(t, 2, ceil_mode=True), *pool(t, 3, 1, 1, return_indices=True))  # noqa: E731
    check_export(Fn(fn), (torch.randint(-1000, 1000, (2, 3, *[5] * n)),), {"x": {0: "batch", 1: "channels"}})
