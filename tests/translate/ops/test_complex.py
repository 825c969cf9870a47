"""Complex tensors inside models whose inputs and outputs are real: carried as real [..., 2]
pairs (tests ops/complex.py)."""

import pytest
import torch

import onnxport
from exportcheck import check_export, Fn, Fn2

DYN2 = {"a": {0: "batch", 1: "n"}, "b": {0: "batch", 1: "n"}}


def test_view_as_complex_and_back():
    fn = lambda x: (torch.view_as_real(torch.view_as_complex(x) * 2), torch.view_as_complex(x).abs(),  # noqa: E731
                    torch.view_as_complex(x).angle(), torch.view_as_complex(x).real, torch.view_as_complex(x).imag)
    check_export(Fn(fn), (torch.randn(3, 5, 2),), {"x": {0: "batch", 1: "n"}})


def test_complex_and_polar_from_real_parts():
    fn = lambda a, b: (torch.view_as_real(torch.complex(a, b)), torch.view_as_real(torch.polar(a.abs(), b)),  # noqa: E731
                       torch.complex(a, b[:, :1]).abs(), torch.polar(a, b).angle())
    check_export(Fn2(fn), (torch.randn(3, 4), torch.randn(3, 4)), DYN2)


def test_complex_arithmetic():
    def fn(a, b):
        z, w = torch.complex(a, b), torch.complex(b, a * 2)
        return (torch.view_as_real(z * w), torch.view_as_real(z + w), torch.view_as_real(z - a),
                torch.view_as_real(2 * z + 1), torch.view_as_real(z.conj() * a), (z * w.conj()).real)

    check_export(Fn2(fn), (torch.randn(3, 4), torch.randn(3, 4)), DYN2)


def test_cast_to_complex_slice_and_pad():
    def fn(x):
        z = x.to(torch.complex64)
        return (torch.view_as_real(z[:, 1:]), torch.view_as_real(torch.nn.functional.pad(z, (1, 2))),
                z.to(torch.complex128).abs())

    check_export(Fn(fn), (torch.randn(3, 5),), {"x": {0: "batch", 1: "n"}})


def test_to_of_a_complex_tensor_to_its_device_or_dtype():
    """Llama 4's rotary table: complex ``freqs_cis.to(x.device)`` before the product (``to.device``,
    ``to.dtype_layout`` in the program), and ``to(other)``."""
    def fn(x):
        z = torch.view_as_complex(x)
        table = torch.polar(torch.ones_like(x[..., 0]), x[..., 1])
        return (torch.view_as_real(z * table.to(x.device)), torch.view_as_real(z.to(device=x.device, dtype=z.dtype)),
                torch.view_as_real(z.to(table)))

    check_export(Fn(fn), (torch.randn(3, 5, 2),), {"x": {0: "batch", 1: "n"}})


def test_shape_ops_of_a_complex_tensor():
    """Llama 4's ``freqs_cis[:, :, None, :]`` and the other shape ops, on the complex tensor's axes."""
    def fn(x):  # x: [batch, n, 4, 2]
        z = torch.view_as_complex(x)
        return (torch.view_as_real(z[:, :, None, :] * z.unsqueeze(-2)), torch.view_as_real(z.reshape(-1, 2, 2)),
                torch.view_as_real(z.permute(1, 0, 2)), torch.view_as_real(z.transpose(0, -1)),
                torch.view_as_real(z[:, :1].squeeze(1)), torch.view_as_real(z[:, :, :1].expand(-1, -1, 3)),
                torch.view_as_real(z.unsqueeze(0).squeeze(0)))

    check_export(Fn(fn), (torch.randn(3, 5, 4, 2),), {"x": {0: "batch", 1: "n"}})


@pytest.mark.slow
def test_angle_and_real_of_real_tensors():
    fn = lambda x: (torch.angle(x), torch.real(x), torch.angle(x.long()))  # noqa: E731
    x = torch.tensor([[-2.0, 0.0, 3.0, float("nan")], [1.0, -0.5, -7.0, 2.0]])
    check_export(Fn(fn), (x,), {"x": {0: "batch"}})


@pytest.mark.parametrize("make", [lambda x: torch.view_as_complex(x), lambda x: x.to(torch.complex64)],
                         ids=["view_as_complex", "to"])
def test_returning_a_complex_tensor_is_an_error(make):
    with pytest.raises(onnxport.TranslationError, match="returns the complex tensor"):
        onnxport.to_onnx(Fn(make).eval(), (torch.randn(3, 2),))


def test_an_untranslated_reader_of_a_complex_tensor_is_an_error():
    with pytest.raises(onnxport.TranslationError, match="read by aten.exp"):
        onnxport.to_onnx(Fn(lambda x: torch.view_as_real(torch.view_as_complex(x).exp())).eval(), (torch.randn(3, 2),))


class _RotaryTable(torch.nn.Module):
    """Llama 4's vision rotary embedding: a complex64 table ``[positions, 1, pairs]`` kept as a buffer, read
    through ``to(device)`` and a view, multiplied with the query's pairs."""

    def __init__(self, direct: bool):
        super().__init__()
        angles = torch.arange(17.0)[:, None, None] * torch.linspace(0.1, 1.5, 8)[None, None, :]
        self.register_buffer("freqs_ci", torch.polar(torch.ones_like(angles), angles), persistent=False)
        self.direct = direct

    def forward(self, q):  # q: [batch, 17, heads, 16]
        z = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        table = self.freqs_ci.to(q.device) if self.direct else self.freqs_ci.view(17, 1, 8)
        return torch.view_as_real(z * table).flatten(3)


@pytest.mark.parametrize("direct", [True, False], ids=["to_device", "view"])
def test_a_complex_buffer_keeps_its_imaginary_parts(direct):
    """A complex buffer is an initializer of real [..., 2] pairs: read through ``to`` it kept only its real
    parts (wrong by the size of the rotation), read through ``view`` the export stopped."""
    check_export(_RotaryTable(direct), (torch.randn(2, 17, 3, 16),), {"q": {0: "batch"}})


def test_transformers_llama4_vision_rotary_embedding():
    """transformers' own ``Llama4VisionRotaryEmbedding`` buffer and ``vision_apply_rotary_emb``."""
    llama4 = pytest.importorskip("transformers.models.llama4.modeling_llama4")
    from transformers import Llama4VisionConfig

    config = Llama4VisionConfig(hidden_size=32, num_attention_heads=2, image_size=16, patch_size=4)

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rotary = llama4.Llama4VisionRotaryEmbedding(config)

        def forward(self, q, k):  # [batch, 17 patches and the class token, heads, head_dim]
            return llama4.vision_apply_rotary_emb(q, k, freqs_ci=self.rotary(q))

    q = torch.randn(2, 17, 2, 16)
    check_export(Attention(), (q, torch.randn_like(q)), {"q": {0: "batch"}, "k": {0: "batch"}})


def test_an_untranslated_reader_of_a_complex_buffer_is_an_error():
    class Exp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("z", torch.polar(torch.ones(4), torch.arange(4.0)))

        def forward(self, x):
            return x * torch.view_as_real(self.z.exp())

    with pytest.raises(onnxport.TranslationError, match="read by aten.exp") as info:
        onnxport.to_onnx(Exp().eval(), (torch.randn(3, 4, 2),))
    assert "self.z.exp()" in str(info.value)
