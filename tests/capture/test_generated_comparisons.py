"""A size turned into a bool inside a method a library made, or in code with a pseudo file name, decides for
the code that called it.

``if Pad(w % 4, 0) == Pad(1, 0):`` compares in the ``__eq__`` that ``dataclasses`` generated, and a
``functools.total_ordering`` class compares in ``functools``: the condition ``w % 4 != 1`` is met there,
but the ``if`` is the calling code's (``errors.passes_through``). Code compiled under any pseudo file name
(``<generated>``, not only ``<string>``) is the user's or its package's, not Python's. An installed
package's files are the package's where its ``site-packages`` lies inside the standard library's directory
(conda, system and Docker Pythons). Each was silently wrong at ``w % 4 == 1`` before.
"""

import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import assert_right_at_widths, import_source

SOURCE = '''
import dataclasses
import functools

import torch


@dataclasses.dataclass
class Pad:
    left: int
    right: int


class DataclassEq(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if Pad(w % 4, 0) == Pad(1, 0):
            return x * 2
        return x + 1


@functools.total_ordering
class Rest:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return self.n == other.n

    def __lt__(self, other):
        return self.n < other.n


class TotalOrdering(torch.nn.Module):
    def forward(self, x):
        w = x.shape[1]
        if Rest(w % 4) <= Rest(1) and Rest(w % 4) > Rest(0):
            return x * 2
        return x + 1


_BRANCH = """
def residue_branch(x):
    w = x.shape[1]
    if w % 4 == 1:
        return x * 2
    return x + 1
"""
_namespace = {}
exec(compile(_BRANCH, "<generated>", "exec"), _namespace)


class ExecGenerated(torch.nn.Module):
    def forward(self, x):
        return _namespace["residue_branch"](x)
'''

MODELS = ["DataclassEq", "TotalOrdering", "ExecGenerated"]


def _module(tmp_path, monkeypatch, installed: bool):
    return import_source(tmp_path, monkeypatch, "generated_cmp", SOURCE, installed)


def _right_at_every_residue(model, example_w=16):
    result = onnxport.to_onnx(model, (torch.randn(2, example_w),), dynamic_shapes={"x": {1: Dim("w")}})
    assert_right_at_widths(result, model, range(1, 26))
    return result


@pytest.mark.parametrize("installed", [False, True], ids=["user", "package"])
@pytest.mark.parametrize("name", MODELS)
def test_a_generated_comparison_on_a_remainder_is_right_at_every_residue(tmp_path, monkeypatch, name, installed):
    _right_at_every_residue(getattr(_module(tmp_path, monkeypatch, installed), name)())


def test_a_generated_comparison_names_the_callers_line(tmp_path, monkeypatch):
    result = _right_at_every_residue(_module(tmp_path, monkeypatch, False).DataclassEq())
    wheres = [g.where for g in result.guards if "w % 4" in g.text]
    assert wheres and all("if Pad(w % 4, 0) == Pad(1, 0):" in w for w in wheres), wheres


def test_a_package_inside_the_standard_librarys_directory_is_a_package(tmp_path, monkeypatch):
    """A Python without a virtual environment keeps ``site-packages`` under its standard library's directory
    (``/opt/conda/lib/python3.11/site-packages``): the package's branch is the package's, judged on every
    residue class, not taken for the standard library's."""
    from onnxport import errors

    module = _module(tmp_path, monkeypatch, True)
    monkeypatch.setattr(errors, "_STDLIB", str(tmp_path))
    assert errors.is_internal_path(str(tmp_path / "argparse.py"))
    assert not errors.is_internal_path(module.__file__)
    _right_at_every_residue(module.ExecGenerated())
    _right_at_every_residue(module.DataclassEq())
