"""Every form of ``dynamic_shapes`` torch.export's documentation lists is taken as it is: by
parameter name or in argument order, per-axis dicts or lists, ``None`` and int leaves,
``Dim.STATIC`` / ``Dim.AUTO`` / ``Dim.DYNAMIC``, derived dims, nested inputs, ``*args`` as one tuple,
``**kwargs`` as one dict, ``torch.export.dims``, ``ShapesCollection`` and ``AdditionalInputs``.
Each export is compared with eager PyTorch through onnxruntime at other sizes, and its input dims
named as declared."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export


class Pair(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + y


class Varargs(torch.nn.Module):
    """A decoder-like call: ``forward(input_ids, attention_mask, *past)``."""

    def forward(self, ids, mask, *past):
        out = ids * mask
        for p in past:
            out = out + p.sum(-1)
        return out


class Keywords(torch.nn.Module):
    def forward(self, x, **inputs):
        return x + inputs["a"] * inputs["b"]


class Nested(torch.nn.Module):
    def forward(self, batch):
        return batch["x"] + batch["pair"][0] * batch["pair"][1]


class Shifted(torch.nn.Module):
    def forward(self, x, y):
        return x[1:] + y


def dims(result: onnxport.ExportResult) -> dict[str, list]:
    return {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in result.model.graph.inputs}


x, y = torch.randn(3, 4), torch.randn(3, 4)
batch, feat = Dim("batch"), Dim("feat")


@pytest.mark.parametrize("spec", [
    {"x": {0: batch, 1: feat}, "y": {0: batch, 1: feat}},            # dict by parameter name
    ({0: batch, 1: feat}, {0: batch, 1: feat}),                        # tuple in argument order
    [(batch, feat), [batch, feat]],                                    # per-axis tuples and lists
    ({0: "batch", 1: "feat"}, {0: "batch", 1: "feat"}),                # plain strings as names
], ids=["by-name", "by-position", "per-axis-lists", "strings"])
def test_named_and_positional_forms(spec):
    result = check_export(Pair(), (x, y), spec)
    assert dims(result) == {"x": ["batch", "feat"], "y": ["batch", "feat"]}


def test_none_int_and_static_leaves():
    result = check_export(Pair(), (x, y), {"x": {0: batch, 1: 4}, "y": (batch, Dim.STATIC)})
    assert dims(result) == {"x": ["batch", 4], "y": ["batch", 4]}
    result = check_export(Pair(), (x, y[:1]), {"x": {0: batch}, "y": None})
    assert dims(result) == {"x": ["batch", 4], "y": [1, 4]}


def test_auto_and_dynamic():
    result = check_export(Pair(), (x, y), {"x": {0: Dim.DYNAMIC, 1: Dim.AUTO}, "y": {0: Dim.DYNAMIC, 1: Dim.AUTO}})
    shapes = dims(result)
    assert isinstance(shapes["x"][0], str) and shapes["x"][0] == shapes["y"][0]


def test_other_axes_auto_keeps_a_broadcast_axis_of_one_static():
    rows, one = torch.randn(4, 3, 5), torch.randn(1, 3, 5)
    result = check_export(Pair(), (rows, one), {"x": {0: "batch"}}, other_axes="auto")
    assert dims(result) == {"x": ["batch", "x_dim1", "x_dim2"], "y": [1, "x_dim1", "x_dim2"]}
    assert result.constraints == []


class Projection(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 5))

    def forward(self, x):
        return x @ self.weight


def test_an_auto_axis_the_model_fixes_is_static_without_a_constraint():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no adopted constraint, no deprecation
        result = check_export(Projection(), (x,), {"x": {0: Dim.AUTO, 1: Dim.AUTO}})
    assert dims(result) == {"x": ["x_dim0", 4]} and result.constraints == []
    with pytest.raises(onnxport.SpecializationError, match="axis 1 of input 'x'"):
        onnxport.to_onnx(Projection(), (x,), dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.DYNAMIC}})


def test_derived_dim():
    n = Dim("n", min=2)
    result = check_export(Shifted(), (torch.randn(5, 2), torch.randn(4, 2)), ({0: n + 1}, {0: n}))
    shapes = dims(result)
    assert shapes["y"] == ["n", 2]
    assert shapes["x"] == ["n + 1", 2]


def test_two_dim_objects_of_one_name_are_one_size_with_the_range_given():
    rows = Dim("rows", min=2, max=64)
    result = check_export(Pair(), (x, y), {"x": {0: rows}, "y": {0: Dim("rows")}})
    assert dims(result) == {"x": ["rows", 4], "y": ["rows", 4]}
    bounds = [g for g in result.captured.variables.values() if g.name == "rows"]
    assert [(v.lo, v.hi) for v in bounds] == [(2, 64)]
    with pytest.raises(onnxport.DynamicShapesError, match=r"(?s)'rows' is declared with two ranges.*same Dim object"):
        onnxport.to_onnx(Pair(), (x, y), dynamic_shapes={"x": {0: rows}, "y": {0: Dim("rows", min=3)}})


def test_dims_helper():
    b, f = torch.export.dims("b", "f")
    result = check_export(Pair(), (x, y), ({0: b, 1: f}, {0: b, 1: f}))
    assert dims(result) == {"x": ["b", "f"], "y": ["b", "f"]}


def test_nested_input():
    inputs = {"x": torch.randn(3, 4), "pair": [torch.randn(3, 4), torch.randn(3, 4)]}
    spec = {"batch": {"x": {0: batch}, "pair": [{0: batch}, {0: batch}]}}
    result = check_export(Nested(), (inputs,), spec)
    assert all(shape[0] == "batch" for shape in dims(result).values())


ids, mask = torch.randn(2, 5), torch.randn(2, 5)
past = (torch.randn(2, 5, 3), torch.randn(2, 5, 3))
seq = Dim("seq")
PER_TOKEN = {0: batch, 1: seq}


@pytest.mark.parametrize("spec", [
    (PER_TOKEN, PER_TOKEN, (PER_TOKEN, PER_TOKEN)),                    # torch.export's form: *past one tuple
    {"ids": PER_TOKEN, "mask": PER_TOKEN, "past": (PER_TOKEN, PER_TOKEN)},
    (PER_TOKEN, PER_TOKEN, PER_TOKEN, PER_TOKEN),                      # one entry per input
], ids=["tuple", "dict", "flat"])
def test_varargs(spec):
    result = check_export(Varargs(), (ids, mask) + past, spec)
    assert dims(result) == {"ids": ["batch", "seq"], "mask": ["batch", "seq"],
                            "past_0": ["batch", "seq", 3], "past_1": ["batch", "seq", 3]}


def test_varargs_entry_count_is_checked():
    with pytest.raises(onnxport.DynamicShapesError, match=r"\*past 1 entries but the call passes 2"):
        onnxport.to_onnx(Varargs(), (ids, mask) + past, dynamic_shapes=(PER_TOKEN, PER_TOKEN, (PER_TOKEN,)))


@pytest.mark.parametrize("spec", [
    {"x": {0: batch}, "inputs": {"a": {0: batch}, "b": {0: batch}}},  # **inputs as one dict
    ({0: batch}, {"a": {0: batch}, "b": {0: batch}}),
    {"x": {0: batch}, "a": {0: batch}, "b": {0: batch}},                # each keyword by its key
], ids=["dict", "tuple", "by-key"])
def test_kwargs(spec):
    result = check_export(Keywords(), (x,), spec, kwargs={"a": y, "b": y})
    assert dims(result) == {"x": ["batch", 4], "a": ["batch", 4], "b": ["batch", 4]}


def test_one_tensor_passed_twice_is_two_inputs():
    result = check_export(Keywords(), (x,), {"x": {0: batch}, "a": {0: batch}, "b": {0: batch}},
                          kwargs={"a": y, "b": y})
    assert [n.op_type for n in result.model.graph][:1] == ["Mul"]
    assert [v.name for v in next(iter(result.model.graph)).inputs] == ["a", "b"]


def test_kwargs_unknown_key():
    with pytest.raises(onnxport.DynamicShapesError, match=r"\*\*inputs the keys \['c'\]"):
        onnxport.to_onnx(Keywords(), (x,), {"a": y, "b": y},
                         dynamic_shapes={"x": {0: batch}, "inputs": {"c": {0: batch}}})


def test_shapes_collection():
    spec = torch.export.ShapesCollection()
    spec[x] = {0: batch}
    spec[y] = {0: batch}
    result = check_export(Pair(), (x, y), spec)
    assert dims(result) == {"x": ["batch", 4], "y": ["batch", 4]}


def test_additional_inputs():
    if not hasattr(torch.export, "AdditionalInputs"):
        pytest.skip("this torch has no torch.export.AdditionalInputs")
    spec = torch.export.AdditionalInputs()
    spec.add((torch.randn(5, 4), torch.randn(5, 4)))
    result = check_export(Pair(), (x, y), spec)
    shapes = dims(result)
    assert isinstance(shapes["x"][0], str) and shapes["x"][1] == 4


@pytest.mark.parametrize("spec,match", [
    ({"x": {0: Dim("q", min=5, max=20)}, "y": {0: Dim("q", min=5, max=20)}},
     r"declared in \[5, 20\], but the example's size is 3"),
    ({"x": {0: 5}, "y": None}, r"the static size 5, but the example's is 3"),
    ({"x": {0: 3.5}, "y": None}, r"3.5, which is not a dimension"),
], ids=["outside-range", "other-static-size", "not-a-dimension"])
def test_a_value_that_does_not_fit_the_example_is_a_dynamic_shapes_error(spec, match):
    with pytest.raises(onnxport.DynamicShapesError, match=match):
        onnxport.to_onnx(Pair(), (x, y), dynamic_shapes=spec)


def test_varargs_and_kwargs_of_another_structure_are_named():
    with pytest.raises(onnxport.DynamicShapesError,
                       match=r"gives \*past .* it takes a tuple with one entry per argument"):
        onnxport.to_onnx(Varargs(), (ids, mask) + past, dynamic_shapes={"ids": PER_TOKEN, "mask": PER_TOKEN,
                                                                           "past": PER_TOKEN})
    with pytest.raises(onnxport.DynamicShapesError, match=r"gives \*\*inputs .* it takes a dict keyed by the keywords"):
        onnxport.to_onnx(Keywords(), (x,), {"a": y, "b": y}, dynamic_shapes={"x": {0: batch}, "inputs": ({0: batch},)})


class ArgsAndKwargs(torch.nn.Module):
    def forward(self, *args, **kwargs):
        return args[0] + args[1] * kwargs["z"]


class Mixed(torch.nn.Module):
    """ExportDB's fn_with_kwargs: a tuple input, *args, a keyword-only input and **kwargs."""

    def forward(self, pos0, tuple0, *myargs, mykw0, **mykwargs):
        out = pos0 * tuple0[0] * tuple0[1]
        for arg in myargs:
            out = out * arg
        return out * mykw0 * mykwargs["input0"] * mykwargs["input1"]


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
@pytest.mark.parametrize("spec", [
    {"args": ({0: batch}, {0: batch}), "kwargs": {"z": {0: batch}}},  # torch.export's form
    {"args_0": {0: batch}, "args_1": {0: batch}, "z": {0: batch}},      # one entry per input
    None,
], ids=["torch-form", "flat", "static"])
def test_forward_of_args_and_kwargs_is_captured(spec, strict):
    x3 = torch.randn(3, 4)
    result = check_export(ArgsAndKwargs(), (x3, x3 * 2), spec, kwargs={"z": x3 + 1}, strict=strict)
    assert list(dims(result)) == ["args_0", "args_1", "z"]
    assert dims(result)["z"] == (["batch", 4] if spec else [3, 4])


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
def test_a_tuple_input_beside_args_and_kwargs_is_captured(strict):
    v = [torch.randn(4) for _ in range(7)]
    check_export(Mixed(), (v[0], (v[1], v[2]), v[3], v[4]), None,
                 kwargs={"mykw0": v[5], "input0": v[6], "input1": v[0]}, strict=strict)


class BadArgs(torch.nn.Module):
    def forward(self, *args, **kwargs):
        return args[0] @ args[1] + kwargs["z"]  # [3, 4] @ [3, 4]: no matmul


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
def test_a_failure_in_a_forward_of_args_names_the_line_and_what_failed(strict):
    x3 = torch.randn(3, 4)
    with pytest.raises(onnxport.CaptureError) as info:
        onnxport.to_onnx(BadArgs(), (x3, x3), {"z": x3}, strict=strict)
    first, at = str(info.value).splitlines()[:2]
    assert "must have same reduction dim" in first and "too many positional" not in first
    assert at.startswith("  at ") and at.endswith('kwargs["z"]  # [3, 4] @ [3, 4]: no matmul')


def test_a_call_that_does_not_bind_names_the_forward():
    with pytest.raises(onnxport.CaptureError) as info:
        onnxport.to_onnx(Pair(), (x, y, y))
    assert "def forward(self, x, y)" in info.value.where
