"""A model whose code takes another path when traced: validation fails (the ONNX model computes the traced
path, not eager's) and the failed rows say why (``onnxport.verify.traced_path``); an export wrong for another
reason gets no such note."""

import onnx_ir as ir
import torch
from torch.export import Dim

import onnxport


class TracedOtherwise(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_compiling():  # torch.export traces this side; eager runs the other
            return x * 2
        return x * 3


def test_a_model_traced_on_another_path_fails_validation_and_says_why():
    result = onnxport.to_onnx(TracedOtherwise(), (torch.randn(2, 5),), dynamic_shapes=({0: Dim("batch")},))
    report = result.validate(values=[])
    assert not report.ok
    failed = [c for c in report.checks if not c.ok and not c.rejected]
    assert failed and all("takes another path when traced" in c.note for c in failed[:2])
    assert "takes another path when traced" in str(report)


def test_an_onnx_model_wrong_for_another_reason_gets_no_traced_path_note():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).eval()
    result = onnxport.to_onnx(model, (torch.randn(2, 4),), dynamic_shapes=({0: Dim("batch")},))
    weight = next(v for v in result.model.graph.initializers.values() if v.const_value.numpy().size == 12)
    weight.const_value = ir.tensor(weight.const_value.numpy() + 1.0)  # the ONNX model now computes another thing
    report = result.validate(values=[])
    assert not report.ok
    assert not any("another path" in c.note for c in report.checks)

