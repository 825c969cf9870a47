"""Interpolation (onnxport/translate/ops/resize.py) against eager PyTorch at several sizes."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from exportcheck import check_export, count_ops

aten = torch.ops.aten


class Interp(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw)


def _dyn(dims):
    axes = {0: "batch"}
    for i in range(dims):
        axes[2 + i] = Dim(f"s{i}", min=2, max=128)
    return {"x": axes}


def _coords(result):
    return [n.attributes["coordinate_transformation_mode"].value for n in result.model.graph if n.op_type == "Resize"]


CASES = [
    (1, dict(scale_factor=2, mode="nearest"), "asymmetric"),
    (1, dict(scale_factor=3, mode="nearest-exact"), "half_pixel"),
    (1, dict(scale_factor=2, mode="linear", align_corners=False), "half_pixel"),
    (1, dict(scale_factor=2, mode="linear", align_corners=True), "align_corners"),
    (2, dict(scale_factor=2, mode="nearest"), "asymmetric"),
    (2, dict(scale_factor=(2, 3), mode="nearest"), "asymmetric"),
    (2, dict(scale_factor=2, mode="bilinear", align_corners=False), "half_pixel"),
    (2, dict(scale_factor=2, mode="bilinear", align_corners=True), "align_corners"),
    (2, dict(scale_factor=(3, 2), mode="bicubic", align_corners=False), "half_pixel"),
    (2, dict(scale_factor=2, mode="bicubic", align_corners=True), "align_corners"),
    (2, dict(scale_factor=2, mode="nearest-exact"), "half_pixel"),
    (3, dict(scale_factor=2, mode="nearest"), "asymmetric"),
    (3, dict(scale_factor=2, mode="trilinear", align_corners=False), "half_pixel"),
]


@pytest.mark.slow
@pytest.mark.parametrize("dims,kw,coord", CASES, ids=[f"{c[0]}d-{c[1]}" for c in CASES])
def test_interpolate_scale_factor(dims, kw, coord):
    x = torch.randn(2, 3, *([5] * dims))
    r = check_export(Interp(**kw), (x,), _dyn(dims))
    assert _coords(r) == [coord]


DEFAULT_CASES = [
    ("upsample_nearest1d", False, (2.0,)),
    ("upsample_nearest2d", False, (2.0, 3.0)),
    ("upsample_nearest2d", False, (None, None)),
    ("_upsample_nearest_exact2d", False, (2.0, 2.0)),
    ("upsample_linear1d", True, (None,)),
    ("upsample_bilinear2d", False, (2.0, 3.0)),
    ("upsample_bilinear2d", True, (None, None)),
    ("upsample_bicubic2d", False, (2.0, 2.0)),
    ("upsample_trilinear3d", False, (2.0, 2.0, 2.0)),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,align,scales", DEFAULT_CASES, ids=[str(c) for c in DEFAULT_CASES])
def test_upsample_default_overloads(name, align, scales):
    """The ``.default`` overloads: output size (SymInts here) plus optional per-axis scales."""
    op = getattr(aten, name).default
    dims = len(scales)
    factors = [int(s) if s else 2 for s in scales]

    class M(torch.nn.Module):
        def forward(self, x):
            size = [x.shape[2 + i] * factors[i] for i in range(dims)]
            if "nearest" in name:
                return op(x, size, *scales)
            return op(x, size, align, *scales)

    r = check_export(M(), (torch.randn(2, 3, *([4] * dims)),), _dyn(dims))
    # nearest to a size too: a whole multiple of the input's, PyTorch's in / out scale is float32(1 / k)
    assert count_ops(r, "Resize") == 1


SIZE_CASES = [
    (1, dict(size=11, mode="nearest")),
    (1, dict(size=4, mode="linear")),
    (2, dict(size=(7, 3), mode="nearest")),
    (2, dict(size=(9, 12), mode="bilinear", align_corners=False)),
    (2, dict(size=(9, 4), mode="bilinear", align_corners=True)),
    (2, dict(scale_factor=0.5, mode="bilinear")),
    (2, dict(scale_factor=1.5, mode="nearest", recompute_scale_factor=True)),
]


@pytest.mark.parametrize("dims,kw", SIZE_CASES, ids=[f"{c[0]}d-{c[1]}" for c in SIZE_CASES])
def test_interpolate_size_and_downsampling(dims, kw):
    x = torch.randn(2, 3, *([6] * dims))
    dyn = {"x": {0: "batch"}} if "size" in kw or kw.get("recompute_scale_factor") else _dyn(dims)
    r = check_export(Interp(**kw), (x,), dyn)
    if kw["mode"] == "nearest":  # sizes and fractional factors: PyTorch's index arithmetic + Gather
        assert count_ops(r, "Gather") == dims and count_ops(r, "Resize") == 0
    else:
        assert count_ops(r, "Resize") == 1


def test_interpolate_to_the_size_of_another_tensor():
    """The output size is a SymInt (the skip connection's size in a U-Net)."""

    class M(torch.nn.Module):
        def forward(self, x, skip):
            return F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False) + skip

    h, w = Dim("h", min=2, max=64), Dim("w", min=2, max=64)
    check_export(M(), (torch.randn(2, 3, 4, 5), torch.randn(2, 3, 9, 7)),
                 {"x": {0: "batch", 2: h, 3: w},
                  "skip": {0: "batch", 2: Dim("H", min=2, max=64), 3: Dim("W", min=2, max=64)}})


