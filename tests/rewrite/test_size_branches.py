"""A rewritten ``if`` on sizes whose side is the identity where it is not taken runs that side at
every size (``rewrite/size_branches.py``): Swin's pad-to-even before patch merging and its cut of
the window padding, and a pad by ``k - n % k`` under ``n % k != 0`` spelled another way. Other
branches on sizes stay ``torch.cond`` (an ONNX ``If``)."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from exportcheck import check_export, count_ops


class PadToEven(torch.nn.Module):
    """Swin's ``SwinPatchMerging.maybe_pad`` and the interleave after it."""

    def forward(self, x):  # [batch, height, width, channels]
        _, h, w, _ = x.shape
        if (h % 2 == 1) or (w % 2 == 1):
            x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
        return torch.cat([x[:, r::2, c::2] for c in range(2) for r in range(2)], -1).flatten(1, 2)


class CutWindowPadding(torch.nn.Module):
    """Swin's layer: pad to whole windows, work per window, cut the padding off if there was some."""

    def forward(self, x):
        _, h, w, c = x.shape
        pad_right, pad_bottom = (4 - w % 4) % 4, (4 - h % 4) % 4
        y = F.pad(x, (0, 0, 0, pad_right, 0, pad_bottom))
        y = y.view(y.shape[0], y.shape[1] // 4, 4, y.shape[2] // 4, 4, c).softmax(2).reshape(y.shape)
        if pad_right > 0 or pad_bottom > 0:
            y = y[:, :h, :w, :].contiguous()
        return y


class PadByRemainder(torch.nn.Module):
    """``k - n % k`` through a name: the amount is ``k`` where nothing is padded, so the side runs
    with ``(k - n % k) % k``."""

    def forward(self, x):
        rem = x.shape[-1] % 3
        if rem != 0:
            x = F.pad(x, (0, 3 - rem))
        return x.unflatten(-1, (-1, 3)).sum(-1)


class ScaleOddRows(torch.nn.Module):
    """Not the identity where not taken: stays a branch."""

    def forward(self, x):
        if x.shape[1] % 2 == 1:
            x = x * 2
        return x + 1


HW = {"x": {1: Dim("h"), 2: Dim("w")}}
HW_SIZES = [{"h": 5, "w": 7}, {"h": 9, "w": 12}, {"h": 3, "w": 4}, {"h": 8, "w": 1}]


@pytest.mark.slow
@pytest.mark.parametrize("model", [PadToEven(), CutWindowPadding()], ids=["pad-to-even", "cut-window-padding"])
def test_a_pad_or_cut_under_a_size_condition_runs_at_every_size(model):
    r = check_export(model, (torch.randn(2, 8, 6, 3),), HW, rewrite_control_flow=True, sizes=HW_SIZES)
    assert count_ops(r, "If") == 0 and not r.constraints


def test_a_pad_amount_not_zero_where_not_taken_runs_modulo():
    r = check_export(PadByRemainder(), (torch.randn(2, 6),), {"x": {1: Dim("w")}}, rewrite_control_flow=True,
                     sizes=[{"w": 7}, {"w": 8}, {"w": 9}, {"w": 2}])
    assert count_ops(r, "If") == 0 and not r.constraints


@pytest.mark.slow
def test_another_branch_on_sizes_stays_an_if():
    r = check_export(ScaleOddRows(), (torch.randn(2, 6),), {"x": {1: Dim("n")}}, rewrite_control_flow=True,
                     sizes=[{"n": 7}, {"n": 4}, {"n": 3}])
    assert count_ops(r, "If") == 1 and not r.constraints


class SameLength(torch.nn.Module):
    """SEW-D's ``if key_layer.size(-2) != query_layer.size(-2):`` where both come from one tensor:
    the condition is False by itself (a SymBool of sympy's ``false``), and the other side is never
    needed."""

    def forward(self, x):
        q, k = x.reshape(-1, 3) * 2, x.reshape(-1, 3) + 1
        if k.size(-2) != q.size(-2):
            r = torch.cat([k, k])
        else:
            r = q * 2
        return r + k


def test_a_condition_the_sizes_decide_by_themselves_takes_its_side():
    r = check_export(SameLength(), (torch.randn(5, 6),), {"x": {0: Dim("n")}}, rewrite_control_flow=True,
                     sizes=[{"n": 7}, {"n": 2}])
    assert count_ops(r, "If") == 0 and not r.constraints


class CutPastAThreshold(torch.nn.Module):
    """``x[:500]`` under ``n > 1000`` is not all of ``x`` at 501..1000 rows, where it is not taken:
    sizes past the first 256 the grid reaches through the condition's constants."""

    def forward(self, x):
        if x.shape[0] > 1000:
            x = x[:500]
        return x * 2


def test_a_cut_that_is_not_the_identity_where_not_taken_stays_a_branch():
    r = check_export(CutPastAThreshold(), (torch.randn(1200, 2),), {"x": {0: Dim("n")}}, rewrite_control_flow=True,
                     sizes=[{"n": 600}, {"n": 1500}, {"n": 1001}])
    assert count_ops(r, "If") == 1
