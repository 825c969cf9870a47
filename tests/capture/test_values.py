"""What an export takes and gives: inputs torch.export cannot take and outputs ONNX cannot hold
are refused at export, naming the input or the user's return line."""

from __future__ import annotations

import pytest
import torch

import onnxport


class ReturnsText(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return y, "done"


class ReturnsNothing(torch.nn.Module):
    def forward(self, x):
        x = x + 1


class ReturnsNone(torch.nn.Module):
    def forward(self, x):
        if x.dim() > 5:
            return x
        return None


@pytest.mark.parametrize("model, words, line", [
    (ReturnsText(), ["returns a str ('done')", "output 1"], 'return y, "done"'),
    (ReturnsNothing(), ["returns None", "no output"], "def forward(self, x):"),
    (ReturnsNone(), ["returns None", "no output"], "return None"),
])
def test_outputs_onnx_cannot_hold_are_refused_at_the_return_line(model, words, line):
    with pytest.raises(onnxport.CaptureError) as info:
        onnxport.to_onnx(model.eval(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "n"}})
    e = info.value
    for w in words:
        assert w in e.what
    assert e.where is not None and __file__ in e.where and e.where.endswith(line)
    assert len(str(e).splitlines()[0]) <= 200


class TakesAnything(torch.nn.Module):
    def forward(self, x, options):
        return x * 2


@pytest.mark.parametrize("options, shown", [(object(), "'options' is a builtins.object"),
                                            ({"scale": object()}, "'options'['scale'] is a builtins.object")])
def test_inputs_torch_export_cannot_take_are_named(options, shown):
    with pytest.raises(onnxport.CaptureError) as info:
        onnxport.to_onnx(TakesAnything().eval(), (torch.randn(2, 3), options))
    first = str(info.value).splitlines()[0]
    assert shown in first and len(first) <= 200 and info.value.hint


def test_none_beside_tensors_is_still_dropped():
    class Pair(torch.nn.Module):
        def forward(self, x):
            return x * 2, None

    result = onnxport.to_onnx(Pair().eval(), (torch.randn(2, 3),))
    assert [v.name for v in result.model.graph.outputs] == ["output_0"]
    assert result.validate().ok
