"""Real CNNs with calibrated BatchNorm (torchvision resnet18, mobilenet_v3_small, efficientnet_b0,
timm convnext_atto): the right export passes every default set of validate(), judged against the
float64 reference; the export with one logit moved by 1% of the output's scale (through the
classifier's bias) fails, from Python and through ``onnxport validate MODEL.onnx target.py:build``."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest
import torch

import calibrated
import onnxport
from onnxport.verify.report import FLOAT64
from third_party import import_timm, import_torchvision

TARGET = Path(__file__).resolve().parents[1] / "calibrated.py"
# one torch thread in the command's process, as in the tests' own: the tests already fill the cores
# (two threads beside them spin in OpenMP's barriers: float64 convolutions 10x slower)
ONE_THREAD = dict(os.environ, OMP_NUM_THREADS="1")
NAMES = list(calibrated.CLASSIFIERS)


def _available(name: str) -> bool:
    return (import_timm() if name == "convnext_atto" else import_torchvision()) is not None


@pytest.fixture(scope="module", params=NAMES)
def exported(request):
    name = request.param
    if not _available(name):
        pytest.skip(f"{name}'s package is not installed")
    args, dynamic = calibrated.example_inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return name, onnxport.to_onnx(calibrated.build(name), args, dynamic_shapes=dynamic)


def moved_logit(result, name: str, fraction: float = 0.01):
    """``result`` with logit 0 moved by ``fraction`` of the example's output scale (the largest
    |logit|), through the classifier's bias initializer."""
    with torch.no_grad():
        scale = float(result.module(*result.example[0]).abs().max())
    model = ir.from_proto(result.model_proto)
    bias = model.graph.initializers[calibrated.CLASSIFIERS[name]]
    values = bias.const_value.numpy().copy()
    values[0] += fraction * scale
    bias.const_value = ir.tensor(values, name=bias.name)
    return result.replace(model=model)


def test_every_default_set_passes_against_the_float64_reference(exported):
    name, result = exported
    report = result.validate()
    assert report.ok, report
    compared = [c for c in report.checks if not c.rejected]
    kinds = {c.why.split(",")[0] for c in compared}
    assert {"the example", "sign-symmetric values", "exact zeros", "large values"} <= kinds
    assert any(c.inputs.startswith("sizes") for c in compared)
    judged = [c for c in compared if c.basis == FLOAT64]
    # convnext's output is exactly zero on zeros (zero biases): no scale there, the dtype tolerance judges it
    assert len(judged) >= len(compared) - (name == "convnext_atto"), report
    assert all(c.onnx_vs_float64 <= c.limit for c in judged)
    assert max(len(line) for line in str(report).splitlines()) <= 100


def test_one_logit_moved_by_a_hundredth_of_the_scale_fails(exported):
    name, result = exported
    report = moved_logit(result, name).validate()
    assert not report.ok
    failed = {c.inputs: c for c in report.checks if not c.ok and not c.rejected}
    assert "example" in failed and failed["example"].basis == FLOAT64, report
    assert failed["example"].onnx_vs_float64 > 0.009 and failed["example"].limit < 1e-3, report
    assert "FAIL" in str(report)


def test_one_logit_moved_fails_through_the_command_line(exported, tmp_path):
    name, result = exported
    path = moved_logit(result, name).save(tmp_path / f"{name}.onnx")
    proc = subprocess.run([sys.executable, "-m", "onnxport", "validate", path, f"{TARGET}:build",
                           "--model-arg", f"name={name!r}"], capture_output=True, text=True, timeout=600,
                          env=ONE_THREAD)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "MISMATCH" in proc.stdout and "FAIL" in proc.stdout


def test_the_right_file_passes_through_the_command_line(tmp_path):
    if not _available("mobilenet_v3_small"):
        pytest.skip("torchvision is not installed")
    args, dynamic = calibrated.example_inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = onnxport.to_onnx(calibrated.build("mobilenet_v3_small"), args, dynamic_shapes=dynamic)
    path = result.save(tmp_path / "m.onnx")
    proc = subprocess.run([sys.executable, "-m", "onnxport", "validate", path, f"{TARGET}:build",
                           "--model-arg", "name='mobilenet_v3_small'"], capture_output=True, text=True, timeout=600,
                          env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "eager-f64" in proc.stdout and "all outputs match" in proc.stdout
    assert np.isfinite(result.validate(sizes=[], values=[]).checks[0].eager_vs_float64)
