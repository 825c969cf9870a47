"""``target="openvino"``: an LSTM over packed sequences (``pack_padded_sequence``, unsorted
lengths as an input) is right in OpenVINO, its ``sequence_lens`` written as masked Scans
(``onnxport.targets.recurrent_lengths``); the default export, right in onnxruntime, is not, and its
validation on OpenVINO fails naming OpenVINO. GRU and RNN layers take the same form."""

from __future__ import annotations

import onnx_ir as ir
import pytest
import torch

import onnxport


class Packed(torch.nn.Module):
    """pack_padded_sequence -> nn.LSTM -> pad_packed_sequence: the outputs and the final states (the
    cell states too with ``cells``)."""

    def __init__(self, cells: bool = True):
        super().__init__()
        self.rnn = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
        self.cells = cells

    def forward(self, x, lengths, h0, c0):
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = self.rnn(packed, (h0, c0))
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return (out, h, c) if self.cells else (out, h)


def _example(batch: int, time: int, lengths: list[int]):
    return (torch.randn(batch, time, 8), torch.tensor(lengths), torch.randn(4, batch, 16), torch.randn(4, batch, 16))


DIMS = {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}, "h0": {1: "batch"}, "c0": {1: "batch"}}
# unsorted, one at the full length, one of length 1: two size sets beside the example
OTHERS = [_example(2, 9, [3, 9]), _example(5, 4, [1, 4, 2, 4, 3])]


@pytest.fixture(scope="module")
def model():
    return Packed().eval()


def _with_lengths(result, op_types=("LSTM", "GRU", "RNN")) -> list:
    return [n for n in ir.traversal.RecursiveGraphIterator(result.model.graph)
            if n.op_type in op_types and len(n.inputs) > 4 and n.inputs[4] is not None]


def test_openvino_target_is_right_in_openvino(model, openvino):
    """The final cell states are read: each layer and direction is a masked Scan."""
    result = onnxport.to_onnx(model, _example(3, 6, [4, 6, 1]), dynamic_shapes=DIMS, target="openvino")
    nodes = list(ir.traversal.RecursiveGraphIterator(result.model.graph))
    assert not [n for n in nodes if n.op_type == "LSTM"]
    assert sum(n.op_type == "Scan" for n in nodes) == 4  # 2 layers x 2 directions
    report = result.validate(inputs=OTHERS, sizes=[], values=[])  # the target's runtime: OpenVINO
    assert report.runtime.startswith("OpenVINO") and report.ok, report
    assert {c.inputs for c in report.checks} == {"example", "inputs 1", "inputs 2"}
    assert result.validate(inputs=OTHERS, sizes=[], values=[], runtime="onnxruntime").ok


def test_lstm_without_its_cell_states_keeps_the_fused_operator(openvino):
    """No cell state read: each direction is an LSTM without sequence_lens, masked and read at the lengths."""
    result = onnxport.to_onnx(Packed(cells=False).eval(), _example(3, 6, [4, 6, 1]), dynamic_shapes=DIMS,
                              target="openvino")
    nodes = list(ir.traversal.RecursiveGraphIterator(result.model.graph))
    assert sum(n.op_type == "LSTM" for n in nodes) == 4 and not _with_lengths(result)
    assert not [n for n in nodes if n.op_type == "Scan"]
    report = result.validate(inputs=OTHERS, sizes=[], values=[])
    assert report.runtime.startswith("OpenVINO") and report.ok, report


def test_default_target_fails_in_openvino_naming_it(model, openvino):
    result = onnxport.to_onnx(model, _example(3, 6, [4, 6, 1]), dynamic_shapes=DIMS)
    assert result.validate(inputs=OTHERS, sizes=[], values=[]).ok  # right in onnxruntime
    report = result.validate(inputs=OTHERS, sizes=[], values=[], runtime="openvino")
    assert not report.ok
    assert "FAILED in OpenVINO" in str(report)
    # what OpenVINO gets wrong: the final states of the sequences shorter than the padded time
    failed = {c.output for c in report.checks if not c.ok}
    assert {"output_0", "output_1", "output_2"} <= failed, report


@pytest.mark.parametrize("layer", ["gru", "rnn_relu"])
def test_gru_and_rnn_with_lengths_are_right_in_openvino(layer, openvino):
    rnn = torch.nn.GRU(8, 16, bidirectional=True, batch_first=True) if layer == "gru" else \
        torch.nn.RNN(8, 16, nonlinearity="relu", batch_first=True)

    class PackedLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn

        def forward(self, x, lengths):
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, h = self.rnn(packed)
            return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0], h

    others = [(x, lengths) for x, lengths, *_ in OTHERS]
    dims = {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}}
    result = onnxport.to_onnx(PackedLayer().eval(), (torch.randn(3, 6, 8), torch.tensor([4, 6, 1])),
                              dynamic_shapes=dims, target="openvino")
    assert not _with_lengths(result)  # the fused operator over each direction, masked and read at the lengths
    report = result.validate(inputs=others, sizes=[], values=[])
    assert report.runtime.startswith("OpenVINO") and report.ok, report
