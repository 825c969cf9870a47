"""find_divergence points at the first FX node whose ONNX value differs."""

import onnx
import torch

import onnxport
from onnxport.verify.divergence import find_divergence
from onnxport.translate.registry import override


class Chain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        a = self.lin(x) * 2
        b = torch.sigmoid(a)
        c = torch.exp(b) + a
        return c - 1


def _broken_sigmoid(ctx, x):  # deliberately wrong: Tanh instead of Sigmoid
    return ctx.op.Tanh(x)


def test_correct_model_has_no_divergence():
    m = Chain().eval()
    r = onnxport.to_onnx(m, (torch.randn(3, 4),), dynamic_shapes={"x": {0: "n"}})
    assert find_divergence(m, r, (torch.randn(6, 4),)) is None


def test_broken_translation_is_located(tmp_path):
    m = Chain().eval()
    with override({torch.ops.aten.sigmoid.default: _broken_sigmoid}):
        r = onnxport.to_onnx(m, (torch.randn(3, 4),), dynamic_shapes={"x": {0: "n"}})
    assert not r.validate().ok
    d = find_divergence(m, r, (torch.randn(6, 4),))
    assert d is not None
    assert d.target == "aten.sigmoid.default" and d.onnx_node.startswith("Tanh")
    assert "torch.sigmoid(a)" in d.where and "test_divergence.py" in d.where
    # the same from a saved file, re-captured from the module
    path = r.save(tmp_path / "broken.onnx")
    d2 = find_divergence(m, onnx.load(path), (torch.randn(6, 4),))
    assert d2 is not None and d2.target == "aten.sigmoid.default"
