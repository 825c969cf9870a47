"""Activations and softmax: exported modules against eager PyTorch (tests ops/activation.py)."""

import pytest
import torch
import torch.nn.functional as F

from exportcheck import check_export, count_ops, Fn

DYN = {"x": {0: "batch", 1: "n"}}


ACTIVATIONS = {
    "relu": torch.relu,
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softplus": F.softplus,
    "softplus_beta_threshold": lambda x: F.softplus(x, beta=2.0, threshold=1.5),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "elu": lambda x: F.elu(x, alpha=0.7),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.5),
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "relu6": F.relu6,
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 0.75),
    "mish": F.mish,
    "threshold": lambda x: F.threshold(x, 0.3, -2.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_float(name, dtype):
    # float64 takes the formula forms where onnxruntime has no double kernel
    x = torch.randn(3, 5, 4, dtype=dtype) * 3
    check_export(Fn(ACTIVATIONS[name]), (x,), DYN)


def test_activations_float16_grouped():
    x = torch.randn(3, 5, 4, dtype=torch.float16) * 3
    check_export(Fn(lambda t: [f(t) for f in ACTIVATIONS.values()] + [F.gelu(t), F.softmax(t, -1)]), (x,), DYN)


def test_relu_int64():
    x = torch.randint(-5, 6, (3, 4))
    check_export(Fn(torch.relu), (x,), DYN)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("opset", [18, 20])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate, opset, dtype):
    x = torch.randn(2, 5, 3, dtype=dtype) * 3
    r = check_export(Fn(lambda t: F.gelu(t, approximate=approximate)), (x,), DYN, opset=opset)
    if dtype == torch.float32:
        assert count_ops(r, "Gelu") == (1 if opset >= 20 else 0)


def test_glu_static_halved_axis():
    x = torch.randn(3, 5, 6)
    check_export(Fn(lambda t: F.glu(t, -1) + F.glu(t.transpose(1, 2), 1).transpose(1, 2)), (x,), DYN)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("channels", [1, 4])
def test_prelu(channels, dtype):
    m = torch.nn.PReLU(channels).to(dtype)
    with torch.no_grad():
        m.weight.copy_(torch.linspace(-0.5, 0.5, channels))
    x = torch.randn(2, 4, 5, dtype=dtype)
    check_export(m, (x,), ({0: "batch", 2: "n"},))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(dim):
    x = torch.randn(3, 4, 5) * 4
    mod = Fn(lambda t: (torch.softmax(t, dim), F.log_softmax(t, dim), t.softmax(dim, dtype=torch.float64)))
    check_export(mod, (x,), DYN)


def test_softmax_of_int_with_dtype():
    x = torch.randint(-3, 4, (3, 5))
    check_export(Fn(lambda t: torch.softmax(t, -1, dtype=torch.float32)), (x,), DYN)


def test_softmax_decomposed_forms():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten._softmax(x, 1, False), torch.ops.aten._log_softmax(x, 0, False)

    r = check_export(M(), (torch.randn(3, 4),), DYN)
    assert count_ops(r, "Softmax") == 1 and count_ops(r, "LogSoftmax") == 1


def test_safe_softmax_fully_masked_rows():
    class M(torch.nn.Module):
        def forward(self, x, m):
            return torch.ops.aten._safe_softmax(torch.where(m, float("-inf"), x), -1)

    x = torch.randn(3, 4)
    m = torch.zeros(3, 4, dtype=torch.bool)
    m[1] = True
    m[0, 2] = True
    # the example has a fully masked row; the generated inputs hold random masks
    check_export(M(), (x, m), {"x": {0: "batch"}, "m": {0: "batch"}})


def test_rrelu_eval_is_leaky_relu_with_mean_slope():
    check_export(torch.nn.RReLU(0.1, 0.3).eval(), (torch.randn(3, 5),), ({0: "batch", 1: "n"},))


@pytest.mark.slow
def test_rrelu_in_training_mode_is_refused():
    from onnxport.errors import TranslationError

    with pytest.raises(TranslationError, match="eval mode"):
        check_export(Fn(lambda t: F.rrelu(t, training=True)), (torch.randn(3, 5),), DYN)
