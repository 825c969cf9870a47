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


# ---------------------------------------------------------------- sides the same values, the rest not
SIDES = [{"n": 2}, {"n": 3}, {"n": 4}, {"n": 6}]  # both sides of ``n >= 4``


class CloneThenInPlace(torch.nn.Module):
    """``y`` names the value before the branch: ``clone`` keeps it from ``add_`` on one side only."""

    def forward(self, inp):
        x = inp * 2
        y = x
        if x.shape[0] >= 4:
            x = x.clone()
        x.add_(1)
        return y * 1


class ContiguousThenItem(torch.nn.Module):
    """``contiguous`` of a transposed view copies it: the write reaches ``base`` on the other side only."""

    def forward(self, inp):
        base = inp * 2
        x = base.t()
        if x.shape[1] >= 4:
            x = x.contiguous()
        x[0] = 0
        return base + 0


@pytest.mark.parametrize("model", [CloneThenInPlace(), ContiguousThenItem()], ids=["add_", "item"])
@pytest.mark.parametrize("example", [2, 6])
def test_a_copy_on_one_side_before_a_change_in_place_is_refused(model, example):
    with pytest.raises(onnxport.SpecializationError, match=r"n (<=|>=)"):
        onnxport.to_onnx(model, (torch.randn(example, 3),), dynamic_shapes={"inp": {0: Dim("n")}},
                         rewrite_control_flow=False)


class CloneBeforeAnInPlaceModule(torch.nn.Module):
    """The change in place is a module's (``ReLU(inplace=True)``), out of sight of the function's source."""

    def __init__(self):
        super().__init__()
        self.act = torch.nn.ReLU(inplace=True)

    def forward(self, inp):
        x = inp * 2
        y = x
        if x.shape[0] >= 4:
            x = x.clone()
        x = self.act(x)
        return y * 1 + x


def _zeroed(t):
    return t.mul_(0)


class ContiguousBeforeAnInPlaceHelper(torch.nn.Module):
    def forward(self, inp):
        x = inp - 0.5
        y = x
        if x.shape[0] >= 4:
            x = x.contiguous().clone()
        _zeroed(x)
        return y * 1


@pytest.mark.parametrize("model", [CloneBeforeAnInPlaceModule(), ContiguousBeforeAnInPlaceHelper()],
                         ids=["module", "helper"])
@pytest.mark.parametrize("example", [2, 6])
def test_a_copy_on_one_side_before_a_change_in_place_out_of_sight_is_refused(model, example):
    """Followed at the side making no copy (the example's, ``n = 2``), the change in place advances the
    version of the tensor the sides start from, and the export is refused naming the branch; at the side
    making the copy (``n = 6``) the branch is an ordinary one."""
    error = onnxport.CaptureError if example == 2 else onnxport.SpecializationError
    with pytest.raises(error, match=r"change in place" if example == 2 else r"n <= 3|n >= 4") as info:
        onnxport.to_onnx(model, (torch.randn(example, 3),), dynamic_shapes={"inp": {0: Dim("n")}},
                         rewrite_control_flow=False)
    assert "if x.shape[0] >= 4:" in str(info.value)


class ReadsTheLayout(torch.nn.Module):
    """``is_contiguous()`` after the branch tells its sides apart."""

    def forward(self, inp):
        x = inp.transpose(0, 1)
        if x.shape[1] >= 4:
            x = x.contiguous()
        return x * (2 if x.is_contiguous() else 3)


class ReadsAStride(torch.nn.Module):
    def forward(self, inp):
        x = inp.transpose(0, 1)
        if x.shape[1] >= 4:
            x = x.contiguous()
        return x * x.stride(0)


@pytest.mark.parametrize("model", [ReadsTheLayout(), ReadsAStride()], ids=["is_contiguous", "stride"])
@pytest.mark.parametrize("example", [2, 6])
def test_a_branch_whose_layout_is_read_after_it_is_refused(model, example):
    with pytest.raises(onnxport.SpecializationError, match=r"n (<=|>=)"):
        onnxport.to_onnx(model, (torch.randn(example, 3),), dynamic_shapes={"inp": {0: Dim("n")}},
                         rewrite_control_flow=False)


