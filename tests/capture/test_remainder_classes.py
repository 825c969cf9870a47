"""A remainder constraint adopted on trial is dropped only on evidence that holds at every size.

Capture adopts a branch on a remainder of a size on trial (``capture/steps.py``: ``remainder_branch``). A
few sizes it excludes where onnxruntime matches eager PyTorch say nothing of the others of their
residue classes (``if w % 2 != 0: if w >= 40: ...``): the constraints stage keeps it adopted
(``settle.settle_unneeded``), and each residue class it excludes is exported
(``onnxport/remainder_sides.py``): the same ONNX graph on every class drops it (``onnxport/same_graph.py``),
other graphs are joined under ONNX ``If`` on the sizes' remainders (``onnxport/residues.py``), and where
a class does not export the constraint is stated.
"""

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import helper
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops

SPEC = {"x": {1: Dim("w")}}


class FarOddBranch(torch.nn.Module):
    """The odd side differs from the even one at ``w >= 40`` only, under a branch on the size."""

    def forward(self, x):
        w = x.shape[1]
        if w % 2 != 0:
            if w >= 40:
                return x * 2
        return x + 1


class FarOddPath(torch.nn.Module):
    """The odd side differs from the even one at ``w >= 40`` only, through the values it computes."""

    def forward(self, x):
        y = x + 1
        for dim in x.shape[-1:]:
            if dim % 2 != 0:
                y = y + (torch.arange(dim) >= 40).to(x.dtype)
                break
        return y


class SameGraph(torch.nn.Module):
    """Both sides trace to the same graph (``2 * x`` and ``x * 2`` are one ``aten.mul``)."""

    def forward(self, x):
        for dim in x.shape[-1:]:
            if dim % 2 != 0:
                return torch.tanh(2 * x)
        return torch.tanh(x * 2)


class OddScaled(torch.nn.Module):
    """The sides differ at every odd size."""

    def forward(self, x):
        scale = 1.0
        for dim in x.shape[-1:]:
            if dim % 2 != 0:
                scale = 2.0
                break
        return x * scale


def _export(model, width=16):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = onnxport.to_onnx(model, (torch.randn(2, width),), dynamic_shapes=SPEC)
    return r, [str(w.message) for w in caught]


def _matches(result, model, widths) -> dict[int, bool]:
    """width -> whether onnxruntime matches eager PyTorch there."""
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    out = {}
    for w in widths:
        x = torch.randn(2, w)
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        out[w] = bool(torch.allclose(torch.from_numpy(got), model(x)))
    return out


def test_a_trial_at_a_few_odd_sizes_does_not_drop_the_constraint():
    """Right at w = 1, 3, 5 (the trial), wrong at w = 41: the odd class does not export (its branch on
    ``w >= 40``), so ``w % 2 == 0`` is stated, and validation refuses w = 41."""
    model = FarOddBranch()
    r, said = _export(model)
    assert [str(g) for g in r.constraints] == ["w % 2 == 0"]
    stated = [m for m in said if m.startswith("the export holds for w % 2 == 0 only")]
    assert len(stated) == 1 and "not dropped: the export at w=17 failed" in stated[0], said
    assert not [m for m in said if "is not a constraint of the export" in m]
    assert _matches(r, model, [2, 16, 40, 42]) == {2: True, 16: True, 40: True, 42: True}
    with pytest.raises(onnxport.ValidationError, match=r"w % 2 == 0"):
        r.validate(sizes=[{"w": 41}])


