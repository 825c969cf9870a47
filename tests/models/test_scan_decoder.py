"""A small RNN-style decoder written with scan over time: the carry is the hidden state and the
previous output, the module's parameters are used inside the body. Exported once with dynamic
batch and time, it must match eager PyTorch at time lengths 1, 5 and 50."""

import onnx_ir as ir
import pytest
import torch
from torch._higher_order_ops.scan import scan

from exportcheck import check_export, count_ops


class ScanDecoder(torch.nn.Module):
    """h_t = tanh(W_x x_t + W_h h_{t-1} + W_y y_{t-1}); y_t = log_softmax(W_o h_t)."""

    def __init__(self, features=6, hidden=16, classes=5):
        super().__init__()
        self.inp = torch.nn.Linear(features, hidden)
        self.rec = torch.nn.Linear(hidden, hidden, bias=False)
        self.feedback = torch.nn.Linear(classes, hidden, bias=False)
        self.out = torch.nn.Linear(hidden, classes)
        self.classes = classes

    def forward(self, x, h0):
        def step(carry, xt):
            h, y_prev = carry
            h2 = torch.tanh(self.inp(xt) + self.rec(h) + self.feedback(y_prev.exp()))
            y = torch.log_softmax(self.out(h2), dim=-1)
            return (h2, y), y.clone()

        y0 = torch.full((x.shape[0], self.classes), -float(torch.log(torch.tensor(float(self.classes)))))
        (h_last, _), ys = scan(step, (h0, y0), x, dim=1)
        return ys, h_last


@pytest.mark.parametrize("inline", [False, True])
def test_scan_decoder_dynamic_batch_and_time(inline):
    torch.manual_seed(0)
    model = ScanDecoder().eval()
    x, h0 = torch.randn(2, 7, 6), torch.randn(2, 16)
    result = check_export(model, (x, h0), {"x": {0: "batch", 1: "time"}, "h0": {0: "batch"}}, inline=inline,
                          sizes=[{"batch": 3, "time": 1}, {"batch": 2, "time": 5}, {"batch": 1, "time": 50}],
                          atol=1e-5, rtol=1e-4,
                          expect_inputs={"x": ["batch", "time", 6], "h0": ["batch", 16]},
                          expect_outputs={"output_0": ["batch", "time", 5], "output_1": ["batch", 16]})
    assert count_ops(result, "Scan") == 1
    assert {"inp.weight", "rec.weight", "feedback.weight", "out.weight"} <= set(result.model.graph.initializers)
    (scan_node,) = [n for n in ir.traversal.RecursiveGraphIterator(result.model.graph) if n.op_type == "Scan"]
    assert list(scan_node.attributes["scan_input_axes"].as_ints()) == [1]
    report = result.validate(sizes=[{"batch": 4, "time": 50}], atol=1e-5, rtol=1e-4)
    assert report.ok, report
    assert {c.shape for c in report.checks if c.output == "output_0"} >= {(4, 50, 5)}
