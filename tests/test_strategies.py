"""Capture strategies after the model as given fails: the rewrite of Python control flow, and
torch.export's strict mode (TorchDynamo), tried in order, the one that captured named on the result."""

from __future__ import annotations

import pytest
import torch

import onnxport
from onnxport import stages
from exportcheck import check_export


def _padding_mask(lengths: torch.Tensor) -> torch.Tensor:
    """torchaudio's ``_lengths_to_padding_mask``: the mask's length read from the lengths' values, here
    with ``int()`` of the tensor itself, which the non-strict capture cannot keep symbolic (it keeps
    ``int(torch.max(lengths).item())``: tests/capture/test_symbolic_builtins.py)."""
    batch_size = lengths.shape[0]
    max_length = int(torch.max(lengths))
    return torch.arange(max_length, dtype=lengths.dtype).expand(batch_size, max_length) >= lengths.unsqueeze(1)


class MaskedAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(8, 16)
        self.attention = torch.nn.MultiheadAttention(16, 2)

    def forward(self, x, lengths):  # x: [batch, time, 8], lengths: [batch], max(lengths) == time
        h = self.proj(x).transpose(0, 1)
        y, _ = self.attention(h, h, h, key_padding_mask=_padding_mask(lengths), need_weights=False)
        return y.transpose(0, 1)


def _inputs(batch: int, time: int) -> tuple:
    lengths = torch.randint(1, time + 1, (batch,))
    lengths[0] = time
    return torch.randn(batch, time, 8), lengths


def test_a_size_read_from_the_lengths_is_captured_in_strict_mode(monkeypatch):
    dims = {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}}
    with pytest.warns(UserWarning, match=r"(?s)capture failed \(the model needs a value known only when it runs.*"
                                         r"strict mode \(TorchDynamo\)"):
        result = check_export(MaskedAttention().eval(), _inputs(3, 20), dims, values=[],
                              inputs=[_inputs(2, 7), _inputs(4, 31), _inputs(1, 1)])
    assert result.captured.strategy == "strict"
    # the strategy is what made it export: without it, the first failure
    monkeypatch.setattr(stages, "STRATEGIES", tuple(s for s in stages.STRATEGIES if s.name != "strict"))
    with pytest.raises(onnxport.DataDependentError, match=r"int\(torch.max\(lengths\)\)"):
        onnxport.to_onnx(MaskedAttention().eval(), _inputs(3, 20), dynamic_shapes=dims)


class Unexportable(torch.nn.Module):
    def forward(self, x):
        n = int(x.sum().item() > 0)  # a Python number from the data, deciding the output's size
        return x[: n + 1] * 2


def test_a_refusal_says_what_each_strategy_met(capfd):
    with pytest.raises(onnxport.ExportError) as info:
        onnxport.to_onnx(Unexportable(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: "n"}})
    assert "strict mode (TorchDynamo) failed too" in (info.value.hint or "")
    assert capfd.readouterr() == ("", "")  # what TorchDynamo printed and logged is held for the error's detail


def test_the_model_as_given_is_named_when_it_captures():
    r = onnxport.to_onnx(torch.nn.Linear(3, 2), (torch.randn(4, 3),), dynamic_shapes={"input": {0: "n"}})
    assert r.captured.strategy == "non-strict"


@pytest.mark.parametrize("options, strategy", [
    ({"strict": True}, "strict"),
    ({"rewrite_control_flow": True}, "rewritten"),
    ({"rewrite_control_flow": True, "strict": True}, "rewritten, strict"),
])
def test_how_the_model_was_captured_on_request_is_named(options, strategy):
    r = onnxport.to_onnx(torch.nn.Linear(3, 2), (torch.randn(4, 3),), dynamic_shapes={"input": {0: "n"}}, **options)
    assert r.captured.strategy == strategy
