"""Scalars from small buffers and sizes stay known while torch.export traces: EnCodec / Mimi / WavTokenizer's
padding computed through 0-d tensors (stride and kernel size held as buffers), EoMT's branch on a buffer."""

from __future__ import annotations

import pytest
import torch

import onnxport
from exportcheck import check_export


class PaddedConv(torch.nn.Module):
    """transformers' EncodecConv1d / MimiConv1d: the padding a length needs, computed from buffers,
    then a reflect pad that pads with zeros first where the input is shorter than the padding."""

    def __init__(self, kernel_size=7, stride=4):
        super().__init__()
        self.conv = torch.nn.Conv1d(2, 3, kernel_size, stride=stride)
        self.register_buffer("stride", torch.tensor(stride, dtype=torch.int64), persistent=False)
        self.register_buffer("kernel_size", torch.tensor(kernel_size, dtype=torch.int64), persistent=False)
        self.register_buffer("padding_total", torch.tensor(kernel_size - stride, dtype=torch.int64),
                             persistent=False)

    def forward(self, x):  # x: [b, 2, t] -> [b, 3, ceil(t / stride)]
        length = x.shape[-1]
        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1
        n_frames = torch.ceil(n_frames).to(torch.int64) - 1
        extra = n_frames * self.stride + self.kernel_size - self.padding_total - length
        right = self.padding_total // 2
        left = self.padding_total - right
        max_pad = max(left, right + extra)
        extra_pad = 0
        if length <= max_pad:
            extra_pad = max_pad - length + 1
            x = torch.nn.functional.pad(x, (0, extra_pad))
        padded = torch.nn.functional.pad(x, (left, right + extra), mode="reflect")
        return self.conv(padded[..., : padded.shape[-1] - extra_pad])


@pytest.mark.slow
def test_a_padding_computed_through_buffers_stays_a_size():
    r = check_export(PaddedConv(), (torch.randn(2, 2, 50),), {"x": {0: "b", 2: "t"}},
                     sizes=[{"b": 3, "t": 51}, {"b": 1, "t": 64}, {"b": 2, "t": 97}])
    assert r.model_proto.graph.input[0].type.tensor_type.shape.dim[2].dim_param == "t"


class BufferFlags(torch.nn.Module):
    """EoMT: which blocks compute a mask is a buffer of per-block probabilities."""

    def __init__(self, probs):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.register_buffer("probs", torch.tensor(probs))

    def forward(self, x):  # x: [b, t, 4]
        for i in range(self.probs.shape[0]):
            if self.probs[i] > 0:
                x = self.proj(x).relu()
        return x


@pytest.mark.parametrize("probs", [[1.0, 0.0, 1.0], [0.0, 0.0, 0.5]])
def test_a_branch_on_a_small_buffer_is_decided_by_its_value(probs):
    r = check_export(BufferFlags(probs), (torch.randn(2, 5, 4),), {"x": {0: "b", 1: "t"}})
    relus = sum(1 for n in r.model_proto.graph.node if n.op_type == "Relu")
    assert relus == sum(1 for p in probs if p > 0)


class LargeBufferFlag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.ones(64))

    def forward(self, x):
        if self.table[3] > 0:
            return x * 2
        return x


def test_a_branch_on_a_large_buffer_is_still_on_data():
    with pytest.raises(onnxport.ExportError):
        onnxport.to_onnx(LargeBufferFlag(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "b"}},
                         rewrite_control_flow=False)
