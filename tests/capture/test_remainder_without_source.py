"""A branch on a residue class in the user's code is never read as torch's choice among equivalent traces.

``if w % 4 == 1: return x * 2`` traced at ``w = 16`` leaves torch the condition ``w % 4 != 1``: a ``!=``,
the form torch's own "these sizes differ" assumptions take, which the capture keeps where no user's line
made it (the sizes stay, validation looks on both sides). In the user's code it is the model's branch, whose
sides may compute anything: it is adopted on trial and judged on each residue class
(``onnxport/remainder_sides.py``), or refused naming the line. Code compiled from a string (``exec``,
``python -c``, a piped script) is the user's code too, not torch's generated code: a branch there is the
user's branch.
"""


import sys

import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import assert_right_at_widths, import_source
from onnxport.errors import is_internal_frame, is_internal_path

SOURCE = '''
class ResidueBranch(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if w % 4 == 1:
            return x * 2
        return x + 1
'''


def _compiled_from_a_string():
    namespace = {"torch": torch}
    exec(compile(SOURCE, "<string>", "exec"), namespace)
    return namespace["ResidueBranch"]()


def _runs_right_or_is_refused(model, example_w):
    """The export at ``w = example_w`` matches eager PyTorch in onnxruntime at every residue modulo 4, or is
    refused; never silently wrong at ``w % 4 == 1``."""
    try:
        result = onnxport.to_onnx(model, (torch.randn(2, example_w),), dynamic_shapes={"x": {1: Dim("w")}})
    except onnxport.ExportError as error:
        assert "w % 4" in str(error), error
        return None
    torch.manual_seed(0)
    assert_right_at_widths(result, model, (16, 17, 18, 19, 41, 13))
    return result


@pytest.mark.parametrize("example_w", [16, 17])
def test_a_residue_branch_in_code_from_a_string_is_right_at_every_residue(example_w):
    result = _runs_right_or_is_refused(_compiled_from_a_string(), example_w)
    assert result is not None  # (a branch on a remainder is adopted on trial and judged per class)
    assert not result.constraints, result.constraints  # the classes' graphs joined under If


def test_code_compiled_from_a_string_is_the_users_unless_a_library_generated_it():
    import dataclasses

    namespace: dict = {}
    exec(compile("import sys\nframe = sys._getframe()", "<string>", "exec"), namespace)
    assert not is_internal_frame(namespace["frame"])
    generated = dataclasses.make_dataclass("Sizes", ["n"], namespace={"__module__": "torch.fx"})
    seen = []
    trace = sys.gettrace()
    sys.settrace(lambda frame, event, arg: seen.append(frame) if frame.f_code.co_name == "__init__" else None)
    try:
        generated(1)
    finally:
        sys.settrace(trace)
    assert seen and seen[0].f_code.co_filename == "<string>" and is_internal_frame(seen[0])
    assert is_internal_path("<eval_with_key>.3") and is_internal_path("<frozen importlib._bootstrap>")



@pytest.mark.parametrize("example_w", [16, 17])
def test_a_residue_branch_in_an_installed_package_is_right_at_every_residue(tmp_path, monkeypatch, example_w):
    """A package's branch on ``w % 4 == 1``, kept as torch's kind of ``!=`` condition where the example is
    not on its class (``w = 16``), has its other residue class traced too, the graphs joined under If: right
    at every residue, no constraint, no refusal."""
    import importlib

    package = tmp_path / "site-packages" / "residue_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import torch\n" + SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    module = importlib.import_module("residue_pkg")
    try:
        result = _runs_right_or_is_refused(module.ResidueBranch(), example_w)
    finally:
        sys.modules.pop("residue_pkg", None)
    assert result is not None and not result.constraints, result and result.constraints
    assert sum(n.op_type == "If" for n in result.model_proto.graph.node) == 1


FAR = '''
class FarResidueBranch(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if w % 4 == 1:
            if w >= 40:
                return x * 3
            return x * 2
        return x + 1
'''


def _package_model(tmp_path, monkeypatch, source, name):
    return getattr(import_source(tmp_path, monkeypatch, "far_residue_pkg", "import torch\n" + source), name)()


