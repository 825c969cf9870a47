"""A target's ``example_inputs()`` returning ``{"calls": [...]}``: ``export_target`` (``onnxport
export``) observes the model on those calls and exports with the dynamic shapes they show."""

from __future__ import annotations

import pytest

import onnxport

TARGET = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(8, 4, 3, padding=1)

    def forward(self, x, scale=None):
        return self.conv(x).relu() * (1.0 if scale is None else scale)


def build():
    torch.manual_seed(0)
    return Net().eval()


def example_inputs():
    return {"calls": [(torch.randn(2, 8, 20),), {"args": (torch.randn(3, 8, 33),)},
                      {"kwargs": {"x": torch.randn(4, 8, 12), "scale": 2.0}}]}
'''


def test_calls_give_the_example_and_the_dynamic_shapes(tmp_path):
    (tmp_path / "target.py").write_text(TARGET)
    result = onnxport.export_target(f"{tmp_path / 'target.py'}:build")
    inputs = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in result.model_proto.graph.input}
    assert inputs == {"x": ["batch", 8, "time"]}
    assert result.validation is not None and result.validation.ok, result.validation


def test_a_call_of_another_form_is_a_target_error(tmp_path):
    (tmp_path / "target.py").write_text(TARGET.replace('{"args": (torch.randn(3, 8, 33),)}', '"nope"'))
    with pytest.raises(onnxport.TargetError, match="call 1 is a str"):
        onnxport.export_target(f"{tmp_path / 'target.py'}:build")


def test_no_calls_is_a_target_error(tmp_path):
    start = TARGET.index('    return {"calls": [')
    (tmp_path / "target.py").write_text(TARGET[:start] + '    return {"calls": []}\n')
    with pytest.raises(onnxport.TargetError, match="'calls' must be a non-empty list of calls") as caught:
        onnxport.export_target(f"{tmp_path / 'target.py'}:build")
    assert "torch.randn" in str(caught.value)  # the fix shows a list of calls


def test_a_call_the_model_raises_on_is_a_target_error_naming_it(tmp_path):
    # the third call's 7 channels do not fit the convolution's 8
    (tmp_path / "target.py").write_text(TARGET.replace('"x": torch.randn(4, 8, 12)', '"x": torch.randn(4, 7, 12)'))
    with pytest.raises(onnxport.TargetError, match=r"the model raised on call 2 of example_inputs\(\)") as caught:
        onnxport.export_target(f"{tmp_path / 'target.py'}:build")
    assert "RuntimeError" in str(caught.value) and "give calls the model runs eagerly" in str(caught.value)
    assert isinstance(caught.value.__cause__, RuntimeError)
