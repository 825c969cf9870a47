"""``to_onnx(target=...)``: the names it takes, what the default leaves, what ``portable`` refuses,
and the target recorded in the model."""

from __future__ import annotations

import sys

import numpy as np
import onnx_ir as ir
import pytest
import torch

import onnxport
from onnxport.errors import RuntimeTargetError, ValidationError
from onnxport.targets import apply_target
from onnxport.translate.registry import override


class Inv(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.inv(x) + 1


def _contrib_inverse(ctx, x, check_errors=False):  # onnxruntime's contrib Inverse: no standard operator
    return ctx.op.Inverse(x, _domain="com.microsoft"), ctx.const(np.array(0, dtype=np.int32))


def test_unknown_target_is_refused_with_the_choices():
    with pytest.raises(RuntimeTargetError, match="'tensorrt' is not a runtime target") as caught:
        onnxport.to_onnx(torch.nn.ReLU(), (torch.randn(2, 3),), target="tensorrt")
    assert "portable" in str(caught.value) and "openvino" in str(caught.value)


def test_default_target_is_the_export_as_it_is():
    result = onnxport.to_onnx(torch.nn.ReLU(), (torch.randn(2, 3),))
    assert result.target == "onnxruntime"
    assert "onnxport.target" not in result.model.metadata_props


def test_portable_refuses_a_custom_domain_naming_the_line():
    x = torch.randn(3, 3) + 3 * torch.eye(3)
    with override({torch.ops.aten.linalg_inv_ex.default: _contrib_inverse}):
        assert onnxport.to_onnx(Inv(), (x,)).validate(sizes=[]).ok  # onnxruntime runs its contrib operator
        with pytest.raises(RuntimeTargetError, match="'com.microsoft' is no standard ONNX operator") as caught:
            onnxport.to_onnx(Inv(), (x,), target="portable")
    assert "test_targets.py" in (caught.value.where or "")


def test_target_is_recorded_and_timed():
    steps = []
    result = onnxport.to_onnx(torch.nn.ReLU(), (torch.randn(2, 3),), target="openvino",
                              on_step=lambda name, seconds: steps.append(name))
    assert result.target == "openvino" and result.model.metadata_props["onnxport.target"] == "openvino"
    assert steps[-1] == "target"


def test_validation_on_openvino_without_it_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    result = onnxport.to_onnx(torch.nn.ReLU(), (torch.randn(2, 3),), target="openvino")
    with pytest.raises(ValidationError, match="needs the openvino package") as caught:
        result.validate()  # the target's runtime: OpenVINO
    assert "onnxport[openvino]" in str(caught.value)
    assert result.validate(runtime="onnxruntime").ok


def test_quantized_validation_on_another_runtime_is_refused():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
    result = onnxport.to_onnx(model, (torch.randn(2, 8),)).quantize("int8", final_projection=False)
    with pytest.raises(ValidationError, match="quantized validation runs in onnxruntime only, not reference") as caught:
        result.validate(runtime="reference")
    assert "runtime='onnxruntime'" in caught.value.hint


def test_a_rewritten_model_the_checker_refuses_is_a_target_error():
    """``apply_target`` runs the ONNX checker last: a model it refuses (here a Relu given two inputs, which
    no rewrite mends) is a ``RuntimeTargetError`` quoting the checker and pointing to the default target."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x", "x"], ["y"])], "g", [x], [y])
    model = ir.serde.deserialize_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    with pytest.raises(RuntimeTargetError, match="rewritten for target 'portable' fails the ONNX checker") as caught:
        apply_target(model, "portable")
    assert "Relu" in str(caught.value) and "target='onnxruntime'" in str(caught.value)