class DetachThenInPlace(torch.nn.Module):
    """``detach`` shares the storage: the change in place reaches ``y`` on both sides."""

    def forward(self, inp):
        x = inp * 2
        y = x
        if x.shape[0] >= 4:
            x = x.detach()
        x.add_(1)
        return y * 1


class InPlaceInTheCondition(torch.nn.Module):
    """``and`` evaluates its right side where the size condition holds only."""

    def forward(self, inp):
        x = inp * 2
        if x.shape[0] >= 4 and x.add_(1) is not None:
            pass
        return x


class BoundInTheCondition(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] >= 4 and (x := x * 2) is not None:
            pass
        return x + 1


class NotATensor:
    """A method named ``contiguous`` that changes the values."""

    def __init__(self, t):
        self.t = t

    def contiguous(self):
        return NotATensor(self.t * 10)


class ContiguousOfAnObject(torch.nn.Module):
    def forward(self, x):
        w = NotATensor(x)
        if x.shape[0] >= 4:
            w = w.contiguous()
        return w.t + 1


class CloneInAClosure(torch.nn.Module):
    """The branch binds ``x`` of the enclosing function, which changes it in place."""

    def forward(self, inp):
        x = inp * 2
        y = x

        def protect():
            nonlocal x
            if x.shape[0] >= 4:
                x = x.clone()

        protect()
        x.add_(1)
        return y * 1


class TwoConditionsOnALine(torch.nn.Module):
    """Two conditional expressions on one line, the second changing the values."""

    def forward(self, x):
        z = x.contiguous() if x.shape[0] >= 4 else x; w = x * 2 if x.shape[0] >= 4 else x  # noqa: E702
        return z + w


@pytest.mark.parametrize("model", [DetachThenInPlace(), InPlaceInTheCondition(), BoundInTheCondition(),
                                   ContiguousOfAnObject(), CloneInAClosure(), TwoConditionsOnALine()],
                         ids=["detach", "and", "walrus", "object", "closure", "two on a line"])
@pytest.mark.parametrize("example", [2, 6])
def test_sides_differing_beyond_the_layout_are_right_on_both_sides(model, example):
    """Where the branch is not layout-only after all, it is rewritten or refused, never followed at
    the example's side alone: onnxruntime matches eager PyTorch on both sides of ``n >= 4``."""
    x = torch.randn(example, 3)
    name = next(iter(inspect.signature(model.forward).parameters))
    check_export(model, (x,), {name: {0: Dim("n")}}, sizes=SIDES)


_RUNS = '''
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] >= 4:
            x = x * 2
        return x + 1
'''


def _loaded_then_edited(tmp_path, name):
    """A model imported from a file, the file then edited so its branch reads layout-only."""
    from module_files import edit_after_import, import_file

    path = tmp_path / f"{name}.py"
    path.write_text(_RUNS)
    module = import_file(path, name)
    edit_after_import(path, _RUNS.replace("x * 2", "x.contiguous()"))
    return module.Model(), path


def _compiled_under_the_name_of(path):
    namespace = {}
    exec(compile(_RUNS, str(path), "exec"), namespace)
    return namespace["Model"]()


@pytest.mark.parametrize("how", ["edited after import", "compiled under a file's name"])
def test_the_file_read_must_be_the_code_running(tmp_path, how):
    model, path = _loaded_then_edited(tmp_path, f"edited_{how.split()[0]}")
    if how != "edited after import":
        model = _compiled_under_the_name_of(path)
    assert layout_only_if(f"{path}:7 in forward: if x.shape[0] >= 4:")  # the file alone reads layout-only
    with pytest.raises(onnxport.SpecializationError, match=r"n <= 3"):
        onnxport.to_onnx(model, (torch.randn(2, 3),), dynamic_shapes={"x": {0: Dim("n")}}, rewrite_control_flow=False)
