"""The RF Conformer encoder from a RETURNN config (built as RETURNN's tests/test_rf_encoder_conformer.py
builds it), exported from a RETURNN-style checkpoint with seeded random weights, against RETURNN eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from returnn_helpers import CONFORMER, run_onnx, save_checkpoint

from onnxport.cli import main
from onnxport.integrations.returnn_config import load_returnn_config
from onnxport.integrations.returnn_export import build_returnn_model, export_returnn_config, returnn_inputs
from onnxport.verify.report import FLOAT64
from onnxport.verify.unneeded_constraints import CHECKED

SIZES = [{"batch": 1, "time": 9}, {"batch": 2, "time": 23}, {"batch": 3, "time": 50}, {"batch": 4, "time": 301},
         {"batch": 5, "time": 9}, {"batch": 5, "time": 301}]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conformer")
    ckpt = tmp / "epoch.003.pt"
    save_checkpoint(CONFORMER, ckpt, seed=7)
    result = export_returnn_config(CONFORMER, ckpt, sizes=SIZES)
    path = tmp / "conformer.onnx"
    result.save(path)
    return result, ckpt, path


def _dims(value) -> list:
    return [d if isinstance(d, int) else str(d) for d in value.shape]


def test_names_and_dims_as_returnn_declares_them(exported):
    result, _, _ = exported
    g = result.model.graph
    assert [(v.name, v.dtype.name, _dims(v)) for v in g.inputs] == [
        ("data", "FLOAT", ["batch", "time", 40]), ("data:size1", "INT32", ["batch"])]
    assert [(v.name, v.dtype.name, _dims(v)) for v in g.outputs] == [
        ("output", "FLOAT", ["batch", "out_time", 64]), ("output:size1", "INT32", ["batch"])]


def test_matches_returnn_eager_at_every_size(exported):
    result, _, _ = exported
    report = result.validation
    assert report.ok, str(report)
    checked = {(c.sizes, c.output) for c in report.checks}
    for s in SIZES:
        text = f"batch={s['batch']}, time={s['time']}"
        assert {(text, "output"), (text, "output:size1")} <= checked, (text, sorted(checked))
    worst = max(c.max_abs for c in report.checks if c.output == "output")
    assert worst < 1e-5, str(report)
    # RETURNN runs forward_step in float64 for the reference: every float output is judged against it
    # (but on exact zeros, where the conformer's output is zero everywhere: no scale)
    floats = {c.why: c for c in report.checks if c.output == "output" and not c.rejected}
    judged = [c for why, c in floats.items() if why != "exact zeros"]
    assert judged and all(c.basis == FLOAT64 and c.eager_vs_float64 < 1e-5 for c in judged), str(report)
    # the value sets feed their own values (the raw dict's inputs named as the declared ones)
    assert floats["exact zeros"].scale == 0.0 and floats["sign-symmetric values"].scale != floats["the example"].scale


def test_matches_returnn_called_directly(exported):
    """The reference without onnxport's wrapper: the RF module called as RETURNN's own tests call it."""
    import returnn.frontend as rf
    from returnn.tensor import Dim, Tensor, batch_dim

    result, ckpt, path = exported
    rc = load_returnn_config(CONFORMER)
    model = build_returnn_model(rc, ckpt).model.rf_module
    for sizes in ({"batch": 2, "time": 23}, {"batch": 4, "time": 301}):
        inputs = returnn_inputs(result, sizes, seed=11)
        got = run_onnx(path, inputs)
        with rc.scope(), torch.no_grad():
            rf.init_forward_step_run_ctx(epoch=3, step=120)
            time_dim = Dim(Tensor("time", [batch_dim], dtype="int32", raw_tensor=inputs["data:size1"]), name="time")
            batch_dim.reset_eager()  # sizes of an earlier batch
            batch_dim.dyn_size_ext = Tensor("batch", [], dtype="int32",
                                            raw_tensor=torch.tensor(sizes["batch"], dtype=torch.int32))
            data = Tensor("data", [batch_dim, time_dim, rc.extern_data["data"].dims[2]], dtype="float32",
                          raw_tensor=inputs["data"])
            out, out_dim = model(data, in_spatial_dim=time_dim)
            want = out.copy_transpose([batch_dim, out_dim, model.out_dim]).raw_tensor.numpy()
            want_lengths = out_dim.dyn_size_ext.raw_tensor.numpy()
        np.testing.assert_array_equal(got["output:size1"], want_lengths)
        assert got["output"].shape == want.shape
        np.testing.assert_allclose(got["output"], want, atol=1e-5, rtol=1e-4)


def test_checkpoint_weights_are_the_exported_ones(exported):
    result, _, path = exported
    inputs = returnn_inputs(result, {"batch": 2, "time": 23}, seed=5)
    got = run_onnx(path, inputs)["output"]
    rc = load_returnn_config(CONFORMER)
    with torch.no_grad():
        unloaded = build_returnn_model(rc)(inputs)["output"].numpy()  # get_model's own seeded weights
    assert np.abs(got - unloaded).max() > 1e-2


def test_onnxport_show_lists_returnn_inputs_and_outputs(exported, capsys):
    _, _, path = exported
    assert main(["show", str(path), "--no-shapes"]) == 0
    text = capsys.readouterr().out
    for line in ("input   data: float32[batch, time, 40]", "input   data:size1: int32[batch]",
                 "output  output: float32[batch, out_time, 64]", "output  output:size1: int32[batch]"):
        assert line in text, text[:600]


def test_time_below_the_traced_minimum_is_checked_not_adopted(exported):
    # torch.export's trace states time >= 5; eager PyTorch runs at time 1, 2, 3 and onnxruntime matches it there
    result, _, _ = exported
    assert result.constraints == []
    below = [g for g in result.guards if g.text == "time >= 5"]
    assert below and below[0].status == "kept" and below[0].method == CHECKED, [g.describe() for g in below]
