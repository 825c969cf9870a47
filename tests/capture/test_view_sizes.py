"""A view's sizes take the form the model asked for (``capture/view_sizes.py``): Swin's window partition
of a map padded to whole windows, ``view(b, H // 4, 4, W // 4, 4, c)``, gives windows of side 4, not
``H // (H // 4)``, so the windows' later views and reversal do not nest quotients. The ONNX model of
shifted windows over a map padded to whole windows is compared with eager PyTorch at sizes that pad and
sizes that do not."""

import torch
import torch.nn.functional as F

from exportcheck import check_export
from onnxport.capture.patches import installed
from onnxport.capture.view_sizes import VIEW_SIZES_AS_ASKED

DIMS = {"x": {0: "batch", 1: "height", 2: "width"}}
SEEN: list = []


def _windows(x: torch.Tensor, k: int) -> torch.Tensor:
    b, h, w, c = x.shape
    return x.view(b, h // k, k, w // k, k, c).transpose(2, 3).contiguous().view(-1, k, k, c)


def _reverse(win: torch.Tensor, k: int, h, w) -> torch.Tensor:
    c = win.shape[-1]
    return win.view(-1, h // k, w // k, k, k, c).transpose(2, 3).contiguous().view(-1, h, w, c)


class ShiftedWindows(torch.nn.Module):
    """A map [b, h, w, c] padded to whole windows of 4, shifted by 2, each window mixed by its mean
    (attention's reach), shifted back and cut to [b, h, w, c]; ``SEEN`` keeps the windows' shapes."""

    def forward(self, x):
        b, h, w, c = x.shape
        y = F.pad(x, (0, 0, 0, (4 - w % 4) % 4, 0, (4 - h % 4) % 4))
        _, hp, wp, _ = y.shape
        y = torch.roll(y, shifts=(-2, -2), dims=(1, 2))
        win = _windows(y, 4)
        SEEN.append(tuple(win.shape))
        tokens = win.view(-1, 16, c)
        mixed = tokens + tokens.softmax(1).mean(1, keepdim=True)
        y = _reverse(mixed.view(-1, 4, 4, c), 4, hp, wp)
        y = torch.roll(y, shifts=(2, 2), dims=(1, 2))
        return y[:, :h, :w, :].contiguous().view(b, h * w, c)


def _window_sides(patched: bool) -> tuple:
    model = ShiftedWindows()
    spec = {"x": {i: torch.export.Dim.DYNAMIC for i in (0, 1, 2)}}
    if patched:
        with installed(VIEW_SIZES_AS_ASKED):
            torch.export.export(model, (torch.randn(2, 10, 12, 3),), dynamic_shapes=spec)
    else:
        torch.export.export(model, (torch.randn(2, 10, 12, 3),), dynamic_shapes=spec)
    return SEEN[-1][1:3]


def test_windows_split_off_a_padded_map_have_the_side_asked_for():
    sides = _window_sides(patched=True)
    assert sides == (4, 4) and all(isinstance(s, int) for s in sides)
    assert not all(isinstance(s, int) for s in _window_sides(patched=False))  # torch's own: H // (H // 4)


def test_shifted_windows_export_at_sizes_that_pad_and_that_do_not():
    check_export(ShiftedWindows(), (torch.randn(2, 10, 12, 3),), DIMS,
                 sizes=[{"batch": 1, "height": 16, "width": 8}, {"batch": 3, "height": 13, "width": 7},
                        {"batch": 1, "height": 4, "width": 21}, {"batch": 2, "height": 5, "width": 4}])
