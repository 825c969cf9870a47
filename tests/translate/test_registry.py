"""The translation registry: made per export, translations chosen by opset, user translations first."""

from __future__ import annotations

import subprocess
import sys

import torch

import onnxport
from exportcheck import check_export, count_ops, Fn
from onnxport.translate.registry import Registry, override

aten = torch.ops.aten


def test_the_opset_chooses_the_translation():
    gelu = Fn(lambda x: torch.nn.functional.gelu(x))
    assert Registry(19).lookup(aten.gelu.default) is not Registry(20).lookup(aten.gelu.default)
    assert count_ops(check_export(gelu, (torch.randn(2, 5),), {"x": {0: "b"}}, opset=19), "Gelu") == 0
    assert count_ops(check_export(gelu, (torch.randn(2, 5),), {"x": {0: "b"}}, opset=20), "Gelu") == 1
    rms = Fn(lambda x: torch.nn.functional.rms_norm(x, (5,), eps=1e-6))
    assert count_ops(check_export(rms, (torch.randn(2, 5),), {"x": {0: "b"}}, opset=22), "RMSNormalization") == 0
    assert count_ops(check_export(rms, (torch.randn(2, 5),), {"x": {0: "b"}}, opset=23), "RMSNormalization") == 1


def test_a_user_translation_wins_whenever_it_was_registered():
    # registered in a fresh process before any built-in family is loaded: it still wins
    code = """
import torch, onnxport
@onnxport.translates(torch.ops.aten.relu.default)
def relu_as_abs(ctx, x):
    return ctx.op.Abs(x)
r = onnxport.to_onnx(torch.nn.ReLU().eval(), (torch.randn(3),))
print([n.op_type for n in r.model.graph])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['Abs']"


def test_override_lasts_for_the_exports_inside_it():
    relu = Fn(lambda x: torch.relu(x))
    with override({aten.relu.default: lambda ctx, x: ctx.op.Abs(x)}):
        inside = onnxport.to_onnx(relu, (torch.randn(3),))
    after = onnxport.to_onnx(relu, (torch.randn(3),))
    assert [n.op_type for n in inside.model.graph] == ["Abs"]
    assert [n.op_type for n in after.model.graph] == ["Relu"]


def test_an_op_of_a_library_not_imported_is_registered_by_its_qualified_name():
    """A translation registered under "namespace::op.overload" serves that overload, defined by a
    library only after the registration."""
    code = """
import torch, onnxport
from onnxport.translate.registry import Registry
@onnxport.translates("demo_lib::twice.default")
def twice(ctx, x):
    return ctx.op.Add(x, x)
torch.library.define("demo_lib::twice", "(Tensor x) -> Tensor")
torch.library.impl("demo_lib::twice", "CompositeExplicitAutograd")(lambda x: 2 * x)
torch.library.register_fake("demo_lib::twice")(lambda x: torch.empty_like(x))
class M(torch.nn.Module):
    def forward(self, x):
        return torch.ops.demo_lib.twice(x)
r = onnxport.to_onnx(M(), (torch.randn(3),))
print([n.op_type for n in r.model.graph], r.validate().ok)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['Add'] True"
