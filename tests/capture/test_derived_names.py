"""A derived ``Dim`` (``4 * T``, ``T + 1``) keeps the user's names: the ONNX input's dim_param is ``4*T``,
an output of size ``T`` is named ``T``, and validation, constraints and errors speak of ``T`` (its root's
range is what validation explores; a size given to ``4*T`` is a size of ``T``)."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn
from torch.export import Dim

import onnxport
from exportcheck import check_export
from onnxport.capture.relations import root_size
from onnxport.errors import DynamicShapesError, ValidationError
from onnxport.show.report_sections import signature_section


class Subsample(nn.Module):
    """features [batch, 4*T, 8] -> [batch, T, 32]: four frames stacked (a speech front end's 4x subsampling)."""

    def forward(self, x):
        b, t, f = x.shape
        return x.reshape(b, t // 4, 4 * f)


class WithNext(nn.Module):
    """x [batch, 4*T, 8], y [batch, T + 1, 32] -> ([batch, T, 32]: x stacked plus y from its second step on,
    [batch, 2*T + 2, 32]: y twice)."""

    def forward(self, x, y):
        b, t, f = x.shape
        return x.reshape(b, t // 4, 4 * f) + y[:, 1:], torch.cat([y, y], 1)


class Kernel13(nn.Module):
    """x [batch, 4*T, 8] -> [batch, 8, 4*T - 12]: a convolution of 13 steps (needs 4*T >= 13, T >= 4)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 8, 13)

    def forward(self, x):
        return self.conv(x.transpose(1, 2))


def dims(values) -> dict[str, list]:
    return {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in values}


def ort_matches_eager(result, model: nn.Module, *args: torch.Tensor) -> None:
    """The saved ONNX model in onnxruntime against eager PyTorch on ``args`` (sizes of our choosing)."""
    session = ort.InferenceSession(result.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    got = session.run(None, {n: a.numpy() for n, a in zip(names, args)})
    with torch.no_grad():
        want = model(*args)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


def given_rows(report) -> list:
    return [c for c in report.checks if c.why == "given sizes"]


def test_multiple_of_a_dim_keeps_its_name():
    model = Subsample().eval()
    result = check_export(model, (torch.randn(3, 100, 8),), ({0: Dim("batch"), 1: 4 * Dim("T", min=2)},),
                          sizes=[{"T": 9}, {"T": 2, "batch": 1}],
                          expect_inputs={"x": ["batch", "4*T", 8]}, expect_outputs={"output": ["batch", "T", 32]})
    assert set(result.dim_names.values()) == {"batch", "T"}
    report = result.validate(sizes=[{"T": 9}])
    assert report.ok, report
    rows = given_rows(report)
    assert [(r.sizes, r.shape) for r in rows] == [("batch=3, T=9", (3, 9, 32))]
    for t in (9, 2):
        ort_matches_eager(result, model, torch.randn(2, 4 * t, 8))
    text = result.pretty()
    assert "x: float32[batch, 4*T, 8]" in text and "output: float32[batch, T, 32]" in text
    page = signature_section(result)  # the HTML report's inputs, outputs and declared dims
    assert "4*T" in page and "8.. (T: 2..)" in page and "<td>T</td>" in page, page


def test_size_of_the_derived_form_is_a_size_of_its_dim():
    result = onnxport.to_onnx(Subsample(), (torch.randn(3, 100, 8),),
                              dynamic_shapes=({0: Dim("batch"), 1: 4 * Dim("T", min=2)},))
    by_root, by_form = result.validate(sizes=[{"T": 9}]), result.validate(sizes=[{"4*T": 36}])
    assert by_form.ok and [(r.sizes, r.shape) for r in given_rows(by_form)] == \
        [(r.sizes, r.shape) for r in given_rows(by_root)]
    assert [r.sizes for r in given_rows(result.validate(sizes=[{"4 * T": 8, "batch": 2}]))] == ["batch=2, T=2"]
    with pytest.raises(ValidationError, match=r"4\*T = 37, which no whole size of 'T' makes"):
        result.validate(sizes=[{"4*T": 37}])
    with pytest.raises(ValidationError, match=r"two sizes, 9 and 10"):
        result.validate(sizes=[{"T": 9, "4*T": 40}])
    with pytest.raises(ValidationError, match=r"outside the range \[2, "):
        result.validate(sizes=[{"4*T": 4}])
    with pytest.raises(ValidationError, match=r"dynamic dimensions are \['T', 'batch'\].*derived forms \['4\*T'\]"):
        result.validate(sizes=[{"time": 9}])


@pytest.mark.parametrize("text, value, expected", [
    ("4*T", 36, ("T", 9)), ("4 * T", 36, ("T", 9)), ("T + 1", 10, ("T", 9)), ("2*T - 2", 16, ("T", 9)),
    ("4*T", 37, ("T", None)), ("T + 1", 1, ("T", None)),  # no positive whole T
    ("T", 9, None), ("time", 9, None), ("T//2", 4, None), ("T*U", 4, None), ("4*", 4, None)])
def test_root_size(text, value, expected):
    assert root_size(text, value, {"T", "batch"}) == expected


def test_validation_explores_the_root_range():
    result = onnxport.to_onnx(Subsample(), (torch.randn(3, 100, 8),),
                              dynamic_shapes=({0: Dim("batch"), 1: 4 * Dim("T", min=2)},))
    report = result.validate(values=[])
    assert report.ok, report
    ts = {int(part.split("=")[1]) for c in report.checks for part in c.sizes.split(", ") if part.startswith("T=")}
    assert 2 in ts and 25 in ts and max(ts) > 25, ts  # the root's minimum, the example, above it


def test_offset_of_a_dim_on_a_second_input():
    model = WithNext().eval()
    T = Dim("T", min=2)
    spec = ({0: Dim("batch"), 1: 4 * T}, {0: Dim("batch"), 1: T + 1})
    result = check_export(model, (torch.randn(3, 100, 8), torch.randn(3, 26, 32)), spec,
                          sizes=[{"T": 9}, {"T": 3, "batch": 2}],
                          expect_inputs={"x": ["batch", "4*T", 8], "y": ["batch", "T + 1", 32]},
                          expect_outputs={"output_0": ["batch", "T", 32], "output_1": ["batch", "2*T + 2", 32]})
    report = result.validate(sizes=[{"T": 9}, {"T + 1": 5}])
    assert report.ok, report
    shapes = {(r.sizes, r.output): r.shape for r in given_rows(report)}
    assert shapes[("batch=3, T=9", "output_0")] == (3, 9, 32)
    assert shapes[("batch=3, T=4", "output_1")] == (3, 10, 32)
    for t in (9, 3):
        ort_matches_eager(result, model, torch.randn(2, 4 * t, 8), torch.randn(2, t + 1, 32))


def test_offset_alone_names_its_root():
    """Only ``T + 1`` declared: torch's root symbol is named ``T``; an output sliced to it is ``T``."""

    class Drop(nn.Module):
        def forward(self, y):
            return y[:, 1:] * 2

    result = check_export(Drop(), (torch.randn(2, 11, 4),), ({1: Dim("T") + 1},), sizes=[{"T": 4}, {"T": 1}],
                          expect_inputs={"y": [2, "T + 1", 4]}, expect_outputs={"output": [2, "T", 4]})
    assert [r.sizes for r in given_rows(result.validate(sizes=[{"T + 1": 7}]))] == ["T=6"]


def test_constraint_and_its_line_name_the_root():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = onnxport.to_onnx(Kernel13(), (torch.randn(3, 100, 8),),
                                  dynamic_shapes=({0: Dim("batch"), 1: 4 * Dim("T")},))
    assert [str(c) for c in result.constraints] == ["T >= 4"]
    assert "in forward: return self.conv(x.transpose(1, 2))" in result.constraints[0].where
    said = [str(w.message) for w in caught if "T >= 4" in str(w.message)]
    assert said and "in forward" in said[0], [str(w.message) for w in caught]
    assert dims(result.model.graph.outputs) == {"output": ["batch", 8, "4*T - 12"]}
    with pytest.raises(ValidationError, match=r"size 3 for 'T' is outside the range \[4, "):
        result.validate(sizes=[{"T": 3}])
    report = result.validate(sizes=[{"T": 4}, {"4*T": 40}], values=[])
    assert report.ok and {r.shape for r in given_rows(report)} == {(3, 8, 4), (3, 8, 28)}, report
    outside = result.validate(inputs=[(torch.randn(2, 12, 8),)], values=[])  # 12 = 4*3: T = 3
    assert [c.why for c in outside.checks if c.inputs == "inputs 1"] == [
        "given inputs; outside the export's constraint T >= 4 (result.constraints)"]


def test_refused_range_names_the_root():
    with pytest.raises(DynamicShapesError, match=r"requires T >= 4.*T in \[2, inf\]") as caught:
        onnxport.to_onnx(Kernel13(), (torch.randn(3, 100, 8),),
                         dynamic_shapes=({0: Dim("batch"), 1: 4 * Dim("T", min=2)},))
    assert "in forward: return self.conv" in str(caught.value)


@pytest.mark.slow
def test_speech_conformer_subsampled_time_keeps_its_name():
    """ESPnet's Conformer (conv2d subsampling: ((t - 1)//2 - 1)//2 frames) with time declared ``4*time_4``:
    its output has ``time_4 - 1`` frames, named so; validation at sizes of ``time_4`` and of ``4*time_4``,
    lengths drawn for the declared time axis."""
    import speech_zoo

    case = speech_zoo.build("espnet_conformer")
    time_4 = Dim("time_4")
    spec = {"xs_pad": {0: Dim("batch"), 1: 4 * time_4}, "ilens": {0: Dim("batch")}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = onnxport.to_onnx(case.model, case.make(3, 36), dynamic_shapes=spec)
    assert dims(result.model.graph.inputs) == {"xs_pad": ["batch", "4*time_4", 40], "ilens": ["batch"]}
    assert dims(result.model.graph.outputs)["output_0"] == ["batch", "time_4 - 1", 32]
    assert all(set(c.names) <= {"batch", "time_4"} for c in result.constraints), result.constraints
    report = result.validate(sizes=[{"time_4": 13, "batch": 2}, {"4*time_4": 20}], values=[])
    assert report.ok, report
    rows = [r for r in given_rows(report) if r.output == "output_0"]
    assert [(r.sizes, r.shape, r.rejected) for r in rows] == [
        ("batch=2, time_4=13", (2, 12, 32), False), ("batch=3, time_4=5", (3, 4, 32), False)]
