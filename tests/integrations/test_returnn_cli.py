"""``onnxport export-returnn``: RETURNN's demo-rf style (RF model) and demo-torch style (pure PyTorch
model) configs end to end, the exit codes, and what is refused; ``onnxport export --returnn-config``,
deprecated, still exports."""

from __future__ import annotations

import numpy as np
import onnx
import torch

from returnn_helpers import CONFIGS, DEMO_RF, DEMO_TORCH, run_onnx, save_checkpoint

from onnxport.cli import main
from onnxport.integrations.returnn_config import load_returnn_config
from onnxport.integrations.returnn_export import build_returnn_model

SIZES = ["--size", "batch=1,time=9", "--size", "batch=2,time=23", "--size", "batch=5,time=50",
         "--size", "batch=4,time=301"]


def _signature(path) -> list:
    m = onnx.load(str(path))
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    return [(v.name, dims(v)) for v in list(m.graph.input) + list(m.graph.output)]


def _eager(config, ckpt, inputs) -> dict:
    with torch.no_grad():
        return {k: v.numpy() for k, v in build_returnn_model(load_returnn_config(config), ckpt)(inputs).items()}


def _inputs(batch: int, time: int, features: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, time + 1, (batch,), generator=g, dtype=torch.int32)
    lengths[0] = time
    data = (torch.randn(batch, time, features, generator=g)
            * (torch.arange(time)[None, :, None] < lengths[:, None, None]))
    return {"data": data, "data:size1": lengths}


def test_demo_rf_config(tmp_path, capsys):
    ckpt, out = tmp_path / "epoch.001.pt", tmp_path / "demo_rf.onnx"
    save_checkpoint(DEMO_RF, ckpt, seed=3)
    assert main(["export-returnn", str(DEMO_RF), "--checkpoint", str(ckpt), "-o", str(out), *SIZES]) == 0
    text = capsys.readouterr().out
    assert "time=301" in text and " ok" in text, text
    assert _signature(out) == [("data", ["batch", "time", 9]), ("data:size1", ["batch"]),
                               ("output", ["batch", "time", 2]), ("output:size1", ["batch"])]
    weights = {i.name for i in onnx.load(str(out)).graph.initializer}
    assert weights == {f"model.layers.{i}.{p}" for i in range(3) for p in ("filter", "bias")}, weights
    inputs = _inputs(3, 17, 9, seed=1)
    got, want = run_onnx(out, inputs), _eager(DEMO_RF, ckpt, inputs)
    np.testing.assert_allclose(got["output"], want["output"], atol=1e-5, rtol=1e-4)
    np.testing.assert_array_equal(got["output:size1"], want["output:size1"])


def test_demo_torch_config_a_pure_pytorch_model(tmp_path, capsys):
    ckpt, out, html = tmp_path / "epoch.001.pt", tmp_path / "demo_torch.onnx", tmp_path / "report.html"
    save_checkpoint(DEMO_TORCH, ckpt, seed=4)
    assert main(["export-returnn", str(DEMO_TORCH), "--checkpoint", str(ckpt), "-o", str(out), *SIZES,
                 "--report-html", str(html)]) == 0
    assert "time=301" in capsys.readouterr().out
    page = html.read_text()  # the report: the command, the dims by name, the validation table's sizes
    assert "onnxport export-returnn" in page and "out_time" in page and "time=301" in page
    assert _signature(out) == [("data", ["batch", "time", 9]), ("data:size1", ["batch"]),
                               ("output", ["batch", "out_time", 2]), ("output:size1", ["batch"])]
    inputs = _inputs(2, 40, 9, seed=2)
    got, want = run_onnx(out, inputs), _eager(DEMO_TORCH, ckpt, inputs)
    np.testing.assert_allclose(got["output"], want["output"], atol=1e-5, rtol=1e-4)
    np.testing.assert_array_equal(got["output:size1"], inputs["data:size1"].numpy())


def test_validation_mismatch_exits_1_with_the_file_written(tmp_path, capsys):
    out = tmp_path / "demo_rf.onnx"
    assert main(["export-returnn", str(DEMO_RF), "-o", str(out), "--atol", "0", "--rtol", "0",
                 "--size", "batch=2,time=23", "--size", "batch=4,time=301"]) == 1
    assert "validation mismatch" in capsys.readouterr().err
    assert out.exists()


def _refused(capsys, out, *args, command: str = "export-returnn") -> str:
    assert main([command, *args, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "onnxport: error: " in err, err
    err = err[err.index("onnxport: error: "):]  # a short first line, then where and what to do
    assert len(err.splitlines()[0]) <= 220, err
    assert not out.exists()
    return err


def test_config_without_model_outputs(tmp_path, capsys):
    config, html = tmp_path / "no_outputs.py", tmp_path / "failed.html"
    config.write_text(DEMO_RF.read_text().replace("model_outputs = ", "declared_outputs = "))
    err = _refused(capsys, tmp_path / "m.onnx", str(config), "--report-html", str(html))
    assert "defines no model_outputs" in err and "fix:" in err
    assert "defines no model_outputs" in html.read_text()  # the failure's page


def test_forward_step_marking_another_output(tmp_path, capsys):
    config = tmp_path / "renamed.py"
    config.write_text(DEMO_RF.read_text().replace('model_outputs = {"output"', 'model_outputs = {"logits"'))
    err = _refused(capsys, tmp_path / "m.onnx", str(config))
    assert "logits" in err and "output" in err


def test_checkpoint_of_another_model(tmp_path, capsys):
    ckpt = tmp_path / "torch.pt"
    save_checkpoint(DEMO_TORCH, ckpt, seed=0)
    err = _refused(capsys, tmp_path / "m.onnx", str(DEMO_RF), "--checkpoint", str(ckpt))
    assert "does not fit the model" in err and "get_model" in err


def test_returnn_config_with_a_target(tmp_path, capsys):
    err = _refused(capsys, tmp_path / "m.onnx", "model.py:Net", "--returnn-config", str(DEMO_RF), command="export")
    assert "--returnn-config and TARGET" in err


def test_missing_config_file(tmp_path, capsys):
    err = _refused(capsys, tmp_path / "m.onnx", str(CONFIGS / "nowhere.py"))
    assert "does not exist" in err


def test_size_of_an_unknown_dim(tmp_path, capsys):
    err = _refused(capsys, tmp_path / "m.onnx", str(DEMO_RF), "--size", "frames=3")
    assert "frames" in err


def test_the_deprecated_returnn_config_option_still_exports_and_says_so(tmp_path, capsys):
    ckpt, out = tmp_path / "epoch.001.pt", tmp_path / "demo_rf.onnx"
    save_checkpoint(DEMO_RF, ckpt, seed=3)
    assert main(["export", "--returnn-config", str(DEMO_RF), "--checkpoint", str(ckpt), "-o", str(out), "--quiet",
                 "--no-validate"]) == 0
    err = capsys.readouterr().err
    assert "--returnn-config CONFIG is deprecated" in err and "onnxport export-returnn CONFIG" in err
    assert _signature(out)[0] == ("data", ["batch", "time", 9])
