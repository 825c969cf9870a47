"""STFT (onnxport/translate/ops/spectral.py): magnitude, power and view_as_real against eager PyTorch, in
both forms (ops/fft.py's ``stft_form``): the DFT as a Conv with a basis (float32, n_fft not a power of two)
and ONNX STFT (powers of two, float64). Their accuracy against float64: tests/translate/ops/test_numerics.py."""

import pytest
import torch
from torch.export import Dim

from exportcheck import check_export, count_ops
from onnxport.errors import TranslationError


class Spectrogram(torch.nn.Module):
    def __init__(self, n_fft=16, hop=4, win_length=None, window="hann", center=True, normalized=False,
                 onesided=True, pad_mode="reflect", outputs=("abs", "power", "real")):
        super().__init__()
        self.kw = dict(n_fft=n_fft, hop_length=hop, win_length=win_length, center=center, normalized=normalized,
                       onesided=onesided, pad_mode=pad_mode, return_complex=True)
        wl = win_length or n_fft
        self.register_buffer("window", torch.hann_window(wl) if window == "hann" else None)
        self.outputs = outputs

    def forward(self, x):
        z = torch.stft(x, window=self.window, **self.kw)
        out = []
        for o in self.outputs:
            if o == "abs":
                out.append(z.abs())
            elif o == "power":
                out.append(z.abs().pow(2))
            elif o == "real":
                out.append(torch.view_as_real(z))
            elif o == "parts":
                out.extend([z.real, z.imag])
        return tuple(out)


def _dyn(batched=True):
    """time is Dim.AUTO: torch.export emits guards like ``16 + t != 8 + 8 * (t // 8)`` that hold for
    every size but that it cannot prove over a named Dim's range."""
    return {"x": {0: "batch", 1: Dim.AUTO}} if batched else {"x": {0: Dim.AUTO}}


def _time_is_dynamic(result):
    return not isinstance(result.model.graph.inputs[0].shape[-1], int)


CASES = [
    dict(),
    dict(n_fft=32, hop=8, win_length=20),
    dict(n_fft=16, hop=8, window=None, normalized=True),
    dict(center=False, outputs=("abs", "parts")),
    dict(pad_mode="constant", onesided=False),
]


FORMS = {"STFT": 0, "basis": 4}  # added to each case's n_fft (16, 32): powers of two are ONNX STFT, others a basis


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("kw", CASES, ids=[str(c) for c in CASES])
def test_stft(kw, form):
    kw = dict(kw, n_fft=kw.get("n_fft", 16) + FORMS[form])
    x = torch.randn(2, 100)
    r = check_export(Spectrogram(**kw), (x,), _dyn(), atol=1e-4, rtol=1e-3)
    assert count_ops(r, "STFT") == (form == "STFT") and count_ops(r, "Conv") == (form == "basis")
    assert _time_is_dynamic(r)
    assert all(v.dtype not in (None,) and "COMPLEX" not in str(v.dtype) for v in r.model.graph.outputs)


def test_stft_unbatched_signal():
    for n_fft, form in ((16, "STFT"), (20, "Conv")):
        r = check_export(Spectrogram(n_fft, outputs=("power",)), (torch.randn(64),), _dyn(batched=False), atol=1e-4)
        assert _time_is_dynamic(r) and count_ops(r, form) == 1


class WindowInForward(torch.nn.Module):
    """The window made in forward (not a constant of the graph): multiplied into the basis there."""

    def forward(self, x):
        window = torch.hann_window(20, device=x.device) * (1 + x[:1, :20].abs().mean())
        return torch.view_as_real(torch.stft(x, 30, 8, 20, window=window, normalized=True, return_complex=True))


def test_stft_window_computed_in_the_graph():
    r = check_export(WindowInForward(), (torch.randn(2, 100),), _dyn(), atol=1e-4, rtol=1e-3)
    assert count_ops(r, "Conv") == 1 and count_ops(r, "STFT") == 0


def test_stft_of_float64_is_onnx_stft():
    """onnxruntime's Conv has no float64 kernel: ONNX STFT at every n_fft."""
    model = Spectrogram(n_fft=24, hop=6, outputs=("abs", "real")).double()
    r = check_export(model, (torch.randn(2, 100, dtype=torch.float64),), _dyn())
    assert count_ops(r, "STFT") == 1 and count_ops(r, "Conv") == 0 and _time_is_dynamic(r)


def test_stft_complex_output_is_an_error():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.stft(x, 16, window=torch.ones(16), return_complex=True)

    with pytest.raises(TranslationError, match="returns the complex tensor"):
        check_export(M(), (torch.randn(2, 64),))


def test_stft_unsupported_reader_is_an_error():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.stft(x, 16, window=torch.ones(16), return_complex=True).exp()

    with pytest.raises(TranslationError, match="read by aten.exp"):
        check_export(M(), (torch.randn(2, 64),))


def test_abs_of_real_tensors_still_translates():
    class M(torch.nn.Module):
        def forward(self, x):
            return x.abs()

    check_export(M(), (torch.randn(3, 4),), {"x": {0: "batch"}})
