"""A floor division of sizes by a factor the dividend holds squared is cancelled while torch.export traces
(``capture/floordiv_powers.py``): a square feature map's ``h * h`` tokens viewed back into windows
(``view(-1, 3, 3, c)``) no longer leave quotients that nest stage after stage. The ONNX model of a
three-stage windowed toy over a square image is compared with eager PyTorch at sizes taking every
padding path."""

import sympy
import torch
import torch.nn.functional as F
from torch.utils._sympy.functions import FloorDiv

from exportcheck import check_export
from onnxport.capture.floordiv_powers import FLOORDIV_POWERS, power_gcd
from onnxport.capture.patches import installed


def _symbols(names: str):
    return sympy.symbols(names, integer=True, positive=True)


def test_the_common_power_of_dividend_and_divisor():
    b, h, c, w = _symbols("b_pg h_pg c_pg w_pg")
    assert power_gcd(b * h**2 * c, h * c) == h * c
    assert power_gcd(b * h**3 + h**2, h**2 * w) == h**2
    assert power_gcd(b * h**2 + c, h) == 1  # not in every term
    assert power_gcd(b * h**2, w) == 1


def test_floor_division_cancels_a_squared_size_while_tracing():
    b, h, c = _symbols("b_fd h_fd c_fd")  # symbols of this test only: sympy caches what FloorDiv made
    with installed(FLOORDIV_POWERS):
        assert FloorDiv(b * h**2 * c, h * c) == b * h
    b2, h2, c2 = _symbols("b_un h_un c_un")
    assert isinstance(FloorDiv(b2 * h2**2 * c2, h2 * c2), FloorDiv)  # torch's own search leaves it whole


class SquareWindows(torch.nn.Module):
    """Three stages over a square map: its tokens viewed back as the map, padded to windows of 3, each
    window averaged (``view(-1, 3, 3, c)``), cropped, padded to even and 2x2 neighbours merged."""

    def forward(self, img):  # [b, c, s, s]
        x = img[:, :, ::2, ::2]  # a computed side, (s - 1) // 2 + 1
        b, c, h, w = x.shape
        x = x.permute(0, 2, 3, 1).reshape(b, h * w, c)
        for _ in range(3):
            x = x.view(b, h, w, c)
            x = F.pad(x, (0, 0, 0, (3 - w % 3) % 3, 0, (3 - h % 3) % 3))
            _, hp, wp, _ = x.shape
            win = x.view(b, hp // 3, 3, wp // 3, 3, c).transpose(2, 3).reshape(-1, 3, 3, c)
            win = win.mean((1, 2), keepdim=True).expand(-1, 3, 3, c)
            x = win.view(-1, hp // 3, wp // 3, 3, 3, c).transpose(2, 3).reshape(-1, hp, wp, c)[:, :h, :w]
            x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
            x = x[:, 0::2, 0::2] + x[:, 1::2, 1::2]
            h, w = x.shape[1], x.shape[2]
            x = x.reshape(b, h * w, c)
        return x


def test_square_windows_export_at_every_padding_path():
    check_export(SquareWindows(), (torch.randn(2, 4, 40, 40),), {"img": {0: "b", 2: "s", 3: "s"}},
                 sizes=[{"b": 1, "s": 41}, {"b": 3, "s": 64}, {"b": 2, "s": 13}, {"b": 1, "s": 7}])
