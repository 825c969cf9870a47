"""Branches on sizes whose two sides agree are not refused: the shapes of diffusers' UNet.

* A side that differs from the other only by layout-only calls (diffusers' upsampling block,
  ``if hidden_states.shape[0] >= 64: hidden_states = hidden_states.contiguous()``, and the same under
  ``numel() * scale_factor > 2**31`` with a scale computed from the sizes asked for) is the shared
  graph, no guard kept (``capture/layout_branches.py``; ``rewrite/size_branches.py`` where the model is
  rewritten).
* A branch on a remainder the rewrite leaves as Python (the UNet's ``for dim in sample.shape[-2:]: if dim
  % default_overall_up_factor != 0: forward_upsample_size = True; break``) is adopted on trial at the
  first capture (``capture/steps.py``: ``_remainder_left``, ``rewrite/left_branches.py``: the rewritten
  model's capture would meet it again), never refused, and never dropped on a trial at a few sizes: each
  residue class it excludes is traced (``onnxport/remainder_sides.py``), the graphs the same on every class
  dropping it, other graphs joined under ONNX If on the sizes' remainders; else the constraint is stated
  (``tests/capture/test_remainder_classes.py``).
"""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops
from onnxport.capture.trace import ADOPTED_PREFIX


class Upsample(torch.nn.Module):
    """diffusers' ``Upsample2D.forward`` (interpolating, no convolution): contiguous before the
    nearest-neighbour upsampling past a batch of 64 or past ``2**31`` output elements."""

    def forward(self, x, output_size=None):
        if x.shape[0] >= 64:
            x = x.contiguous()
        scale_factor = 2 if output_size is None else max([f / s for f, s in zip(output_size, x.shape[-2:])])
        if x.numel() * scale_factor > pow(2, 31):
            x = x.contiguous()
        if output_size is None:
            return F.interpolate(x, scale_factor=2.0, mode="nearest")
        return F.interpolate(x, size=output_size, mode="nearest")


class ForwardUpsampleSize(torch.nn.Module):
    """The UNet's skeleton: a stride-2 convolution, the upsampling back, the skip concatenated. Where a
    size is odd, the upsampling is asked for the skip's size (``forward_upsample_size``); where both
    are even, a scale of 2 gives the same size."""

    def __init__(self, given_size: bool = False):
        super().__init__()
        self.down = torch.nn.Conv2d(3, 3, 3, stride=2, padding=1)
        self.up = Upsample()
        self.out = torch.nn.Conv2d(6, 3, 1)
        self.given_size = given_size

    def forward(self, x):
        forward_upsample_size = self.given_size
        for dim in x.shape[-2:]:
            if dim % 2 != 0:
                forward_upsample_size = True
                break
        y = self.down(x)
        y = self.up(y, x.shape[2:] if forward_upsample_size else None)
        return self.out(torch.cat([x, y], 1))


def _adopted(caught) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith(ADOPTED_PREFIX)]


def _export_upsample(model, shape, sizes, x=None):
    """``model`` exported at an example of ``shape`` (or ``x``) with dynamic batch, h and w, checked at
    ``sizes``; the result and the warnings it gave."""
    x = torch.randn(*shape) if x is None else x
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(model, (x,), {"x": {0: Dim("batch"), 2: Dim("h"), 3: Dim("w")}}, sizes=sizes)
    return r, caught


def test_layout_only_sides_are_the_shared_graph_with_no_guard():
    r, caught = _export_upsample(ForwardUpsampleSize(given_size=True), (2, 3, 6, 8),
                                 [{"batch": 70, "h": 4, "w": 6}, {"batch": 2, "h": 7, "w": 5}])
    assert not r.constraints and not _adopted(caught)
    assert count_ops(r, "If") == 0
    assert not [g for g in r.guards if "batch" in g.names and g.status != "proved"]
    assert r.captured.strategy == "non-strict" and not r.rewrite_notes  # both captures the model as given


