"""PT2E quantization: the ``quantized_decomposed`` ops as ONNX QuantizeLinear / DequantizeLinear.
Each op on its own matches eager exactly at two batch sizes; a CNN quantized with torchao's PT2E flow
(``prepare_pt2e`` / ``convert_pt2e``, XNNPACK-style quantizer, per-channel weights) exports as QDQ and
matches eager's quantized output to within one step of the output's quantization."""

import numpy as np
import pytest
import torch

import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines torch.ops.quantized_decomposed)
from exportcheck import check_export, count_ops

qd = torch.ops.quantized_decomposed
BATCH = {"x": {0: "batch"}}


class QuantDequant(torch.nn.Module):
    def __init__(self, scale, zero_point, qmin, qmax, dtype):
        super().__init__()
        self.args = (scale, zero_point, qmin, qmax, dtype)

    def forward(self, x):
        q = qd.quantize_per_tensor.default(x, *self.args)
        return q, qd.dequantize_per_tensor.default(q, *self.args)


@pytest.mark.parametrize("dtype,qmin,qmax,zero_point", [(torch.int8, -128, 127, 3), (torch.uint8, 0, 255, 128),
                                                        (torch.int8, -127, 127, 0), (torch.uint8, 10, 200, 100)],
                         ids=["int8", "uint8", "int8_symmetric", "uint8_narrow"])
def test_quantize_and_dequantize_per_tensor(dtype, qmin, qmax, zero_point):
    x = torch.randn(3, 5) * 4
    r = check_export(QuantDequant(0.05, zero_point, qmin, qmax, dtype), (x,), BATCH, values=["symmetric", "large"],
                     sizes=[{"batch": 1}, {"batch": 7}])
    assert count_ops(r, "QuantizeLinear") == 1 and count_ops(r, "DequantizeLinear") == 1
    assert count_ops(r, "Clip") == (0 if (qmin, qmax) in ((-128, 127), (0, 255)) else 1)


class PerChannel(torch.nn.Module):
    def __init__(self, zero_points):
        super().__init__()
        self.register_buffer("scales", torch.tensor([0.02, 0.1, 0.5, 1.0]))
        self.register_buffer("zero_points", zero_points)
        self.none = not bool(zero_points.any())  # dequantize without zero points (0)

    def forward(self, x):
        q = qd.quantize_per_channel.default(x, self.scales, self.zero_points, 1, -127, 127, torch.int8)
        zp = None if self.none else self.zero_points
        return qd.dequantize_per_channel.default(q, self.scales, zp, 1, -127, 127, torch.int8)


@pytest.mark.parametrize("zero_points", [torch.zeros(4, dtype=torch.int64), torch.tensor([0, 1, -2, 5])],
                         ids=["zero", "offset"])
def test_quantize_and_dequantize_per_channel(zero_points):
    r = check_export(PerChannel(zero_points), (torch.randn(2, 4, 3) * 10,), BATCH, values=["symmetric", "large"],
                     sizes=[{"batch": 1}, {"batch": 5}])
    assert count_ops(r, "QuantizeLinear") == 1 and count_ops(r, "DequantizeLinear") == 1


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 4 * 4, 4)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def test_a_pt2e_quantized_cnn_exports_as_qdq_and_matches_eagers_quantized_output():
    pytest.importorskip("torchao")
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    import onnxport
    from onnxport.verify import OrtRunner

    torch.manual_seed(0)
    model = SmallCNN().eval()
    x = torch.randn(4, 1, 16, 16)
    captured = torch.export.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}}).module()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(captured, quantizer)
    for _ in range(8):
        prepared(torch.randn(4, 1, 16, 16))
    quantized = convert_pt2e(prepared)

    result = onnxport.to_onnx(quantized, (x,), dynamic_shapes=BATCH)
    assert count_ops(result, "QuantizeLinear") >= 5 and count_ops(result, "DequantizeLinear") >= 8
    weights = [n for n in result.model.graph if n.op_type == "DequantizeLinear" and n.attributes.get_int("axis") == 0]
    assert len(weights) == 3  # per-channel weights of both convolutions and the linear layer
    # the quantization step of the output: the scale of the last DequantizeLinear
    last = next(n for n in reversed(list(result.model.graph)) if n.op_type == "DequantizeLinear")
    step = float(last.inputs[1].const_value.numpy())
    runner = OrtRunner(result.model_proto)
    for batch in (1, 7):
        xi = torch.randn(batch, 1, 16, 16)
        with torch.no_grad():
            want, float_out = quantized(xi).numpy(), model(xi).numpy()
        got = runner.run([xi])[0]
        assert got.shape == want.shape and result.model.graph.inputs[0].shape[0] == "batch"
        # the integer kernels round the accumulations where eager rounds float results: one step at most
        assert np.abs(got - want).max() <= step * 1.01, (np.abs(got - want).max(), step)
        assert np.mean(np.abs(got - want) < step * 0.01) > 0.5  # most values exactly eager's
        assert np.abs(want - float_out).max() > step * 0.5  # the model really computes quantized
