"""Convolutions (onnxport/translate/ops/conv.py) against eager PyTorch at several sizes."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from exportcheck import check_export, count_ops
from onnxport.translate.registry import override

aten = torch.ops.aten
HIGH_LEVEL = [aten.conv1d.default, aten.conv2d.default, aten.conv3d.default, aten.conv1d.padding,
              aten.conv2d.padding, aten.conv3d.padding, aten.conv_transpose1d.default,
              aten.conv_transpose2d.input, aten.conv_transpose3d.input]


def _core_only():
    """Drop the high-level translations so the program decomposes to aten.convolution."""
    return override({op: None for op in HIGH_LEVEL})


def _targets(result):
    return {n.target for n in result.program.graph.nodes if n.op == "call_function"}


class Conv(torch.nn.Module):
    def __init__(self, dims, cin, cout, k, bias=True, **kw):
        super().__init__()
        cls = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[dims]
        self.conv = cls(cin, cout, k, bias=bias, **kw)

    def forward(self, x):
        return self.conv(x)


def _dyn(dims, spatial_min):
    axes = {0: Dim("batch", min=1, max=64)}
    for i in range(dims):
        axes[2 + i] = Dim(f"s{i}", min=spatial_min, max=256)
    return {"x": axes}


CASES = [
    # dims, cin, cout, kernel, kwargs
    (1, 3, 4, 3, dict()),
    (1, 3, 4, 4, dict(padding="same")),
    (1, 3, 4, 4, dict(padding="same", dilation=3)),
    (1, 3, 4, 5, dict(padding="same", dilation=2)),
    (1, 4, 4, 3, dict(padding="valid", stride=2, groups=2)),
    (1, 4, 8, 3, dict(padding=2, stride=3, dilation=2, groups=4, bias=False)),
    (2, 3, 4, 3, dict(padding=1)),
    (2, 3, 4, (2, 4), dict(padding="same", dilation=(3, 2))),
    (2, 4, 4, 3, dict(padding=(1, 0), stride=(2, 1), groups=4)),  # depthwise
    (2, 2, 6, 1, dict(bias=False)),
    (3, 2, 3, 3, dict(padding=1, stride=2)),
    (3, 2, 4, 2, dict(padding="same", groups=2)),
]


# the decomposed (aten.convolution) path on a subset: decomposition is slow
CORE = [(case, False) for case in CASES] + [(CASES[i], True) for i in (2, 5, 8, 11)]


@pytest.mark.slow
@pytest.mark.parametrize("case,core", CORE, ids=[f"{c[0]}d-k{c[3]}-{c[4]}-{'core' if k else 'conv'}" for c, k in CORE])
def test_conv(case, core):
    dims, cin, cout, k, kw = case
    model = Conv(dims, cin, cout, k, **kw)
    size = {1: 11, 2: 7, 3: 5}[dims]
    x = torch.randn(2, cin, *([size] * dims))
    if core:
        with _core_only():
            r = check_export(model, (x,), _dyn(dims, 6 if dims < 3 else 4))
    else:
        r = check_export(model, (x,), _dyn(dims, 6 if dims < 3 else 4))
    assert count_ops(r, "Conv") == 1
    assert _targets(r) & {aten.convolution.default} if core else _targets(r) & set(HIGH_LEVEL)
    assert all(n.attributes.get("auto_pad") is None or n.attributes["auto_pad"].value == "NOTSET"
               for n in r.model.graph if n.op_type == "Conv")


def test_conv_functional_and_unbatched():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 3, 4))
            self.w32 = torch.nn.Parameter(torch.randn(4, 3, 4))

        def forward(self, x, y):
            return F.conv1d(x, self.w, padding="same"), F.conv1d(y, self.w32, stride=2)

    x = torch.randn(2, 3, 9)
    y = torch.randn(3, 12)  # no batch axis
    check_export(M(), (x, y), {"x": {0: "batch", 2: "time"}, "y": {1: Dim("len", min=6)}})


TCASES = [
    (1, 4, 3, 3, dict(stride=2, output_padding=1)),
    (1, 4, 6, 4, dict(stride=2, padding=1, groups=2, bias=False)),
    (1, 2, 2, 3, dict(stride=3, dilation=2, output_padding=2, padding=2)),
    (2, 4, 2, 2, dict(stride=2)),
    (2, 4, 4, 3, dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=4, dilation=(1, 2))),
    (3, 2, 2, 2, dict(stride=2)),
    # output_padding at or above the stride (PyTorch allows it below the dilation)
    (2, 2, 4, 4, dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4))),
    (1, 2, 3, 3, dict(stride=2, dilation=4, output_padding=3)),
]


TCORE = [(case, False) for case in TCASES] + [(TCASES[i], True) for i in (2, 4)]


@pytest.mark.slow
@pytest.mark.parametrize("case,core", TCORE,
                         ids=[f"{c[0]}d-k{c[3]}-{c[4]}-{'core' if k else 'conv'}" for c, k in TCORE])
def test_conv_transpose(case, core):
    dims, cin, cout, k, kw = case
    cls = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}[dims]

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = cls(cin, cout, k, **kw)

        def forward(self, x):
            return self.conv(x)

    x = torch.randn(2, cin, *([5] * dims))
    if core:
        with _core_only():
            r = check_export(M(), (x,), _dyn(dims, 2))
    else:
        r = check_export(M(), (x,), _dyn(dims, 2))
    assert count_ops(r, "ConvTranspose") == 1
    assert _targets(r) & {aten.convolution.default} if core else _targets(r) & set(HIGH_LEVEL)


def test_conv_parameters_must_be_static():
    from onnxport.translate.ops.conv import expand_param
    from onnxport.errors import TranslationError

    assert expand_param(2, 3, "stride") == [2, 2, 2]
    assert expand_param([1], 2, "padding") == [1, 1]
    with pytest.raises(TranslationError, match="padding"):
        expand_param([1, 2, 3], 2, "padding")


def test_private_convolution_overload():
    """aten._convolution (convolution plus backend flags) translates like aten.convolution."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 2, 3))
            self.b = torch.nn.Parameter(torch.randn(4))

        def forward(self, x):
            return torch.ops.aten._convolution.default(x, self.w, self.b, [2], [1], [1], False, [0], 1,
                                                       False, False, True, True)

    r = check_export(M(), (torch.randn(2, 2, 9),), _dyn(1, 3))
    assert aten._convolution.default in _targets(r)


