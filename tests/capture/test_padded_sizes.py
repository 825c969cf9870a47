"""Padding to a whole multiple (Swin's ``(window - w % window) % window``, its patch merging's
``w % 2``, SAM2's ``h + (-h) % window``) is captured as the multiple it makes, ``k * ceil(w / k)``:
the padded size names the size once, so stages of pads do not double the expression each time. The
ONNX model of a four-stage windowed toy is compared with eager PyTorch at sizes that take every
remainder path."""

import pytest
import sympy
import torch
import torch.nn.functional as F

from exportcheck import check_export
from onnxport.capture.padded_sizes import ROUNDED_PADDING, multiple
from onnxport.capture.patches import installed


class Windows(torch.nn.Module):
    """Four stages of: pad to a multiple of 3, mean over windows of 3, pad to even, merge pairs."""

    def forward(self, x):  # x: [b, w, c]
        for _ in range(4):
            w = x.shape[1]
            x = F.pad(x, (0, 0, 0, (3 - w % 3) % 3))
            b, wp, c = x.shape
            x = x.view(b, wp // 3, 3, c).mean(2, keepdim=True).expand(b, wp // 3, 3, c).reshape(b, wp, c)
            x = x[:, :w].contiguous()
            x = F.pad(x, (0, 0, 0, w % 2))
            x = x[:, 0::2] + x[:, 1::2]
        return x


def _padded_size(pad: str) -> list[str]:
    seen = []

    class One(torch.nn.Module):
        def forward(self, x):
            x = x[:, ::4]  # a computed size, (n - 1) // 4 + 1, as after a strided convolution
            w = x.shape[1]
            y = F.pad(x, (0, eval(pad)))
            seen.append(str(y.shape[1].node.expr))
            seen.append(str((w + eval(pad)).node.expr))
            return y

    with installed(ROUNDED_PADDING):
        torch.export.export(One(), (torch.randn(2, 30),), dynamic_shapes={"x": {1: torch.export.Dim("w", min=8)}})
    return seen


def test_the_padded_size_names_the_size_once():
    for pad, k in (("(7 - w % 7) % 7", "7"), ("w % 2", "2"), ("(-w) % 5", "5")):
        padded, added = _padded_size(pad)
        assert padded == added and padded.count("s") == 1 and f"//{k}" in padded, (pad, padded, added)
    assert "Mod" in _padded_size("(8 - w % 7) % 7")[0]  # not a pad to a multiple: passed on as given


@pytest.mark.slow
def test_the_pad_of_an_input_size_keeps_torch_form():
    """One pad of a dim symbol compounds nothing; torch's form leaves the reshape into chunks of
    Mamba2's sequence to every length (rounded, it narrowed the length to more than one chunk)."""
    seen = []

    class Chunks(torch.nn.Module):
        def forward(self, x):
            y = F.pad(x, (0, (4 - x.shape[1] % 4) % 4))
            if isinstance(y.shape[1], torch.SymInt):
                seen.append(str(y.shape[1].node.expr))
            return y.reshape(x.shape[0], -1, 4).sum(-1)

    check_export(Chunks(), (torch.randn(2, 7),), ({0: "b", 1: "w"},), values=[],
                 sizes=[{"b": 1, "w": 1}, {"b": 2, "w": 4}, {"b": 3, "w": 13}])
    assert seen and all("Mod" in e for e in seen), seen


def test_the_forms_of_a_pad_to_a_multiple():
    w = sympy.Symbol("w", integer=True, positive=True)
    from torch.utils._sympy.functions import Mod, PythonMod
    assert multiple(Mod(7 - Mod(w, 7), 7), w) == 7
    assert multiple(PythonMod(-w, 4), w) == 4
    assert multiple(Mod(w, 2), w) == 2
    assert multiple(Mod(w, 3), w) is None
    assert multiple(Mod(7 - Mod(w, 7), 7), w + 1) is None


@pytest.mark.slow
def test_stages_of_pads_export_at_every_remainder():
    check_export(Windows(), (torch.randn(2, 50, 4),), ({0: "b", 1: "w"},), values=[],
                 sizes=[{"b": 1, "w": 16}, {"b": 3, "w": 49}, {"b": 2, "w": 97}, {"b": 1, "w": 31}])