def test_a_remainder_branch_is_traced_on_each_class_and_joined():
    """Traced at an even example, the upsampling doubles sizes, wrong at odd ones: the classes where h or w
    is odd, traced (h odd; h even and w odd: the same graph), ask the upsampling for the skip's size, and
    are joined with the example's graph under If (``onnxport/remainder_sides.py``)."""
    x = torch.randn(2, 3, 8, 10)
    r, caught = _export_upsample(ForwardUpsampleSize(), None,
                                 [{"batch": 1, "h": 12, "w": 2}, {"batch": 3, "h": 7, "w": 8},
                                  {"batch": 2, "h": 8, "w": 10}], x=x)
    assert not r.constraints and not _adopted(caught) and count_ops(r, "If") == 1
    said = [str(w.message) for w in caught if "joined them under ONNX If" in str(w.message)]
    assert len(said) == 1 and "h % 2 == 0 and w % 2 == 0" in said[0], said
    assert "traced at h=9, w=11; h=8, w=11" in said[0] and "2 graphs" in said[0]
    # traced at other sizes, the result's example is still the user's input, and the model holds there
    assert torch.equal(r.example[0][0], x) and r.example[1] == {}
    report = r.validate(sizes=[], values=[])
    assert report.ok and report.checks and {(c.inputs, c.sizes) for c in report.checks} == {
        ("example", "batch=2, h=8, w=10")}, report


def test_a_remainder_branch_traced_on_its_general_side_holds_at_every_size():
    """Traced at odd sizes, the constraint is ``h % 2 == 1``; its classes h even (w odd, then w even) are
    traced and joined (the class h even, w odd has the example's graph)."""
    r, caught = _export_upsample(ForwardUpsampleSize(), (2, 3, 9, 11),
                                 [{"batch": 70, "h": 4, "w": 6}, {"batch": 1, "h": 7, "w": 2},
                                  {"batch": 3, "h": 5, "w": 12}, {"batch": 2, "h": 8, "w": 13}])
    assert not r.constraints and not _adopted(caught) and count_ops(r, "If") == 1


class GroupsOfFour(torch.nn.Module):
    """A remainder branch whose sides return other shapes: neither side holds on the other's sizes, and
    the trial at n = 1, 2, 3 fails."""

    def forward(self, x):
        grouped = False
        for dim in x.shape[1:]:
            if dim % 4 == 0:
                grouped = True
                break
        return x.reshape(x.shape[0], -1, 4).sum(2) if grouped else x[:, :1] * 2


def test_a_remainder_branch_whose_sides_hold_on_their_classes_only_is_joined():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(GroupsOfFour(), (torch.randn(2, 8),), {"x": {0: Dim("batch"), 1: Dim("n")}},
                         sizes=[{"batch": 3, "n": 12}, {"batch": 1, "n": 4}, {"batch": 2, "n": 6},
                                {"batch": 3, "n": 9}])
    assert not r.constraints and not _adopted(caught) and count_ops(r, "If") == 1
    assert r.captured.strategy == "non-strict" and not r.rewrite_notes  # the first capture adopted it
    said = [str(w.message) for w in caught if "joined them under ONNX If" in str(w.message)]
    assert len(said) == 1 and "n % 4 == 0" in said[0] and "traced at n=9" in said[0] and "modulo 4" in said[0]
    assert tuple(r.example[0][0].shape) == (2, 8)


def test_a_remainder_branch_is_refused_where_control_flow_stays_as_written():
    with pytest.raises(onnxport.SpecializationError, match=r"n % 4 == 0"):
        onnxport.to_onnx(GroupsOfFour(), (torch.randn(2, 8),), dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("n")}},
                         rewrite_control_flow=False)


class SameEitherWay(torch.nn.Module):
    """A remainder branch whose sides compute the same values (``x * 2`` and ``x + x``)."""

    def forward(self, x):
        odd = False
        for dim in x.shape[-2:]:
            if dim % 4 != 0:
                odd = True
                break
        return torch.tanh(x * 2 if odd else x + x)