def test_an_explicit_range_the_other_class_cannot_hold_is_refused():
    """Declared ``Dim("w", min=2, max=100)``, the export cannot state ``w % 2 == 0``: it is refused, not
    dropped on the trial at w = 3, 5, 7."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with pytest.raises(onnxport.DynamicShapesError, match=r"(?s)holds only where w % 2 == 0.*the export at w=17"):
            onnxport.to_onnx(FarOddBranch(), (torch.randn(2, 16),), dynamic_shapes={"x": {1: Dim("w", min=2, max=100)}})


def test_a_far_difference_on_the_other_class_is_joined_under_if():
    model = FarOddPath()
    r, said = _export(model)
    assert not r.constraints and count_ops(r, "If") == 1
    assert [m for m in said if "the ONNX graphs differ" in m and "traced at w=17" in m], said
    assert _matches(r, model, [16, 42, 17, 41, 43]) == {16: True, 42: True, 17: True, 41: True, 43: True}


def test_the_same_graph_on_both_classes_drops_the_constraint():
    model = SameGraph()
    r = check_export(model, (torch.randn(2, 16),), SPEC, sizes=[{"w": 7}, {"w": 41}, {"w": 10}])
    assert not r.constraints and count_ops(r, "If") == 0
    assert [g.method for g in r.guards if g.remainder] == [
        "traced on each residue class it excludes, the ONNX graph is the same: it holds on every class"]
    assert _matches(r, model, [4, 16, 5, 41]) == {4: True, 16: True, 5: True, 41: True}


@pytest.mark.parametrize("width", [16, 7], ids=["even example", "odd example"])
def test_sides_differing_at_every_odd_size_are_joined(width):
    model = OddScaled()
    r, said = _export(model, width)
    assert not r.constraints and count_ops(r, "If") == 1
    assert [m for m in said if "joined them under ONNX If" in m], said
    assert _matches(r, model, [2, 8, 16, 3, 9, 41]) == {2: True, 8: True, 16: True, 3: True, 9: True, 41: True}
    assert r.validate(sizes=[{"w": 6}, {"w": 11}], values=[]).ok


def _model(nodes, inits=(), name="g"):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, "w"])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, "w"])
    return helper.make_model(helper.make_graph(nodes, name, [x], [y], initializer=list(inits)),
                             opset_imports=[helper.make_opsetid("", 18)])


def test_sides_differing_at_every_odd_size_on_an_explicit_range_are_joined():
    """Declared ``Dim("w", min=1, max=100)``: the odd sizes' side differs from the example's everywhere, and it
    exports, so the classes are joined under If; not refused because a few odd sizes differ in onnxruntime."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = onnxport.to_onnx(OddScaled(), (torch.randn(2, 16),), dynamic_shapes={"x": {1: Dim("w", min=1, max=100)}})
    assert not r.constraints
    assert [m for m in map(str, (w.message for w in caught)) if "joined them under ONNX If" in m]
    assert count_ops(r, "If") == 1
    assert all(_matches(r, OddScaled(), range(1, 44)).values())


