"""Capture: dynamic_shapes forms, nested and keyword inputs, output naming, specialization errors."""

import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export


class Nested(torch.nn.Module):
    def forward(self, x, pair, d, *, scale):
        a, b = pair
        return {"sum": x + a * scale, "prod": b * d["w"]}


def _nested_args():
    x = torch.randn(2, 3)
    return (x, (torch.randn(2, 3), torch.randn(2, 3)), {"w": torch.randn(2, 3)}), {"scale": torch.tensor(2.0)}


@pytest.mark.parametrize("form", ["strings", "dims", "tuple", "auto"])
def test_dynamic_shapes_forms_on_nested_inputs(form):
    args, kwargs = _nested_args()
    B = Dim("batch")
    spec = {
        "strings": {"x": {0: "batch"}, "pair": ({0: "batch"}, {0: "batch"}), "d": {"w": {0: "batch"}}, "scale": None},
        "dims": {"x": {0: B}, "pair": ({0: B}, {0: B}), "d": {"w": {0: B}}, "scale": None},
        "tuple": ({0: B}, ({0: B}, [B, None]), {"w": {0: B}}, None),
        "auto": {"x": {0: Dim.AUTO}, "pair": ({0: Dim.AUTO}, {0: Dim.AUTO}), "d": {"w": {0: Dim.AUTO}}, "scale": None},
    }[form]
    name = "x_dim0" if form == "auto" else "batch"
    other = "pair_1_dim0" if form == "auto" else "batch"  # Dim.AUTO: torch keeps unrelated axes apart
    r = check_export(Nested(), args, spec, kwargs=kwargs,
                     expect_inputs={"x": [name, 3], "pair_0": [name, 3], "d_w": [other, 3], "scale": []},
                     expect_outputs={"sum": [name, 3], "prod": [other, 3]})
    assert [v.name for v in r.model.graph.inputs] == ["x", "pair_0", "pair_1", "d_w", "scale"]


def test_exported_program_is_accepted():
    args, kwargs = _nested_args()
    B = Dim("batch")
    ep = torch.export.export(Nested(), args, kwargs,
                             dynamic_shapes={"x": {0: B}, "pair": ({0: B}, {0: B}), "d": {"w": {0: B}}, "scale": None})
    r = onnxport.to_onnx(ep)
    assert r.validate().ok
    assert [v.name for v in r.model.graph.outputs] == ["sum", "prod"]
    assert [str(d) for d in r.model.graph.inputs[0].shape] == ["batch", "3"]  # the Dim's name, kept by torch


class Multi(torch.nn.Module):
    def forward(self, x):
        return x + 1, [x * 2, x - 1]


def test_output_names_flatten_and_override():
    r = onnxport.to_onnx(Multi(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "n"}})
    assert [v.name for v in r.model.graph.outputs] == ["output_0", "output_1_0", "output_1_1"]
    r = onnxport.to_onnx(Multi(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "n"}},
                         input_names=["inp"], output_names=["a", "b", "c"])
    assert [v.name for v in r.model.graph.inputs] == ["inp"]
    assert [v.name for v in r.model.graph.outputs] == ["a", "b", "c"]
    assert [str(d) for d in r.model.graph.inputs[0].shape] == ["n", "3"]
    assert r.validate().ok


