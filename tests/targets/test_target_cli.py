"""``onnxport export TARGET --target portable``: the file written loads in OpenVINO and is right there
(``onnxport validate --runtime openvino`` says so too)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from onnxport.cli import main
from ovload import compile_in_openvino

TARGET = '''
import torch


class Distances(torch.nn.Module):
    def forward(self, x, y):
        def combine_fn(y, xi):
            return [y.clone(), torch.sqrt(((y - xi.reshape(1, -1)) ** 2).sum(1))]

        _, out = torch.ops.higher_order.scan(combine_fn, [y], [x], additional_inputs=[])
        return out


def build():
    return Distances()


def example_inputs():
    return (torch.randn(3, 4), torch.randn(5, 4)), {"x": {0: "x_rows", 1: "dim"}, "y": {0: "y_rows", 1: "dim"}}
'''


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_export_with_target_portable_loads_in_openvino(tmp_path, openvino, target, capsys):
    (tmp_path / "target.py").write_text(TARGET)
    out = tmp_path / "m.onnx"
    assert main(["export", f"{tmp_path / 'target.py'}:build", "--target", target, "-o", str(out), "--quiet"]) == 0
    proto = onnx.load(str(out))
    if target == "onnxruntime":  # the default keeps its local functions, which OpenVINO cannot convert
        assert proto.functions
        with pytest.raises(RuntimeError, match="onnxport"):
            compile_in_openvino(openvino, proto)
        return
    assert not proto.functions
    assert {p.key: p.value for p in proto.metadata_props}["onnxport.target"] == "portable"
    compiled = compile_in_openvino(openvino, proto)
    x, y = torch.randn(7, 5), torch.randn(2, 5)
    (got,) = compiled([x.numpy(), y.numpy()]).values()
    np.testing.assert_allclose(got, torch.cdist(x.double(), y.double()).numpy(), rtol=1e-5, atol=1e-5)
    # onnxport validate runs the file on the runtime asked, against the target in eager PyTorch
    assert main(["validate", str(out), f"{tmp_path / 'target.py'}:build", "--runtime", "openvino"]) == 0
    assert "ONNX model run by OpenVINO" in capsys.readouterr().out