class ThreeModFour(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        for dim in x.shape[-1:]:
            if dim % 4 == 3:
                y = x * 2
                break
        return y


def test_a_class_whose_first_size_above_the_example_is_out_of_range_is_traced_below_it():
    """Declared ``Dim("w", min=1, max=18)``, example 16: the class ``w % 4 == 3`` has no size in 16..18, so it is
    traced at its smallest, w = 3, not at 19, outside the range (which refused the export)."""
    from exportcheck import assert_right_at_widths

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        r = onnxport.to_onnx(ThreeModFour(), (torch.randn(2, 16),), dynamic_shapes={"x": {1: Dim("w", min=1, max=18)}})
    assert not r.constraints
    assert assert_right_at_widths(r, ThreeModFour(), range(1, 19)) == list(range(1, 19))


def test_the_period_of_a_remainder_covers_its_floor_divisions():
    from onnxport.capture.guards.conditions import Guard, GuardStatus
    from onnxport.residues import divisors

    def guard(python):
        return Guard(python, GuardStatus.KEPT, None, python=python, names=("w",), remainder=True)

    assert divisors(guard("(w % 4) != 1")) == [4]
    assert divisors(guard("((w // 8) % 2) != 1")) == [16]
    assert divisors(guard("((w // 2) % 3) == 1")) == [6]
    assert divisors(guard("(w % h) == 0")) is None
    assert divisors(guard("(4*(w // 4)) != w")) == [4]
    assert divisors(guard("w != 21")) is None
    assert divisors(guard("(w & 3) != 1")) == [4]  # a mask keeps the low bits of its length
    assert divisors(guard("(1 | w) != w")) == [2]
    assert divisors(guard("((w // 4) & 1) != 1")) == [8]
    assert divisors(guard("(w & h) != 1")) is None


def test_same_graph_ignores_value_names_only():
    from onnxport.same_graph import same_graph

    def scaled(value, names=("t", "c"), alpha=1.0):
        c = helper.make_tensor(names[1], onnx.TensorProto.FLOAT, [1], [value])
        return _model([helper.make_node("Mul", ["x", names[1]], [names[0]]),
                       helper.make_node("Elu", [names[0]], ["y"], alpha=alpha)], [c])

    base = scaled(2.0)
    assert same_graph(base, scaled(2.0, ("other", "weight")))
    base.doc_string, base.graph.doc_string = "made here", "and there"
    assert same_graph(base, scaled(2.0))
    assert not same_graph(base, scaled(3.0))  # an initializer's values
    assert not same_graph(base, scaled(2.0, alpha=0.5))  # an attribute
    swapped = _model([helper.make_node("Mul", ["c", "x"], ["t"]), helper.make_node("Elu", ["t"], ["y"])],
                     [helper.make_tensor("c", onnx.TensorProto.FLOAT, [1], [2.0])])
    assert not same_graph(base, swapped)  # the topology: which input each node reads
    added = _model([helper.make_node("Add", ["x", "c"], ["t"]), helper.make_node("Elu", ["t"], ["y"])],
                   [helper.make_tensor("c", onnx.TensorProto.FLOAT, [1], [2.0])])
    assert not same_graph(base, added)  # an op type


def test_the_residue_condition_reads_each_size_modulo_the_period():
    """``h % 2 == 0 and w % 2 == 0`` as a class table over (h, w) modulo 2, run in onnxruntime."""
    from onnxport.capture.guards.conditions import Guard, GuardStatus
    from onnxport.residues import condition_model, residues_of

    def guard(name):
        return Guard(f"{name} % 2 == 0", GuardStatus.ADOPTED, None, (), (), "", f"({name} % 2) == 0", (name,),
                     remainder=True)

    residues = residues_of([guard("h"), guard("w")], {"h": 8, "w": 9})
    assert residues.dims == ("h", "w") and residues.period == 2
    classes = residues.where([guard("h"), guard("w")])
    assert classes == {(0, 0)}
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["h", "w"])
    sides = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x],
                                                [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT,
                                                                               ["h", "w"])]),
                              opset_imports=[helper.make_opsetid("", 18)])
    condition = condition_model(residues, classes, sides)
    onnx.checker.check_model(condition, full_check=True)
    session = ort.InferenceSession(condition.SerializeToString())
    for h, w in [(8, 10), (2, 4), (7, 10), (8, 9), (5, 3)]:
        got = session.run(None, {"x": np.zeros((h, w), np.float32)})[0]
        assert bool(got[0]) is (h % 2 == 0 and w % 2 == 0), (h, w)
    odd = Guard("h % 2 == 1 or h < 4", GuardStatus.ADOPTED, None, (), (), "", "(h % 2) == 1 or h < 4", ("h",),
                remainder=True)
    assert residues_of([odd], {"h": 8}) is None  # not alike on its class: h = 2 and h = 8


def test_a_range_written_with_a_remainder_is_no_residue_condition():
    """``seq >= 257`` as a padding to whole chunks writes it (with ``seq % 256``) holds on no whole class: it is
    judged as a range, never kept adopted for the residue classes; ``w % 4 != 1`` is a residue condition."""
    from types import SimpleNamespace

    from onnxport.residues import on_classes

    padded = "((seq + ((256 + (-1)*(seq % 256)) % 256)) // 256) >= 2"
    chunks = SimpleNamespace(python=padded, names=("seq",), holds=lambda s: (s["seq"] + (-s["seq"]) % 256) // 256 >= 2)
    residue = SimpleNamespace(python="(w % 4) != 1", names=("w",), holds=lambda s: s["w"] % 4 != 1)
    assert not on_classes(chunks) and on_classes(residue)
