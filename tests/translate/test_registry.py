"""The translation registry: made per export, translations chosen by opset, user translations first."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import torch

import onnxport
from exportcheck import check_export, count_ops, Fn
from onnxport.translate.registry import Translations, override

aten = torch.ops.aten


def test_the_opset_chooses_the_translation():
    gelu = Fn(lambda x: torch.nn.functional.gelu(x))
    assert Translations(19).lookup(aten.gelu.default) is not Translations(20).lookup(aten.gelu.default)
    assert count_ops(check_export(gelu, (torch.randn(2, 5),), {"x": {0: "b"}}, opset=19), "Gelu") == 0
    assert count_ops(check_export(gelu, (torch.randn(2, 5),), {"x": {0: "b"}}, opset=20), "Gelu") == 1
    rms = Fn(lambda x: torch.nn.functional.rms_norm(x, (5,), eps=1e-6))
    assert count_ops(check_export(rms, (torch.randn(2, 5),), {"x": {0: "b"}}, opset=22), "RMSNormalization") == 0
    assert count_ops(check_export(rms, (torch.randn(2, 5),), {"x": {0: "b"}}, opset=23), "RMSNormalization") == 1


@pytest.mark.slow
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


def test_a_registry_passed_to_the_export_is_used_and_the_default_one_is_not_changed():
    relu = Fn(lambda x: torch.relu(x))
    mine = onnxport.Registry()

    @mine.translates(aten.relu.default)
    def relu_as_abs(ctx, x):
        return ctx.op.Abs(x)

    inside = onnxport.to_onnx(relu, (torch.randn(3),), registry=mine)
    after = onnxport.to_onnx(relu, (torch.randn(3),))
    assert [n.op_type for n in inside.model.graph] == ["Abs"]
    assert [n.op_type for n in after.model.graph] == ["Relu"]
    assert mine.translations(aten.relu.default)[0].fn is relu_as_abs


def test_registering_an_overload_again_warns_and_the_new_translation_wins():
    mine = onnxport.Registry()
    mine.register(aten.relu.default, lambda ctx, x: ctx.op.Abs(x))
    with pytest.warns(UserWarning, match="already has a translation"):
        mine.register(aten.relu.default, lambda ctx, x: ctx.op.Neg(x))
    mine.register(aten.relu.default, lambda ctx, x: ctx.op.Abs(x), opset=(23, None))  # other opsets: no warning
    r = onnxport.to_onnx(Fn(lambda x: torch.relu(x)), (torch.randn(3),), registry=mine)
    assert [n.op_type for n in r.model.graph] == ["Neg"]


def test_the_built_in_table_is_frozen_once_loaded():
    from onnxport.translate.registry import translates

    Translations(20)
    with pytest.raises(RuntimeError, match="frozen"):
        translates(aten.relu.default)(lambda ctx, x: ctx.op.Abs(x))


@pytest.mark.slow
def test_the_default_registry_changes_under_the_capture_lock():
    from onnxport.capture.patches import CAPTURE_LOCK
    from onnxport.translate.registry import DEFAULT

    done = threading.Event()

    def register():
        onnxport.translates(aten.special_airy_ai.default)(lambda ctx, x: ctx.op.Identity(x))
        done.set()

    with CAPTURE_LOCK:  # an export in progress
        t = threading.Thread(target=register)
        t.start()
        assert not done.wait(0.5)
    t.join(timeout=30)
    assert done.is_set() and DEFAULT.translations(aten.special_airy_ai.default)
    DEFAULT.remove(aten.special_airy_ai.default)  # undone for the other tests
    assert not DEFAULT.translations(aten.special_airy_ai.default)


@pytest.mark.slow
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