def test_a_remainder_branch_whose_sides_agree_is_no_constraint():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(SameEitherWay(), (torch.randn(2, 8, 12),), {"x": {1: Dim("h"), 2: Dim("w")}},
                         sizes=[{"h": 5, "w": 6}, {"h": 16, "w": 3}])
    assert not r.constraints and not _adopted(caught)


def test_remainder_constraints_are_found_by_their_expression():
    """``flipped`` takes the constraints whose expression holds a ``Mod`` (``Guard.remainder``), not
    those whose text shows a ``%``."""
    import sympy
    from torch.utils._sympy import functions as F

    from onnxport.capture.guards.conditions import EAGER_RUNS, Guard, GuardStatus, takes_remainder
    from onnxport.remainder_sides import flipped

    h = sympy.Symbol("s0", integer=True, positive=True)
    assert takes_remainder(sympy.Eq(F.Mod(h, 2), 0)) and takes_remainder(sympy.Ne(F.PythonMod(h + 1, 4), 0))
    assert takes_remainder(sympy.Eq(sympy.Mod(h, 8), 0))
    assert not takes_remainder(h >= 4) and not takes_remainder(sympy.Eq(F.FloorDiv(h, 2), 3))

    def guard(text, remainder, method=EAGER_RUNS):
        return Guard(text, GuardStatus.ADOPTED, None, ({"h": 1},), (), method, text, ("h",), remainder=remainder)

    kept = [guard("h % 2 == 0", True), guard("h >= 4", False), guard("h % 4 == 0", False),
            guard("h % 8 == 0", True, method="adopted")]

    class Result:
        constraints = kept

    assert flipped(Result()) == [kept[0]]


class ScaledWhereOdd(torch.nn.Module):
    """A remainder branch the rewrite leaves as Python (a flag set, then ``break``) whose sides differ:
    traced at an odd size, torch's condition is ``w % 2 != 0``."""

    def forward(self, x):
        scale = 1.0
        for dim in x.shape[-1:]:
            if dim % 2 != 0:
                scale = 2.0
                break
        return x * scale


class ScaledWhereTwoModFour(torch.nn.Module):
    """The same under ``while True: ... break``, traced where the branch is not taken."""

    def forward(self, x):
        scale, n = 1.0, x.shape[-1]
        while True:
            if n % 4 == 2:
                scale = 3.0
            break
        return x * scale


@pytest.mark.parametrize("model, example, needed", [
    (ScaledWhereOdd(), 7, "w % 2 == 1"), (ScaledWhereOdd(), 8, "w % 2 == 0"),
    (ScaledWhereTwoModFour(), 8, "w % 4 in (0, 1, 3)"), (ScaledWhereTwoModFour(), 6, "w % 4 == 2")],
    ids=["odd", "even", "not 2 mod 4", "2 mod 4"])
def test_a_remainder_branch_whose_sides_differ_is_joined_whichever_side_the_example_takes(model, example, needed):
    """A condition ``!=`` on a remainder is the model's where its own branch reads it, not torch's choice
    among equivalent traces: the trace holds only where it does, and the classes it excludes are traced
    and joined under If, onnxruntime matching eager PyTorch at every size."""
    import onnxruntime as ort

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = onnxport.to_onnx(model, (torch.randn(2, example),), dynamic_shapes={"x": {1: Dim("w")}})
    assert not r.constraints and count_ops(r, "If") == 1
    said = [str(w.message) for w in caught if "joined them under ONNX If" in str(w.message)]
    assert len(said) == 1 and f"holds only where {needed} " in said[0], said
    session = ort.InferenceSession(r.model_proto.SerializeToString())
    for w in range(2, 14):
        x = torch.randn(2, w)
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        assert torch.allclose(torch.from_numpy(got), model(x)), w