def test_output_that_is_an_input_or_repeated_gets_its_own_value():
    class Alias(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            return x, y, y

    r = check_export(Alias(), (torch.randn(3, 2),), {"x": {0: "n"}})
    assert len({v.name for v in r.model.graph.outputs}) == 3


class Loop(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty(x.shape[0], y.shape[0])
        for i in range(x.shape[0]):
            out[i, :] = ((y - x[i:i + 1]) ** 2).sum(1).sqrt()
        return out


@pytest.mark.parametrize("declare", ["name", "dynamic"])
def test_specialization_error_names_input_axis_dim_and_line(declare):
    x_dim = "x_rows" if declare == "name" else Dim.DYNAMIC
    with pytest.raises(onnxport.SpecializationError) as info:
        onnxport.to_onnx(Loop(), (torch.randn(3, 4), torch.randn(5, 4)),
                         dynamic_shapes={"x": {0: x_dim}, "y": {0: "y_rows"}}, rewrite_control_flow=False)
    e = info.value
    text = str(e)
    assert "'x'" in text and "axis 0" in text and "constant 3" in text
    assert ("x_rows" in text) == (declare == "name")
    assert e.where is not None and "test_capture.py" in e.where and "range(x.shape[0])" in e.where
    assert "scan" in e.hint


def test_a_dynamic_axis_meeting_a_static_one_names_that_axis_in_the_fix():
    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    with pytest.raises(onnxport.SpecializationError) as info:
        onnxport.to_onnx(Add(), (torch.randn(2, 4), torch.randn(2, 4)), dynamic_shapes={"x": {1: "t"}, "y": None})
    assert "axis 1 of 'y'" in info.value.hint and "same name 't'" in info.value.hint
    assert "return x + y" in info.value.where
    check_export(Add(), (torch.randn(2, 4), torch.randn(2, 4)), {"x": {1: "t"}, "y": {1: "t"}},
                 expect_inputs={"x": [2, "t"], "y": [2, "t"]})


def test_example_size_one_on_dynamic_axis_stays_dynamic():
    check_export(Multi(), (torch.randn(1, 3),), {"x": {0: "n"}}, expect_inputs={"x": ["n", 3]},
                 sizes=[{"n": 2}, {"n": 9}])


@pytest.mark.parametrize("spec, match", [
    ({"z": {0: "n"}}, "names \\['z'\\]"),
    ({"x": {5: "n"}}, "axis 5"),
    ({"x": {0: "2*n"}}, "not a valid identifier"),
    (({0: "n"}, {0: "n"}), "2 entries"),
])
def test_bad_dynamic_shapes(spec, match):
    with pytest.raises(onnxport.DynamicShapesError, match=match):
        onnxport.to_onnx(Multi(), (torch.randn(2, 3),), dynamic_shapes=spec)


def test_forward_that_raises_is_a_capture_error_with_cause():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return x @ torch.ones(7, 7)

    with pytest.raises(onnxport.CaptureError) as info:
        onnxport.to_onnx(Bad(), (torch.randn(2, 3),))
    assert info.value.__cause__ is not None
    assert "test_capture.py" in (info.value.where or "")


def test_a_long_torch_message_is_capped_and_kept_whole_in_the_cause():
    long = "Eq(" + " + ".join(f"s{i}*s{i + 1}" for i in range(600)) + ", 0)"  # a guard as sympy prints it

    class Guarded(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError(f"Could not guard on data-dependent expression {long}")

    with pytest.raises(onnxport.CaptureError) as info:
        onnxport.to_onnx(Guarded(), (torch.randn(2, 3),))
    assert len(str(info.value).splitlines()[0]) < 600 and "characters; the whole message" in str(info.value)
    assert long in str(info.value.__cause__)


def test_unsupported_op_names_overload_line_and_fix():
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.special.airy_ai(x)

    with pytest.raises(onnxport.UnsupportedOpError) as info:
        onnxport.to_onnx(Odd(), (torch.randn(2, 3),))
    text = str(info.value)
    assert "aten.special_airy_ai" in text and "test_capture.py" in text and "translates" in text


def test_user_registered_translation_is_used():
    from onnxport.translate.registry import override

    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.special.airy_ai(x)

    def fake(ctx, x):  # a wrong translation, to show the override is taken and validation catches it
        return ctx.op.Cos(x)

    with override({torch.ops.aten.special_airy_ai.default: fake}):
        r = onnxport.to_onnx(Odd(), (torch.randn(2, 3),))
    assert any(n.op_type == "Cos" for n in r.model.graph)
    assert not r.validate().ok


def test_dynamic_shapes_with_an_exported_program_is_refused():
    ep = torch.export.export(Multi(), (torch.randn(3, 4),))
    with pytest.raises(onnxport.DynamicShapesError, match="ExportedProgram"):
        onnxport.to_onnx(ep, dynamic_shapes={"x": {0: "rows"}})


def test_one_name_on_axes_of_different_example_sizes():
    class Two(torch.nn.Module):
        def forward(self, x, y):
            return x.sum() + y.sum()

    with pytest.raises(onnxport.DynamicShapesError, match="one name is one size"):
        onnxport.to_onnx(Two(), (torch.randn(3, 4), torch.randn(2, 5)), dynamic_shapes={"x": {0: "n"}, "y": {1: "n"}})


def test_custom_domain_of_a_user_translation_is_imported():
    from onnxport.translate.registry import override

    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.special.airy_ai(x) + 1

    with override({torch.ops.aten.special_airy_ai.default: lambda ctx, x: ctx.op.BesselJ0(x, _domain="my.domain")}):
        r = onnxport.to_onnx(Odd(), (torch.randn(2, 3),))
    assert r.model_proto.opset_import and {o.domain: o.version for o in r.model_proto.opset_import}["my.domain"] == 1
    import onnx

    onnx.checker.check_model(r.model_proto)  # the domain is declared (the op itself is the user's)


def test_side_effect_tokens_are_dropped():
    """torch.linalg.inv decomposes into linalg_inv_ex plus an error check run with an effect token."""
    import numpy as np

    from onnxport.translate.registry import override

    class Inv(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.inv(x) + 1

    def inv_ex(ctx, x, check_errors=False):  # onnxruntime's contrib Inverse, for the test
        return ctx.op.Inverse(x, _domain="com.microsoft"), ctx.const(np.array(0, dtype=np.int32))

    x = torch.randn(3, 3) + 3 * torch.eye(3)
    with pytest.raises(onnxport.UnsupportedOpError, match="linalg_inv_ex"):
        onnxport.to_onnx(Inv(), (x,))
    with override({torch.ops.aten.linalg_inv_ex.default: inv_ex}):
        r = onnxport.to_onnx(Inv(), (x,))
    assert r.validate(sizes=[]).ok


def test_opset_outside_the_supported_range():
    for opset in (17, 99):
        with pytest.raises(onnxport.ExportError, match=f"opset {opset}"):
            onnxport.to_onnx(Multi(), (torch.randn(2, 3),), opset=opset)


def test_training_mode_is_warned_about():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5)).train()
    with pytest.warns(UserWarning, match="training mode") as caught:
        onnxport.to_onnx(model, (torch.randn(2, 3),))
    assert any("dropout" in str(w.message) for w in caught)


def test_training_mode_without_training_behaviour_is_not_warned_about():
    import warnings

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()).train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onnxport.to_onnx(model, (torch.randn(2, 3),))
    assert not [w for w in caught if "training mode" in str(w.message)]


def test_scan_with_dim_says_which_call_takes_it():
    class Seed(torch.nn.Module):
        def forward(self, x, y):
            def combine_fn(y, xi):
                return [y.clone(), ((y - xi.reshape(1, -1)) ** 2).sum(1)]

            return torch.ops.higher_order.scan(combine_fn, [y], [x], dim=0, reverse=False, additional_inputs=[])[1]

    with pytest.raises(onnxport.CaptureError) as info:
        onnxport.to_onnx(Seed(), (torch.randn(3, 4), torch.randn(5, 4)))
    assert "torch._higher_order_ops.scan.scan" in info.value.hint and "dim=0" in info.value.where


def test_negative_axes_in_dynamic_shapes():
    check_export(Multi(), (torch.randn(2, 3),), {"x": {-1: "k", -2: "n"}}, expect_inputs={"x": ["n", "k"]})


def test_specialization_check_refuses_a_declared_axis_that_came_out_constant():
    """The last check of capture, run on a program torch.export let through with a declared axis
    constant (torch 2.13 raises first in the cases known; the check stays as the safety net)."""
    from onnxport.capture.dynamic_shapes import DeclaredDim
    from onnxport.capture.guards import Specialization
    from onnxport.capture.state import CaptureState, Request, Traced
    from onnxport.capture.steps import CheckSpecialization

    class Rows(torch.nn.Module):
        def forward(self, x):
            return x * 2

    x = torch.randn(3, 4)
    program = torch.export.export(Rows(), (x,))  # every axis static
    records = (Specialization(("L['x'].size()[0]",), 3, "model.py:7 in forward: for i in range(x.shape[0]):"),)

    def state(declared):
        request = Request(Rows(), (x,), {}, None, top=[("x", x)], declared=declared, names=["x"])
        return CaptureState(request, trace=Traced(program, records=records))

    with pytest.raises(onnxport.SpecializationError) as info:
        CheckSpecialization()(state([DeclaredDim("x", 0, "rows", True)]))
    assert "'rows'" in str(info.value) and "constant 3" in str(info.value)
    assert info.value.where == records[0].where
    assert CheckSpecialization()(state([DeclaredDim("x", 0, "x_dim0", False, "auto")])).why
