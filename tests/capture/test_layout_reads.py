"""A branch on sizes whose sides differ only by memory layout, one side copying, is followed with no guard
(``onnxport/capture/layout_branches.py``) only until code elsewhere reads the layout of what it passes on
(``onnxport/capture/layout_reads.py``): the caller's ``is_contiguous()`` or ``stride()``, a helper's, a
``torch.cond`` side's. Such a read makes it an ordinary branch; an augmented assignment to a Python number
after it does not."""

import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export

SIDES = [{"n": 2}, {"n": 3}, {"n": 4}, {"n": 6}]  # both sides of ``n >= 4``
BRANCH = "if x.shape[1] >= 4:"


class ContiguousPastFour(torch.nn.Module):
    """A transposed view made contiguous past 4 columns: the same values, another layout."""

    def forward(self, inp):
        x = inp.transpose(0, 1)
        if x.shape[1] >= 4:
            x = x.contiguous()
        return x


class CallerReadsContiguity(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ContiguousPastFour()

    def forward(self, inp):
        y = self.inner(inp)
        return y * 2 if y.is_contiguous() else y * 3


class CallerReadsAStride(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ContiguousPastFour()

    def forward(self, inp):
        y = self.inner(inp)
        return y + 1 if y.stride(-1) == 1 else y - 1


def _scaled(t):
    return t * (2 if t.is_contiguous() else 3)


class HelperReadsContiguity(torch.nn.Module):
    """The read is a helper's, called after the branch in the function holding it."""

    def forward(self, inp):
        x = inp.transpose(0, 1)
        if x.shape[1] >= 4:
            x = x.contiguous()
        return _scaled(x)


class ACondSideReadsContiguity(torch.nn.Module):
    """The read is in a side of ``torch.cond``, which dynamo traces rather than runs."""

    def __init__(self):
        super().__init__()
        self.inner = ContiguousPastFour()

    def forward(self, inp):
        y = self.inner(inp)

        def then(t):
            return t * 2 if t.is_contiguous() else t * 3

        def other(t):
            return t - 1

        return torch.cond(y.sum() > -1e9, then, other, (y,))


READERS = [CallerReadsContiguity, CallerReadsAStride, HelperReadsContiguity, ACondSideReadsContiguity]
READER_IDS = ["caller is_contiguous", "caller stride", "helper", "torch.cond side"]


@pytest.mark.parametrize("model", READERS, ids=READER_IDS)
def test_a_layout_read_after_the_branch_makes_it_an_ordinary_branch(model):
    """Traced at the side making no copy (``n = 2``), the branch is followed with no guard until the read,
    then decided as any branch: torch.export's guard at the branch's line, the read named in the fix."""
    with pytest.raises(onnxport.SpecializationError, match=r"n <= 3") as info:
        onnxport.to_onnx(model(), (torch.randn(2, 3),), dynamic_shapes={"inp": {0: Dim("n")}},
                         rewrite_control_flow=False)
    assert BRANCH in str(info.value)
    assert "the layout is read after it (at " in info.value.hint and __file__ in info.value.hint.split("(at ")[1]


@pytest.mark.parametrize("model", READERS, ids=READER_IDS)
@pytest.mark.parametrize("example", [2, 6])
def test_a_layout_read_after_the_branch_is_right_on_both_sides(model, example):
    """Eager PyTorch computes another value on each side of ``n >= 4``: onnxruntime matches it on both."""
    check_export(model(), (torch.randn(example, 3),), {"inp": {0: Dim("n")}}, sizes=SIDES)


def test_a_side_run_at_every_size_before_a_layout_read_is_refused():
    """The control-flow rewrite runs the copying side at every size where the function holding the branch
    reads no layout; the caller's read after it is noticed while tracing, and the export refused, naming the
    branch and the read."""
    with pytest.raises(onnxport.CaptureError, match=r"memory layout is read after it") as info:
        onnxport.to_onnx(CallerReadsContiguity(), (torch.randn(2, 3),), dynamic_shapes={"inp": {0: Dim("n")}},
                         rewrite_control_flow=True)
    text = str(info.value)
    assert "in forward" in text and "y.is_contiguous()" in text


class ReadsBeforeTheBranch(torch.nn.Module):
    """The layout is read before the branch runs: it cannot tell the sides apart."""

    def __init__(self):
        super().__init__()
        self.inner = ContiguousPastFour()

    def forward(self, inp):
        scale = 2 if inp.is_contiguous() else 3
        return self.inner(inp) * scale


def _single_trace_without_guards(result):
    assert [a.step for a in result.captured.attempts if a.applied].count("trace") == 1
    assert not result.guards and not result.constraints and not result.pieces, [str(g) for g in result.guards]


def test_a_layout_read_before_the_branch_leaves_it_followed_with_no_guard():
    r = check_export(ReadsBeforeTheBranch(), (torch.randn(2, 3),), {"inp": {0: Dim("n")}}, sizes=SIDES,
                     rewrite_control_flow=False)
    _single_trace_without_guards(r)


class CountsAfterACopy(torch.nn.Module):
    """``n += 1`` on a Python int after the copying branch changes no tensor in place."""

    def forward(self, inp):
        x = inp.transpose(0, 1)
        n = 1
        if x.shape[1] >= 4:
            x = x.contiguous()
        n += 1
        return x * n


@pytest.mark.parametrize("example", [2, 6])
def test_an_augmented_assignment_to_a_number_after_a_copy_exports_right(example):
    r = check_export(CountsAfterACopy(), (torch.randn(example, 3),), {"inp": {0: Dim("n")}}, sizes=SIDES)
    if example == 2:  # the side making no copy: followed with no guard
        _single_trace_without_guards(r)


class AddsInPlaceAfterACopy(torch.nn.Module):
    """``x += 1`` on the tensor: ``y`` sees the change on the side making no copy only."""

    def forward(self, inp):
        x = inp * 2
        y = x
        if x.shape[0] >= 4:
            x = x.clone()
        x += 1
        return y * 1


def test_an_augmented_assignment_to_a_tensor_after_a_copy_is_refused():
    """No longer refused by reading the source: the in-place ``+=`` advances the version counter of the tensor
    the sides start from, which the capture checks once traced."""
    with pytest.raises(onnxport.CaptureError, match=r"change in place") as info:
        onnxport.to_onnx(AddsInPlaceAfterACopy(), (torch.randn(2, 3),), dynamic_shapes={"inp": {0: Dim("n")}},
                         rewrite_control_flow=False)
    assert "if x.shape[0] >= 4:" in str(info.value)


_READER_FROM_A_STRING = '''
class ReaderFromAString(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ContiguousPastFour()

    def forward(self, inp):
        y = self.inner(inp)
        return y * 2 if y.is_contiguous() else y * 3
'''


def test_a_layout_read_in_code_compiled_from_a_string_is_noticed():
    """The caller compiled from a string (``exec``, a notebook, ``python -c``) is the user's code too: its read
    makes the branch an ordinary one, named in the fix."""
    namespace = {"torch": torch, "ContiguousPastFour": ContiguousPastFour}
    exec(compile(_READER_FROM_A_STRING, "<string>", "exec"), namespace)  # noqa: S102 - the test's own model
    with pytest.raises(onnxport.SpecializationError, match=r"n <= 3") as info:
        onnxport.to_onnx(namespace["ReaderFromAString"](), (torch.randn(2, 3),),
                         dynamic_shapes={"inp": {0: Dim("n")}}, rewrite_control_flow=False)
    assert "the layout is read after it (at <string>:" in info.value.hint, info.value.hint
