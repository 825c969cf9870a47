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


CONFIG = '''
target = "{target}"
[inputs.x]
dtype = "float32"
dims = ["x_rows", "dim"]
[inputs.y]
dtype = "float32"
dims = ["y_rows", "dim"]
[outputs.distances]
dtype = "float32"
dims = ["x_rows", "y_rows"]
[export]
target = "{runtime}"
'''


@pytest.mark.parametrize("flag", [[], ["--target", "onnxruntime"]])
def test_the_configs_export_target_is_the_runtime_unless_the_command_says(tmp_path, flag):
    (tmp_path / "target.py").write_text(TARGET)
    config, out = tmp_path / "export.toml", tmp_path / "m.onnx"
    config.write_text(CONFIG.format(target=f"{tmp_path / 'target.py'}:build", runtime="portable"))
    assert main(["export", "-c", str(config), *flag, "-o", str(out), "--quiet"]) == 0
    proto = onnx.load(str(out))
    runtime = flag[-1] if flag else "portable"
    assert {p.key: p.value for p in proto.metadata_props}.get("onnxport.target", "onnxruntime") == runtime
    assert bool(proto.functions) == (runtime == "onnxruntime")
    assert [i.name for i in proto.graph.input] == ["x", "y"]


def test_an_unknown_export_target_in_the_config_is_a_config_error(tmp_path, capsys):
    (tmp_path / "target.py").write_text(TARGET)
    config, out = tmp_path / "export.toml", tmp_path / "m.onnx"
    config.write_text(CONFIG.format(target=f"{tmp_path / 'target.py'}:build", runtime="tensorrt"))
    assert main(["export", "-c", str(config), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "[export] target 'tensorrt' is not a runtime target" in err and "portable" in err
    assert not out.exists()