@pytest.mark.parametrize("dtype", [torch.uint8])
def test_nearest_other_dtypes(dtype):
    """Nearest copies values: uint8 images stay exact (PyTorch has no int64 nearest kernel)."""
    x = torch.randint(0, 200, (2, 3, 4, 5)).to(dtype)
    check_export(Interp(scale_factor=2, mode="nearest"), (x,), _dyn(2))


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_fractional_scale_factor(mode, dynamic):
    """Output size floor(in * 1.5): Resize's scales give the same count as PyTorch."""
    x = torch.randn(2, 3, 5, 7)
    r = check_export(Interp(scale_factor=1.5, mode=mode), (x,), _dyn(2) if dynamic else None)
    shape = list(r.model.graph.outputs[0].shape)
    if dynamic:
        assert not isinstance(shape[2], int) and not isinstance(shape[3], int)
    else:
        assert shape == [2, 3, 7, 10]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_to_symbolic_size_picks_pytorch_indices(mode):
    """in=2 -> out=82: PyTorch's float32 floor(41 * (2 / 82)) is 0 where dst / (82 / 2) gives 1."""

    class M(torch.nn.Module):
        def forward(self, x, like):
            return F.interpolate(x, size=like.shape[-1], mode=mode)

    x = torch.arange(6.0).reshape(1, 3, 2)
    dyn = {"x": {0: "batch", 2: Dim("n", min=1, max=64)}, "like": {0: Dim("m", min=1, max=256)}}
    pairs = [(2, 82), (2, 94), (3, 7), (5, 121), (7, 3)]
    r = check_export(M(), (x, torch.zeros(82)), dyn,
                     inputs=[(torch.randn(2, 3, n), torch.zeros(m)) for n, m in pairs])
    assert count_ops(r, "Resize") == 0


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", [dict(size=(5, 7)), dict(size=(13, 3)), dict(scale_factor=0.5)],
                         ids=["down", "mixed", "scale"])
def test_antialias(mode, kw):
    # onnxruntime's antialiased Resize differs from PyTorch where an axis shrinks to size 1:
    # the sizes declared keep every output axis at 2 or more
    dyn = {"x": {0: "batch", 2: Dim("h", min=4, max=128), 3: Dim("w", min=4, max=128)}}
    result = check_export(Interp(mode=mode, antialias=True, **kw), (torch.randn(2, 3, 16, 14),), dyn)
    assert count_ops(result, "Resize") == 1


def test_antialias_with_align_corners_is_refused():
    import onnxport

    with pytest.raises(onnxport.UnsupportedOpError, match="align_corners"):
        onnxport.to_onnx(Interp(size=(4, 4), mode="bilinear", antialias=True, align_corners=True),
                         (torch.randn(1, 2, 9, 9),))


class _ToWholeMultiples(torch.nn.Module):
    """Interpolation to sizes given as whole multiples of the input's (a decoder resizing to its skip)."""

    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        size = (2 * x.shape[2], 3 * x.shape[3])
        return torch.nn.functional.interpolate(x, size=size, mode=self.mode)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "nearest-exact"])
def test_a_size_a_whole_multiple_of_the_input_is_resized_by_constant_scales(mode):
    # PyTorch's in / out scale is float32(1 / k) there, as for scale_factor=k: one Resize, no index
    # computed and gathered, no size computed at run time
    x = torch.randn(2, 3, 5, 7)
    result = check_export(_ToWholeMultiples(mode), (x,), {"x": {0: "batch", 2: "h", 3: "w"}},
                          sizes=[{"batch": 1, "h": 1, "w": 2}, {"batch": 3, "h": 17, "w": 11}])
    assert count_ops(result, "Resize") == 1
    assert sum(count_ops(result, op) for op in ("Gather", "Shape", "Concat", "Range")) == 0


@pytest.mark.parametrize("factor", [3, 5, 7])
def test_nearest_odd_whole_factors_are_resize_with_pytorch_s_indices(factor):
    """A constant whole scale factor ``k`` is Resize's ``dst / k`` where it picks PyTorch's
    ``floor(dst * float32(1 / k))`` (float32(1 / k) not below 1 / k: 3, 5, 7), checked at two other
    sizes of dynamic heights and widths."""
    x = torch.randn(1, 2, 4, 6)
    r = check_export(Interp(scale_factor=factor, mode="nearest"), (x,), _dyn(2),
                     sizes=[{"batch": 2, "s0": 5, "s1": 9}, {"batch": 1, "s0": 17, "s1": 31}], values=[])
    assert count_ops(r, "Resize") == 1 and count_ops(r, "Gather") == 0
    assert _coords(r) == ["asymmetric"]
