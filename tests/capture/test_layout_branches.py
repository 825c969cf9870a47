"""A branch on sizes whose sides differ only by memory layout is captured at the first trace, with no guard
(``onnxport/capture/layout_branches.py``): diffusers' upsampling block makes its input contiguous past a
batch of 64 and past ``2**31`` output elements, which ONNX, having no memory layout, need not follow."""

import inspect
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import onnxport
from exportcheck import check_export
from onnxport.capture.layout_branches import layout_only_if


class ContiguousPastABatch(torch.nn.Module):
    """diffusers' ``Upsample2D.forward`` (interpolating): the same values either side of each branch."""

    def forward(self, x):
        if x.shape[0] >= 64:
            x = x.contiguous()
        if x.numel() * 2 > pow(2, 31):
            x = x.contiguous()
        return F.interpolate(x, scale_factor=2.0, mode="nearest") * 2


def test_a_layout_only_branch_is_captured_at_the_first_trace_with_no_guard():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(ContiguousPastABatch(), (torch.randn(2, 3, 8, 8),),
                         {"x": {0: Dim("batch"), 2: Dim("h"), 3: Dim("w")}},
                         sizes=[{"batch": 70, "h": 3, "w": 5}, {"batch": 64, "h": 4, "w": 4},
                                {"batch": 63, "h": 5, "w": 2}, {"batch": 1, "h": 8, "w": 8}])
    assert r.captured.strategy == "non-strict" and not r.rewrite_notes
    assert [a.step for a in r.captured.attempts if a.applied].count("trace") == 1
    assert not r.constraints and not r.guards, [str(g) for g in r.guards]
    assert not [w for w in caught if "capture failed" in str(w.message)]


class ScaledPastABatch(torch.nn.Module):
    """A side that changes the values: the branch decides the export."""

    def forward(self, x):
        if x.shape[0] >= 64:
            x = x * 2
        return x + 1


def test_a_branch_changing_values_is_still_refused_at_its_line():
    with pytest.raises(onnxport.SpecializationError, match=r"batch <= 63") as info:
        onnxport.to_onnx(ScaledPastABatch(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: Dim("batch")}},
                         rewrite_control_flow=False)
    assert "if x.shape[0] >= 64:" in str(info.value)


def _forms(x, y, n):
    if n >= 64:  # [contiguous]
        x = x.contiguous()
    if n >= 64:  # [chain]
        x = x.to(memory_format=torch.channels_last).clone(memory_format=torch.contiguous_format).detach()
    if n >= 64:  # [else]
        y = x.contiguous()
    else:
        y = x
    z = x.contiguous() if n >= 64 else x  # [expression]
    if n >= 64:  # [float]
        x = x.float()
    if n >= 64:  # [dtype]
        x = x.to(torch.float16)
    if n >= 64:  # [one side]
        y = x.contiguous()
    if n >= 64:  # [another name]
        x = y.contiguous()
    if n >= 64:  # [a call]
        x = x.contiguous()
        print(x)
    if n >= 64:  # [elif]
        x = x.contiguous()
    elif n >= 8:
        x = x * 2
    return x, y, z


@pytest.mark.parametrize("form, layout_only", [
    ("contiguous", True), ("chain", True), ("else", True), ("expression", True), ("float", False),
    ("dtype", False), ("one side", False), ("another name", False), ("a call", False), ("elif", False)])
def test_which_branches_are_layout_only(form, layout_only):
    """Each branch of ``_forms`` at its condition's line, as the recorder asks while torch traces."""
    lines, first = inspect.getsourcelines(_forms)
    (k,) = [k for k, text in enumerate(lines) if text.rstrip().endswith(f"# [{form}]")]
    where = f"{inspect.getsourcefile(_forms)}:{first + k} in _forms: {lines[k].strip()}"
    assert layout_only_if(where) is layout_only
