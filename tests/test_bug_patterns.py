"""Every case of ../shared/cases/bug_patterns.py: export, then match eager PyTorch on the example and
on every other input set; or refuse with an ExportError naming the cause and the user's line.

A refusal is accepted only for the cases listed in REFUSALS, each with the error class expected:
any other case must export and match everywhere. A model whose Python ``if`` on a size would make
the export hold on one side only is refused by default with the ``if`` named, and must then export
with ``rewrite_control_flow=True``, correct on both sides. Cases whose other input sets vary an axis
their ``dynamic_shapes`` does not declare are exported with ``other_axes="auto"``.
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


def _varies_undeclared_axes(data) -> bool:
    """Some other input set changes an axis the case's dynamic_shapes does not declare."""
    spec = data.dynamic_shapes
    specs = list(spec.values()) if isinstance(spec, dict) else list(spec or [None] * len(data.args))
    for _, args in data.other_inputs:
        for a, b, s in zip(data.args, args, specs):
            declared = set(s) if isinstance(s, dict) else {i for i, d in enumerate(s or []) if d is not None}
            if hasattr(a, "shape") and any(a.shape[i] != b.shape[i] for i in range(a.dim()) if i not in declared):
                return True
    return False


def _branch_refusal(e: onnxport.ExportError) -> bool:
    return isinstance(e, onnxport.SpecializationError) and "branches on a size" in e.what


@pytest.mark.slow
@pytest.mark.parametrize("name", _case_names())
def test_bug_pattern(name):
    cases = _load_cases()
    case = cases.get_case(name)
    data = case.factory()
    kwargs = {"rewrite_control_flow": True} if case.group in NEEDS_REWRITE else {}
    if _varies_undeclared_axes(data):
        kwargs["other_axes"] = "auto"
    try:
        result = onnxport.to_onnx(data.model, data.args, dynamic_shapes=data.dynamic_shapes, **kwargs)
    except onnxport.ExportError as e:
        if _branch_refusal(e) and not kwargs.get("rewrite_control_flow"):
            assert e.where and " if " in f" {e.where.split(': ', 1)[-1]}", \
                f"{name}: the refusal does not name the if:\n{e}"
            result = onnxport.to_onnx(data.model, data.args, dynamic_shapes=data.dynamic_shapes,
                                      rewrite_control_flow=True, **kwargs)
            report = result.validate(inputs=[args for _, args in data.other_inputs], sizes=[])
            assert report.ok, f"{name} with rewrite_control_flow=True differs from eager PyTorch:\n{report}"
            return
        expected = REFUSALS.get(name)
        assert expected is not None, f"{name} refused but should export:\n{e}"
        assert isinstance(e, expected[0]), f"{name}: {type(e).__name__} instead of {expected[0].__name__}:\n{e}"
        assert e.where, f"{name}: the refusal does not name the user's line:\n{e}"
        return
    assert name not in REFUSALS, f"{name} now exports: remove it from REFUSALS"
    inputs = [args for _, args in data.other_inputs]
    report = result.validate(inputs=inputs, sizes=[])
    assert report.ok, f"{name} differs from eager PyTorch:\n{report}"