def test_static_shapes():
    """Fully static inputs: the declared output shapes agree with ONNX shape inference."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ct = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1, dilation=2)
            self.c = torch.nn.Conv1d(3, 4, 4, padding="same", dilation=3)

        def forward(self, x, y):
            return self.ct(x), self.c(y)

    r = check_export(M(), (torch.randn(2, 3, 5, 7), torch.randn(2, 3, 9)))
    assert [list(v.shape) for v in r.model.graph.outputs] == [[2, 2, 12, 16], [2, 4, 9]]


@pytest.mark.parametrize("padding_mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(padding_mode):
    """nn.Conv2d's padding_mode: a Pad of that mode (circular: slices concatenated), then a
    convolution without padding."""
    model = Conv(2, 3, 4, 3, padding=(1, 2), padding_mode=padding_mode)
    r = check_export(model, (torch.randn(2, 3, 7, 8),), _dyn(2, 6))
    assert count_ops(r, "Pad") == (0 if padding_mode == "circular" else 1) and count_ops(r, "Conv") == 1


@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "conv_transpose"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_unbatched_with_bias(n, transposed):
    conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1] if transposed else \
        (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    w = torch.randn(3, 2, *[2] * n) if transposed else torch.randn(2, 3, *[2] * n)
    bias = torch.randn(2)

    class M(torch.nn.Module):
        def forward(self, x):
            return conv(x, w, bias, stride=2) if transposed else conv(x, w, bias, padding=1)

    size = Dim("size", min=2, max=64)
    check_export(M(), (torch.randn(3, *[5] * n),), {"x": {n: size}})


def test_integer_convolution_is_refused():
    import onnxport

    class M(torch.nn.Module):
        def forward(self, x, w):
            return F.conv1d(x, w)

    with pytest.raises(onnxport.UnsupportedOpError, match="floating-point"):
        onnxport.to_onnx(M(), (torch.randint(0, 5, (1, 2, 6)), torch.randint(0, 5, (3, 2, 2))))
