"""The rewrite of control flow reads a function's source file: where that file is not the code running
(edited after the module was imported, or other source compiled under its name with ``exec``), the
function is not rewritten (``rewrite/running_source.py``), and the export computes what eager PyTorch
computes, or is refused saying the file differs from the code running."""


import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import onnxport
from module_files import edit_after_import, import_file
from onnxport.rewrite import rewrite_module

RUNNING = '''
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] >= 4:
            x = x * 2
        return x + 1
'''
# the same lines, the branch changed: what a rewrite reading the file would compute instead
EDITED = RUNNING.replace("x = x * 2", "x = x - 30.0 + x.sum(0)")

SIZES = (2, 3, 4, 6)


def _imported_then_edited(tmp_path):
    path = tmp_path / "edited_after_import.py"
    path.write_text(RUNNING)
    module = import_file(path, f"edited_after_import_{id(tmp_path)}", register=True)
    edit_after_import(path, EDITED)
    return module.Model()


def _compiled_under_file_name(tmp_path):
    path = tmp_path / "compiled_by_exec.py"
    path.write_text(EDITED)  # the file on disk reads otherwise than the code compiled under its name
    names = {}
    exec(compile(RUNNING, str(path), "exec"), names)
    return names["Model"]()


def _check_against_eager_or_refused(model, example):
    try:
        result = onnxport.to_onnx(model, (torch.randn(example, 3),), dynamic_shapes={"x": {0: Dim("n")}})
    except onnxport.ExportError as e:
        assert "differs from the code running" in str(e), str(e)
        return
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    name = session.get_inputs()[0].name
    for n in SIZES:
        x = torch.randn(n, 3)
        expected = model(x.clone()).numpy()
        got = session.run(None, {name: x.numpy()})[0]
        np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=f"at n={n}")


@pytest.mark.filterwarnings("ignore:the trace of the model holds only")
@pytest.mark.parametrize("make", [_imported_then_edited, _compiled_under_file_name], ids=["edited", "exec"])
def test_export_computes_the_running_code(tmp_path, make):
    # at the example n = 2, the eager check of a rewrite (example, and other sizes) does not reach n >= 4,
    # where the edited file's side differs
    _check_against_eager_or_refused(make(tmp_path), 2)


@pytest.mark.parametrize("make", [_imported_then_edited, _compiled_under_file_name], ids=["edited", "exec"])
def test_rewrite_refuses_a_file_that_is_not_the_code_running(tmp_path, make):
    model = make(tmp_path)
    new = rewrite_module(model, (torch.randn(6, 3),), warn=False)
    assert not any(n.rewritten for n in new.onnxport_rewrite_notes)
    left = [n.detail for n in new.onnxport_rewrite_notes if not n.rewritten]
    assert any("differs from the code running" in d and "re-import" in d for d in left), left
    for n in SIZES:
        x = torch.randn(n, 3)
        torch.testing.assert_close(new(x), model(x))


def test_rewrite_still_takes_a_file_that_is_the_code_running(tmp_path):
    path = tmp_path / "as_imported.py"
    path.write_text(RUNNING)
    module = import_file(path, f"as_imported_{id(tmp_path)}", register=True)
    new = rewrite_module(module.Model(), (torch.randn(6, 3),), warn=False)
    assert any(n.rewritten for n in new.onnxport_rewrite_notes)


class _AssertingModel(torch.nn.Module):
    """Defined in this test module, whose asserts pytest rewrote as it imported it."""

    def forward(self, x):
        assert x.dim() == 2
        if x.shape[0] >= 4:
            x = x * 2
        return x + 1


def test_a_model_in_a_module_pytest_rewrote_is_the_code_running():
    """pytest compiled this module's asserts changed: compiled plainly its text differs from the code
    running, compiled with pytest's rewrite (``onnxport.library.pytest``) it is the same."""
    import linecache

    from onnxport.rewrite.running_source import runs_file, runs_source

    code = _AssertingModel.forward.__code__
    assert "@pytest_ar" in globals(), "this module is expected to be imported by pytest with its asserts rewritten"
    assert not runs_source(code, "".join(linecache.getlines(code.co_filename)))
    assert runs_file(code, globals())
