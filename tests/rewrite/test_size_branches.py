"""A rewritten ``if`` on sizes whose side is the identity where it is not taken runs that side at
every size (``rewrite/size_branches.py``): Swin's pad-to-even before patch merging and its cut of
the window padding, and a pad by ``k - n % k`` under ``n % k != 0`` spelled another way. Other
branches on sizes stay ``torch.cond`` (an ONNX ``If``)."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import onnxport
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


class ContiguousPastABatch(torch.nn.Module):
    """diffusers' upsampling block: ``if hidden_states.shape[0] >= 64: hidden_states = hidden_states.contiguous()``
    and the same under ``numel() * scale_factor > 2**31``; a layout-only side is the same values at
    every size."""

    def __init__(self, form: str):
        super().__init__()
        self.form = form

    def forward(self, x):
        x = x.transpose(1, 2)
        if self.form == "batch":
            if x.shape[0] >= 64:
                x = x.contiguous()
        elif self.form == "numel":
            if x.numel() * 2 > pow(2, 31):
                x = x.contiguous()
        else:  # a no-op conversion and a memory format
            if x.shape[0] >= 64:
                x = x.to(x.dtype).contiguous(memory_format=torch.channels_last).clone()
        return torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest") * 3


@pytest.mark.parametrize("form", ["batch", "numel", "to-same-dtype"])
def test_a_layout_only_side_runs_at_every_size_with_no_constraint(form):
    import warnings

    from onnxport.capture.trace import ADOPTED_PREFIX

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(ContiguousPastABatch(form), (torch.randn(2, 3, 5, 4),), {"x": {0: Dim("b"), 2: Dim("h")}},
                         sizes=[{"b": 70, "h": 3}, {"b": 2, "h": 6}, {"b": 64, "h": 2}])
    assert count_ops(r, "If") == 0 and not r.constraints
    assert not [w for w in caught if str(w.message).startswith(ADOPTED_PREFIX)]


class RoundedPastABatch(torch.nn.Module):
    """A conversion that returns the input's dtype through another (``x.half().float()``): it rounds,
    so the side is not the identity where it is not taken."""

    def forward(self, x):
        if x.shape[0] >= 64:
            x = x.half().float()
        return x * 3


def test_a_conversion_through_another_dtype_keeps_its_branch():
    r = check_export(RoundedPastABatch(), (torch.randn(2, 5) * 1000,), {"x": {0: Dim("b")}}, rewrite_control_flow=True,
                     sizes=[{"b": 70}, {"b": 3}])
    assert count_ops(r, "If") == 1


class AlignToStride(torch.nn.Module):
    """torchaudio's ConvTasNet: pad with zeros up to a multiple of the stride, returning the number
    of zeros (0 where the length is a multiple: an early return), and cut them off the output only
    where there were some (``output[..., :-num_pads]`` under ``num_pads > 0``). The zeros made by
    ``torch.zeros``, ``x.new_zeros`` or ``torch.full`` of a size tuple."""

    stride = 4

    def __init__(self, form: str = "zeros"):
        super().__init__()
        self.form = form

    def _align(self, x):
        batch, channels, frames = x.shape
        remaining = frames - (frames // self.stride) * self.stride
        if remaining == 0:
            return x, 0
        num_paddings = self.stride - remaining
        if self.form == "zeros":
            pad = torch.zeros(batch, channels, num_paddings, dtype=x.dtype, device=x.device)
        elif self.form == "new_zeros":
            pad = x.new_zeros(batch, channels, num_paddings)
        else:
            pad = torch.full((batch, channels, num_paddings), 0.0)
        return torch.cat([x, pad], 2), num_paddings

    def forward(self, x):
        padded, num_pads = self._align(x)
        frames = padded.unflatten(-1, (-1, self.stride)).cumsum(-1).flatten(-2)
        if num_pads > 0:
            frames = frames[..., :-num_pads]
        return frames


@pytest.mark.parametrize("form", ["zeros", "new_zeros", "full"])
def test_a_pad_to_a_multiple_returning_its_count_runs_at_every_length(form):
    r = check_export(AlignToStride(form), (torch.randn(2, 1, 10),), {"x": {0: Dim("b"), 2: Dim("t")}},
                     sizes=[{"b": 2, "t": 12}, {"b": 3, "t": 13}, {"b": 1, "t": 4}, {"b": 2, "t": 3}])
    assert count_ops(r, "If") == 0 and not r.constraints


class PadNotEmptyWhereNotTaken(torch.nn.Module):
    """Zeros of a length that is not 0 where the branch is not taken: not the identity there."""

    def _grow(self, x):
        if x.shape[-1] % 4 == 0:
            return x, 0
        return torch.cat([x, torch.zeros(x.shape[0], 2)], 1), 2

    def forward(self, x):
        y, n = self._grow(x)
        return y * 2 + n


def test_zeros_not_empty_where_not_taken_are_not_run_at_every_size():
    r = check_export(PadNotEmptyWhereNotTaken(), (torch.randn(2, 6),), {"x": {1: Dim("t")}},
                     sizes=[{"t": 8}, {"t": 7}, {"t": 4}])
    assert count_ops(r, "If") == 1 or r.constraints


class PadOfAWiderDtype(torch.nn.Module):
    """Zeros of a wider dtype than the input: ``torch.cat`` promotes, so the side taken returns float64
    where the other returns the float32 input; not the identity there, whatever the values."""

    def _align(self, x):
        if x.shape[-1] % 4 == 0:
            return x
        return torch.cat([x, torch.zeros(x.shape[0], (4 - x.shape[-1] % 4) % 4, dtype=torch.float64)], 1)

    def forward(self, x):
        return self._align(x) * 2


def test_a_side_changing_the_dtype_is_not_run_at_every_size():
    line = PadOfAWiderDtype._align.__code__.co_firstlineno + 2
    with pytest.raises(onnxport.ExportError, match=rf"test_size_branches\.py:{line} in _align"):
        onnxport.to_onnx(PadOfAWiderDtype(), (torch.randn(2, 6),), dynamic_shapes={"x": {1: Dim("t")}},
                         rewrite_control_flow=True)


class RollUnlessOneWindow(torch.nn.Module):
    """Swin's cyclic shift: by a shift that is 0 where the map is one window of 4 (``h == 4``)."""

    def forward(self, x):
        shift = 2 * torch.sym_min(1, x.shape[1] - 4)
        if shift > 0:
            x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
        return x * 2


