"""``validate(runtime="reference")``: the same input sets run by ``onnx.reference.ReferenceEvaluator``."""

from __future__ import annotations

import torch

import onnxport


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x))).mean((2, 3))


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(6, 8, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return out, h, c


def test_reference_runs_a_convolution():
    result = onnxport.to_onnx(Conv().eval(), (torch.randn(2, 3, 8, 8),), dynamic_shapes={"x": {0: "batch"}})
    report = result.validate(sizes=[{"batch": 1}, {"batch": 5}], values=["symmetric"], runtime="reference")
    assert report.ok and report.runtime == "the ONNX reference evaluator", report
    assert len({c.inputs for c in report.checks}) == 4


def test_reference_runs_an_lstm():
    result = onnxport.to_onnx(Recurrent().eval(), (torch.randn(2, 5, 6),),
                              dynamic_shapes={"x": {0: "batch", 1: "time"}})
    report = result.validate(sizes=[{"batch": 1, "time": 2}, {"batch": 4, "time": 9}], values=[],
                             runtime="reference")
    assert report.ok, report
    assert len({c.inputs for c in report.checks}) == 3
