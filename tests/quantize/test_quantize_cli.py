"""``onnxport export --quantize MODE``: the file written is the quantized model, the report its
accuracy against eager PyTorch's float model (the CNN of ``benchmarks/trained.py``, trained on
synthetic shapes)."""

import json

import onnx

from onnxport.cli import main
from trained_models import TRAINED


def test_export_quantize_writes_the_quantized_model_and_its_accuracy(tmp_path, capsys):
    out, report = tmp_path / "cnn.onnx", tmp_path / "r.json"
    code = main(["export", f"{TRAINED}:shapes_cnn", "--input", "x: float32[batch, 1, 16, 16]", "-o", str(out),
                 "--quantize", "int8-static", "--keep-float", "features.0", "--report", str(report)])
    captured = capsys.readouterr()
    assert code == 0, captured
    ops = {n.op_type for n in onnx.load(out).graph.node}
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    data = json.loads(report.read_text())
    assert data["ok"] and data["outputs"]["output"]["kind"] == "classes"
    assert data["outputs"]["output"]["top1"] >= data["tolerance"]["top1"] == 0.99
    assert "features.0.weight (user list)" in data["quantization"]
    assert "top-1 agreement" in captured.out and "quantized=int8-static" in captured.out


def test_keep_float_without_quantize_is_a_user_error(tmp_path, capsys):
    code = main(["export", f"{TRAINED}:shapes_cnn", "--input", "x: float32[batch, 1, 16, 16]", "-o",
                 str(tmp_path / "m.onnx"), "--keep-float", "hidden"])
    assert code == 2 and "--keep-float is for --quantize" in capsys.readouterr().err
    assert not (tmp_path / "m.onnx").exists()
