"""STFT (onnxport/translate/ops/spectral.py): magnitude, power and view_as_real against eager PyTorch."""

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


@pytest.mark.parametrize("kw", CASES, ids=[str(c) for c in CASES])
def test_stft(kw):
    x = torch.randn(2, 100)
    r = check_export(Spectrogram(**kw), (x,), _dyn(), atol=1e-4, rtol=1e-3)
    assert count_ops(r, "STFT") == 1 and _time_is_dynamic(r)
    assert all(v.dtype not in (None,) and "COMPLEX" not in str(v.dtype) for v in r.model.graph.outputs)


def test_stft_unbatched_signal():
    r = check_export(Spectrogram(outputs=("power",)), (torch.randn(64),), _dyn(batched=False), atol=1e-4)
    assert _time_is_dynamic(r)


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
