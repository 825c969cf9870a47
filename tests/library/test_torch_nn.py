"""nn.TransformerEncoder's nested-tensor fast path: the export computes what eager computes."""

import pytest
import torch
from torch import nn

from exportcheck import check_export


def _encoder(norm: bool, batch_first: bool = True):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=batch_first)
    return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16) if norm else None, enable_nested_tensor=True).eval()


class Wrapped(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.enc = _encoder(norm)

    def forward(self, x, pad):
        return self.enc(x, src_key_padding_mask=pad)


def _pad(lengths, t, right=True):
    frames = torch.arange(t)[None, :]
    lengths = torch.tensor(lengths)[:, None]
    return frames >= lengths if right else frames < (t - lengths)


@pytest.mark.slow
@pytest.mark.parametrize("norm", [False, True])
def test_padded_frames_match_eager_fast_path(norm):
    x = torch.randn(3, 7, 16)
    other = [(torch.randn(2, 10, 16), _pad([10, 3], 10)), (torch.randn(4, 5, 16), _pad([1, 5, 2, 4], 5))]
    r = check_export(Wrapped(norm), (x, _pad([7, 2, 5], 7)),
                     {"x": {0: "batch", 1: "time"}, "pad": {0: "batch", 1: "time"}}, inputs=other)
    with torch.no_grad():  # eager really zeroes the padded frames here
        out = Wrapped(norm)(*other[0])
    if not norm:
        assert float(out[1, 3:].abs().max()) == 0.0
    assert r.validate(inputs=other).ok


@pytest.mark.slow
def test_padding_on_the_left_takes_the_regular_path():
    x = torch.randn(3, 7, 16)
    left = [(torch.randn(2, 9, 16), _pad([9, 4], 9, right=False))]
    check_export(Wrapped(False), (x, _pad([7, 2, 5], 7, right=False)),
                 {"x": {0: "batch", 1: "time"}, "pad": {0: "batch", 1: "time"}}, inputs=left)
