"""Every case of ../shared/cases/bug_patterns.py: export, then match eager PyTorch on the example and
on every other input set; or refuse with an ExportError naming the cause and the user's line.

A refusal is accepted only for the cases listed in REFUSALS, each with the error class expected:
any other case must export and match everywhere.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

import onnxport
from shared_cases import SHARED, shared_cases_dir

# case name -> (ExportError subclass, why onnxport refuses it)
REFUSALS: dict[str, tuple[type, str]] = {}

NEEDS_REWRITE = {"K1", "K2"}


def _load_cases():
    path = shared_cases_dir() / "bug_patterns.py"
    spec = importlib.util.spec_from_file_location("bug_patterns", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bug_patterns"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _case_names():
    path = SHARED / "cases" / "bug_patterns.py"
    if not path.exists():
        return ["<missing>"]
    text = path.read_text()
    import re

    return re.findall(r'_c\("(\w+)"', text)


@pytest.mark.parametrize("name", _case_names())
def test_bug_pattern(name):
    cases = _load_cases()
    case = cases.get_case(name)
    data = case.factory()
    kwargs = {"rewrite_control_flow": True} if case.group in NEEDS_REWRITE else {}
    try:
        result = onnxport.to_onnx(data.model, data.args, dynamic_shapes=data.dynamic_shapes, **kwargs)
    except onnxport.ExportError as e:
        expected = REFUSALS.get(name)
        assert expected is not None, f"{name} refused but should export:\n{e}"
        assert isinstance(e, expected[0]), f"{name}: {type(e).__name__} instead of {expected[0].__name__}:\n{e}"
        assert e.where, f"{name}: the refusal does not name the user's line:\n{e}"
        return
    assert name not in REFUSALS, f"{name} now exports: remove it from REFUSALS"
    inputs = [args for _, args in data.other_inputs]
    report = result.validate(inputs=inputs, sizes=[])
    assert report.ok, f"{name} differs from eager PyTorch:\n{report}"
