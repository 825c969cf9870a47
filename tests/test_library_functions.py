"""``onnxport.library_functions.library_function``: the Python function under a library's wrappers."""

from __future__ import annotations

import functools
import importlib
import inspect
import types

import pytest

from onnxport.library_functions import library_function


def _scale(x, factor=2):
    return x * factor


def test_a_plain_function_is_itself():
    assert library_function(_scale) is _scale


def test_a_decorated_function_is_unwrapped():
    def decorator(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapped

    assert library_function(decorator(decorator(_scale))) is _scale


def test_a_callable_object_without_a_function_inside_is_itself():
    class Scale:
        def __call__(self, x):
            return x * 2

    obj = Scale()
    assert library_function(obj) is obj


@pytest.mark.parametrize("module_name,function", [
    ("transformers.models.mamba2.modeling_mamba2", "mamba2_chunk_scan"),
    ("transformers.models.jamba.modeling_jamba", "mamba_selective_scan"),
])
def test_transformers_kernel_hub_functions_are_found_under_the_kernels_module_form(module_name, function):
    pytest.importorskip("transformers")
    wrapped = getattr(importlib.import_module(module_name), function)
    assert not isinstance(wrapped, types.FunctionType)
    fn = library_function(wrapped)
    assert isinstance(fn, types.FunctionType) and fn.__name__ == function
    assert inspect.getsourcefile(fn).endswith(module_name.rsplit(".", 1)[1] + ".py")
    assert f"\ndef {function}(" in inspect.getsource(fn)
