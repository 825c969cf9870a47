"""A side of an ``if`` on sizes run at every size by the control-flow rewrite (``rewrite/size_branches.py``)
computes the other side's values where it is not taken, but where it copies (a ``clone``, a ``contiguous``, a
pad by 0) it is not the tensor the other side passes through: a change in place or a read of the memory layout
after the branch tells them apart in eager PyTorch. Such a branch is refused, naming its line (torch.cond
returns copies on both sides, so it cannot hold it either), unless nothing can tell: then it still runs at
every size."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import onnxport
from exportcheck import check_export

SIZES = [{"n": 2}, {"n": 3}, {"n": 4}, {"n": 7}]  # both sides of ``n >= 4``
SHARED = None


def zero_in_place(t):
    t.mul_(0)
    return t


class CloneThenAdd(torch.nn.Module):
    """``y`` is ``x`` where ``n < 4`` and sees its ``add_``; where ``n >= 4`` it keeps ``x * 1``."""

    def forward(self, x):
        x = x * 1
        y = x
        if x.shape[0] >= 4:
            x = x.clone()
        x.add_(1)
        return y * 1


class ContiguousOfATransposeThenSetItem(torch.nn.Module):
    """``t[0] = 0`` writes into ``base`` only where the transposed view is not copied."""

    def forward(self, x):
        base = x * 2
        t = base.t()
        if t.shape[1] >= 4:
            t = t.contiguous()
        t[0] = 0
        return base + 0


class CloneThenIsContiguous(torch.nn.Module):
    """The copy is contiguous, the transposed view it copies is not."""

    def forward(self, x):
        t = x.t()
        if t.shape[1] >= 4:
            t = t.clone(memory_format=torch.contiguous_format)
        return t * (2 if t.is_contiguous() else 3)


class CloneOfAGlobal(torch.nn.Module):
    def forward(self, x):
        global SHARED
        SHARED = x * 2
        y = SHARED
        if x.shape[0] >= 4:
            SHARED = SHARED.clone()
        SHARED.add_(1)
        return y + 0


class PadThenAHelperInPlace(torch.nn.Module):
    """The change in place is in another function: seen once traced."""

    def forward(self, x):
        x = x - 0.5
        y = x
        if x.shape[0] >= 4:
            x = F.pad(x, (0, 0))
        zero_in_place(x)
        return y * 1


class CloneThenAnInPlaceModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        x = x - 0.5
        y = x
        if x.shape[0] >= 4:
            x = x.clone()
        x = self.act(x)
        return y * 1 + x


class CloneNothingWrites(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if x.shape[0] >= 4:
            y = y.clone()
        return y + x


def _export(model, example):
    return check_export(model, (torch.randn(example, 3),), {"x": {0: Dim("n")}}, rewrite_control_flow=True,
                        sizes=SIZES)


@pytest.mark.parametrize("example", [6, 2])
@pytest.mark.parametrize("model", [CloneThenAdd, ContiguousOfATransposeThenSetItem, CloneThenIsContiguous,
                                   CloneOfAGlobal])
def test_a_copy_told_apart_in_the_function_is_refused(model, example):
    with pytest.raises(onnxport.ControlFlowError, match="copies on one side") as e:
        _export(model(), example)
    assert e.value.where and e.value.where.startswith(__file__)


@pytest.mark.parametrize("example", [6, 2])
@pytest.mark.parametrize("model", [PadThenAHelperInPlace, CloneThenAnInPlaceModule])
def test_a_copy_changed_in_place_out_of_the_function_is_refused_once_traced(model, example):
    with pytest.raises(onnxport.ExportError) as e:
        _export(model(), example)
    assert e.value.where and e.value.where.startswith(__file__)


@pytest.mark.parametrize("example", [6, 2])
def test_a_copy_nothing_tells_apart_still_runs_at_every_size(example):
    r = _export(CloneNothingWrites(), example)
    assert r.captured.strategy == "rewritten" and not r.constraints


class WrittenBeforeThePad(torch.nn.Module):
    """SEW-D's form: the input zeroed in place before a pad on sizes; nothing after the branch can tell."""

    def forward(self, x, mask):
        x = x * 1
        x[mask] = 0.0
        y = x[: x.shape[0] // 2 * 2]  # an even count of rows, padded back to all of them
        if y.shape[0] < x.shape[0]:
            y = F.pad(y, (0, 0, 0, x.shape[0] - y.shape[0]))
        return y + 1


class WrittenBeforeTheBranchInALoop(torch.nn.Module):
    """A write earlier in a loop's body runs again after the branch: refused as after it."""

    def forward(self, x):
        y = x * 1
        z = y
        for _ in range(2):
            y.add_(1)
            if x.shape[0] >= 4:
                y = y.clone()
        return z * 1


@pytest.mark.parametrize("example", [6, 2])
def test_a_write_in_place_before_the_branch_does_not_refuse_it(example):
    n = Dim("n")
    r = check_export(WrittenBeforeThePad(), (torch.randn(example, 3), torch.rand(example, 3) > 0.5),
                     {"x": {0: n}, "mask": {0: n}}, rewrite_control_flow=True, sizes=SIZES)
    assert not r.constraints


@pytest.mark.parametrize("example", [6, 2])
def test_a_write_earlier_in_a_loop_holding_the_branch_refuses_it(example):
    with pytest.raises(onnxport.ExportError) as e:
        _export(WrittenBeforeTheBranchInALoop(), example)
    assert e.value.where and e.value.where.startswith(__file__)