def test_a_package_residue_branch_whose_other_class_does_not_export_is_stated(tmp_path, monkeypatch):
    """The class ``w % 4 == 1`` does not export (its branch on ``w >= 40``): the example's ``w % 4 != 1`` is
    adopted and stated, not kept as torch's choice among equivalent traces; wrong nowhere in its range."""
    model = _package_model(tmp_path, monkeypatch, FAR, "FarResidueBranch")
    with pytest.warns(UserWarning, match=r"holds for .*w % 4.* only"):
        result = onnxport.to_onnx(model, (torch.randn(2, 16),), dynamic_shapes={"x": {1: Dim("w")}})
    assert [g.names for g in result.constraints] == [("w",)], result.constraints
    (constraint,) = result.constraints
    assert not constraint.holds({"w": 17}) and constraint.holds({"w": 16}) and constraint.holds({"w": 19})
    assert "an installed package's branch; not dropped: the export at w=17 adopts other constraints" in constraint.note
    _runs_right_or_is_refused(model, 16)
    with pytest.raises(onnxport.ValidationError, match=r"w % 4"):
        result.validate(sizes=[{"w": 17}])


def test_a_package_residue_branch_on_an_explicit_range_whose_other_class_does_not_export_is_refused(
        tmp_path, monkeypatch):
    model = _package_model(tmp_path, monkeypatch, FAR, "FarResidueBranch")
    with pytest.raises(onnxport.DynamicShapesError, match=r"(?s)w % 4.*the export at w=17 failed"):
        onnxport.to_onnx(model, (torch.randn(2, 16),), dynamic_shapes={"x": {1: Dim("w", min=2, max=100)}})


FLOOR = '''
class FloorParity(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if (w // 8) % 2 == 1:
            return x * 2
        return x + 1
'''


UNWRITTEN = '''
class UnwrittenRemainder(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if (w // 4) * 4 != w:
            return x * 2
        return x + 1
'''


@pytest.mark.parametrize("example_w", [17, 16])
def test_a_package_branch_on_a_remainder_written_with_floor_divisions_is_right_at_every_size(
        tmp_path, monkeypatch, example_w):
    """``(w // 4) * 4 != w`` takes no ``%``: its residue classes modulo 4 are exported all the same."""
    model = _package_model(tmp_path, monkeypatch, UNWRITTEN, "UnwrittenRemainder")
    result = onnxport.to_onnx(model, (torch.randn(2, example_w),), dynamic_shapes={"x": {1: Dim("w")}})
    assert_right_at_widths(result, model, range(1, 30))


@pytest.mark.parametrize("example_w", [16, 8])
def test_a_package_branch_on_a_remainder_of_a_floor_division_is_right_at_every_size(tmp_path, monkeypatch,
                                                                                    example_w):
    """``(w // 8) % 2`` repeats every 16 sizes: its classes are taken modulo 16, not 2 (where the class of
    w = 17 would have been judged at w = 17 alone, and the graph of w = 16 taken for w = 8 .. 15)."""
    model = _package_model(tmp_path, monkeypatch, FLOOR, "FloorParity")
    result = onnxport.to_onnx(model, (torch.randn(2, example_w),), dynamic_shapes={"x": {1: Dim("w")}})
    assert_right_at_widths(result, model, range(1, 50))


def test_a_directory_named_torch_outside_torch_is_not_torch(tmp_path, monkeypatch):
    """keras' ``backend/torch/``, a project's ``torch/`` folder: their files are the user's (or the package's),
    so a branch there on ``w % 4 == 1`` is judged on every residue class, not kept as torch's own condition."""
    import importlib.util

    import torch as torch_module

    from onnxport.errors import is_internal_path

    assert is_internal_path(torch_module.nn.functional.__file__) and is_internal_path(onnxport.__file__)
    folder = tmp_path / "project" / "backend" / "torch"
    folder.mkdir(parents=True)
    (folder / "ops.py").write_text("import torch\n" + SOURCE)
    assert not is_internal_path(str(folder / "ops.py"))
    spec = importlib.util.spec_from_file_location("backend_torch_ops", folder / "ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = _runs_right_or_is_refused(module.ResidueBranch(), 16)
    assert result is not None and not result.constraints


EXEC_BUILT = '''
_source = """
def residue_branch(x):
    w = x.shape[1]
    if w % 4 == 1:
        return x * 2
    return x + 1
"""
exec(compile(_source, "<string>", "exec"), globals())


class BuiltFromString(torch.nn.Module):
    def forward(self, x):
        return residue_branch(x)
'''


def test_a_package_function_built_with_exec_is_the_packages_code(tmp_path, monkeypatch):
    """An installed package's function built from a string (its globals the package's module) branches as
    the package's code; only the methods ``dataclasses`` generates for a package's class are the library's."""
    import importlib

    package = tmp_path / "site-packages" / "exec_built_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import torch\n" + EXEC_BUILT)
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    module = importlib.import_module("exec_built_pkg")
    monkeypatch.setitem(sys.modules, "exec_built_pkg", module)  # imported while exported, removed after
    result = _runs_right_or_is_refused(module.BuiltFromString(), 16)
    assert result is not None and not result.constraints