def test_a_roll_by_a_shift_zero_where_not_taken_runs_at_every_size():
    r = check_export(RollUnlessOneWindow(), (torch.randn(2, 8, 6),), {"x": {1: Dim("h", min=4), 2: Dim("w")}},
                     rewrite_control_flow=True, sizes=[{"h": 4, "w": 6}, {"h": 5, "w": 3}, {"h": 9, "w": 12}])
    assert count_ops(r, "If") == 0 and not r.constraints


def test_the_grid_evaluates_size_expressions_as_sympy_does():
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Max, Min, Mod, PythonMod

    from onnxport.rewrite.size_branches import _evaluator

    h, w = sympy.symbols("h w", integer=True, positive=True)
    pad = Mod(4 - Mod(h, 4), 4)
    exprs = [FloorDiv(h + pad, 4), 2 * Min(1, Min(FloorDiv(h + 3, 4), FloorDiv(w + 3, 4)) - 4),
             Max(0, w - 5) * PythonMod(-h, 3), sympy.Or(pad > 0, sympy.Eq(Mod(w, 2), 1)),
             sympy.And(h >= 3, sympy.Ne(w, 4)), sympy.Rational(1, 2) * h, h ** 2 - w]
    for expr in exprs:
        at = _evaluator(expr)
        for point in ({h: a, w: b} for a in range(1, 13) for b in (1, 2, 4, 7, 16)):
            assert at(point) == expr.xreplace(point), (expr, point)
