"""rewrite_control_flow: ``if <tensor condition>:`` -> torch.cond -> ONNX If.

Early returns, assignments in both branches (and ``elif``), one-sided assignments passing the old
value through, branches inside a rewritten loop; inputs of other sizes take both branches."""

import pytest
import torch
from torch.export import Dim

from exportcheck import check_export, count_ops
from onnxport.rewrite import rewrite_module


class Gate(torch.nn.Module):
    """Early exit in a submodule method: cheap path when the input looks easy."""

    def __init__(self):
        super().__init__()
        self.cheap = torch.nn.Linear(4, 2)
        self.full = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))

    def forward(self, feats):
        return self.route(feats.relu() - 0.2)

    def route(self, feats):
        if feats.sum() < 1.0:
            return self.cheap(feats), feats.mean(0)
        scores = self.full(feats)
        return scores * 2, feats.amax(0)


class HasGate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = Gate()

    def forward(self, x):
        out, summary = self.gate(x)
        return out + 1, summary


@pytest.mark.slow
def test_early_return_in_a_submodule_method():
    easy, hard = torch.zeros(3, 4), torch.rand(3, 4) + 1
    result = check_export(HasGate(), (hard,), ({0: Dim("n")},), rewrite_control_flow=True,
                          inputs=[(easy,), (torch.rand(5, 4) + 1,), (torch.zeros(1, 4),)])
    assert count_ops(result, "If") == 1


class ThreeWay(torch.nn.Module):
    """``if`` / ``elif`` / ``else`` assigning two values (one of another dtype) read afterwards."""

    def forward(self, a, b):
        if a.max() > b.max():
            low, high = b, a
        elif a.max() < b.max():
            low, high = a * 2, b
        else:
            low = a - b
            high = a + b
        return low - high, (high > 0).sum(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_assignments_in_every_branch(dtype):
    def mk(n, da, db):
        return torch.full((n, 3), da).to(dtype), torch.full((n, 3), db).to(dtype)

    result = check_export(ThreeWay(), mk(2, 5, 1), ({0: Dim("n")}, {0: Dim("n")}), rewrite_control_flow=True,
                          inputs=[mk(3, 1, 5), mk(4, 2, 2), mk(1, 7, 3)])
    assert count_ops(result, "If") == 2


class OneSided(torch.nn.Module):
    """Only one branch rebinds ``x``; the other passes the previous value through."""

    def forward(self, x, y):
        if (x * y).mean() > 0:
            x = x * y + 1
        return x - y


def test_one_sided_assignment_passes_the_old_value_through():
    result = check_export(OneSided(), (torch.ones(2, 3), torch.ones(2, 3)), ({0: Dim("n")}, {0: Dim("n")}),
                          rewrite_control_flow=True,
                          inputs=[(torch.ones(4, 3), -torch.ones(4, 3)), (torch.randn(5, 3), torch.randn(5, 3))])
    assert count_ops(result, "If") == 1


class SignedRows(torch.nn.Module):
    """A branch on each row inside a loop over the rows: cond inside scan."""

    def forward(self, x):
        out = torch.empty_like(x)
        for r in range(x.shape[0]):
            if x[r].sum() > 0:
                v = x[r] * 2
            else:
                v = -x[r]
            out[r] = v
        return out


def test_branch_inside_a_rewritten_loop():
    result = check_export(SignedRows(), (torch.randn(4, 3),), ({0: Dim("n")},), rewrite_control_flow=True,
                          inputs=[(torch.randn(7, 3),), (torch.randn(1, 3),)])
    assert count_ops(result, "Scan") == 1 and count_ops(result, "If") == 1


class MixedCondition(torch.nn.Module):
    """``and`` / ``not`` mixing a Python test (``is not None``) with tensor tests."""

    def forward(self, x, mask):
        scale = x.abs().max()
        if mask is not None and (x * mask).sum() > 0 and not (scale > 3):
            x = x * 2
        return x + scale


def test_and_not_over_python_and_tensor_tests():
    mk = lambda n, s: (torch.randn(n, 3) * s, torch.ones(n, 3))  # noqa: E731
    result = check_export(MixedCondition(), mk(3, 0.5), ({0: Dim("n")}, {0: Dim("n")}), rewrite_control_flow=True,
                          inputs=[mk(4, 10.0), (torch.full((2, 3), -0.5), torch.ones(2, 3)), mk(5, 0.1)])
    assert count_ops(result, "If") == 1
    x = torch.ones(2, 3)
    torch.testing.assert_close(rewrite_module(MixedCondition(), (x, x))(x, None), MixedCondition()(x, None))


class StaticChecks(torch.nn.Module):
    def forward(self, x, mask=None):
        if mask is None:
            mask = torch.ones_like(x)
        if self.training:
            x = x * 0.5
        return x * mask


def test_static_conditions_are_not_touched():
    rewritten = rewrite_module(StaticChecks(), (torch.randn(2, 3),))
    assert rewritten.onnxport_rewrite_notes == []
    check_export(StaticChecks(), (torch.randn(2, 3),), ({0: Dim("n")},), rewrite_control_flow=True)


class PartialReturn(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.max() > 5:
                return x
            x = x + 1
        return x * 2


def test_unhandled_branch_is_left_alone_with_its_line():
    x = torch.rand(3)
    with pytest.warns(UserWarning, match="left as Python"):
        rewritten = rewrite_module(PartialReturn(), (x,))
    outer = [n for n in rewritten.onnxport_rewrite_notes
             if n.where.endswith(f":{PartialReturn.forward.__code__.co_firstlineno + 1} in forward")]
    assert len(outer) == 1 and not outer[0].rewritten and "some paths" in outer[0].detail
    for v in (x, -x, x + 6):
        torch.testing.assert_close(rewritten(v), PartialReturn()(v))


class NonBoolConditions(torch.nn.Module):
    """``if`` on a number-valued tensor (true when non-zero): a sum, a count."""

    def forward(self, x):
        if x.sum():
            y = x * 2
        else:
            y = x - 1
        n_pos = (x > 0).sum()
        if n_pos:
            z = y + 1
        else:
            z = y * 3
        return z


def test_non_bool_conditions_take_the_branch_python_takes():
    result = check_export(NonBoolConditions(), (torch.rand(3, 4) + 1,), ({0: Dim("n")},), rewrite_control_flow=True,
                          inputs=[(torch.zeros(2, 4),), (-torch.rand(4, 4) - 1,), (torch.rand(1, 4) + 1,)])
    assert count_ops(result, "If") == 2
    rows = {c.inputs: c for c in result.validate().checks}
    assert rows["values 2"].why == "exact zeros" and rows["values 2"].ok  # both conditions false there


class FlaggedShapes(torch.nn.Module):
    """FocalNet's encoder: sizes bound only when a flag asks for hidden states, in a loop; a pad
    amount bound first in each of two ``if``s."""

    def forward(self, x, keep=False):
        states = ()
        if keep:
            batch, _ = x.shape
            states += (x.view(batch, -1),)
        for _ in range(2):
            x = x * 2
            if keep and len(states) > 0:
                batch, _ = x.shape
                states += (x.view(batch, -1),)
            elif keep and len(states) == 0:
                batch, _ = x.shape
                states += (x,)
        if x.shape[1] % 4 != 0:
            amount = (0, 4 - x.shape[1] % 4)
            x = torch.nn.functional.pad(x, amount)
        if x.shape[0] % 4 != 0:
            amount = (0, 0, 0, 4 - x.shape[0] % 4)
            x = torch.nn.functional.pad(x, amount)
        return x


@pytest.mark.parametrize("keep", [False, True])
def test_names_bound_under_a_flag_or_before_being_read_are_not_carried_from_before(keep):
    x = torch.randn(3, 5)
    rewritten = rewrite_module(FlaggedShapes(), (x, keep))  # checks the rewritten model against eager itself
    assert [n.rewritten for n in rewritten.onnxport_rewrite_notes].count(True) >= 2
    for shape in ((8, 8), (2, 6)):
        y = torch.randn(shape)
        torch.testing.assert_close(rewritten(y, keep), FlaggedShapes()(y, keep))


class MaybePad(torch.nn.Module):
    """Swin's and FocalNet's patch embedding: pad the image to whole patches when it is not."""

    def forward(self, pixels):
        height, width = pixels.shape[2], pixels.shape[3]
        if width % 4 != 0:
            pad_values = (0, 4 - width % 4)
            pixels = torch.nn.functional.pad(pixels, pad_values)
        if height % 4 != 0:
            pad_values = (0, 0, 0, 4 - height % 4)
            pixels = torch.nn.functional.pad(pixels, pad_values)
        return torch.nn.functional.avg_pool2d(pixels, 4)


@pytest.mark.slow
def test_padding_to_whole_patches_is_one_pad_at_every_size():
    with pytest.warns(UserWarning, match="onnxport rewrote the if"):
        r = check_export(MaybePad(), (torch.randn(1, 3, 8, 8),), {"pixels": {2: "height", 3: "width"}},
                         sizes=[{"height": 5, "width": 7}, {"height": 9, "width": 12}, {"height": 1, "width": 4}])
    assert count_ops(r, "If") == 0 and not r.constraints
    assert [n.detail for n in r.rewrite_notes if n.rewritten] == [
        "padding to a whole multiple, by (k - n % k) % k at every size"] * 2


class ByKind(torch.nn.Module):
    """A layer choosing its mixer by a string (Qwen3-Next's decoder layer): the ``elif`` is an ``if``
    inside the rewritten ``else``, reading and binding the name the outer ``if`` passes through."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

    def forward(self, x):
        h = x * 2
        if self.kind == "a":
            h = self.a(h)
        elif self.kind == "b":
            h, _ = self.b(h), None
        for r in range(x.shape[0]):  # a loop over a size: what makes the export rewrite
            h = h + x[r].sum()
        return h


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["a", "b", "c"])
def test_an_elif_inside_a_rewritten_branch_reads_the_value_from_before_the_if(kind):
    model = ByKind(kind)
    new = rewrite_module(model, (torch.randn(4, 3),), warn=False)  # compares with the model: raises if it differs
    x = torch.randn(6, 3)
    torch.testing.assert_close(new(x), model(x))
    check_export(model, (torch.randn(4, 3),), ({0: Dim("n")},), rewrite_control_flow=True,
                 inputs=[(torch.randn(7, 3),), (torch.randn(1, 3),)])


class CollectStages(torch.nn.Module):
    """FocalNet's encoder: names bound only under a flag before a loop, rebound in an ``if``/``elif``
    inside it. The ``elif`` rewritten inside the ``else`` reads them first; where the flag is off
    they were never bound, and the outer ``if`` must read them that way too."""

    def __init__(self):
        super().__init__()
        self.stages = torch.nn.ModuleList([torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)])

    def forward(self, x, collect: bool = False, before: bool = False):
        seen = () if collect else None
        if collect:
            n, width = x.shape
            seen += (x.view(n, width),)
        for stage in self.stages:
            y = stage(x)
            if collect and before:
                n, width = x.shape
                seen += (x.view(n, width),)
            elif collect and not before:
                n, width = y.shape
                seen += (y.view(n, width),)
            x = y
        for r in range(x.shape[0]):  # a loop over a size: what makes the export rewrite
            x = x + x[r].sum()
        return x if seen is None else (x, *seen)


@pytest.mark.parametrize("collect,before", [(False, False), (True, False), (True, True)])
def test_names_bound_under_a_flag_before_a_loop_of_ifs(collect, before):
    model = CollectStages()
    new = rewrite_module(model, (torch.randn(4, 3), collect, before), warn=False)  # raises if it differs
    x = torch.randn(6, 3)
    torch.testing.assert_close(new(x, collect, before), model(x, collect, before))


class RescaleUnlessKnown(torch.nn.Module):
    """transformers' ``_is_package_available``: a name bound before the ``if`` and rebound inside it
    only under an ``except`` (a path the example does not take); the branch passes its value on."""

    def __init__(self):
        super().__init__()
        self.table = {"known": 2.0}

    def forward(self, x, key: str = "known"):
        scale = x.abs().mean()
        shift = x.new_zeros(())
        if x.sum() > 0:
            try:
                shift = shift + self.table[key]
            except KeyError:
                scale = x.new_zeros(())
        return x * scale + shift


def test_a_name_rebound_only_under_an_except_inside_a_branch_passes_its_value():
    model = RescaleUnlessKnown()
    x = torch.randn(4, 3).abs()
    new = rewrite_module(model, (x,), warn=False)
    torch.testing.assert_close(new(-x), model(-x))
    torch.testing.assert_close(new(x, "unknown"), model(x, "unknown"))
    result = check_export(model, (x,), ({0: Dim("n")},), rewrite_control_flow=True,
                          inputs=[(torch.randn(7, 3).abs(),), (-torch.randn(2, 3).abs(),)])
    assert count_ops(result, "If") == 1


class NamedPadCondition(torch.nn.Module):
    """Swin v2's layer: the condition of its cut bound to a name first (``was_padded = a > 0 or b > 0``),
    which Python's ``or`` would decide by a guard on ``a > 0``."""

    def forward(self, x):
        _, h, w, _ = x.shape
        pad_right, pad_bottom = (4 - w % 4) % 4, (4 - h % 4) % 4
        y = torch.nn.functional.pad(x, (0, 0, 0, pad_right, 0, pad_bottom)).cumsum(1)
        was_padded = pad_right > 0 or pad_bottom > 0
        if was_padded:
            y = y[:, :h, :w, :]
        return y * 2


def test_a_size_condition_bound_to_a_name_stays_symbolic():
    r = check_export(NamedPadCondition(), (torch.randn(2, 8, 6, 3),), {"x": {1: "h", 2: "w"}},
                     rewrite_control_flow=True, sizes=[{"h": 8, "w": 8}, {"h": 5, "w": 8}, {"h": 8, "w": 7},
                                                       {"h": 3, "w": 9}])
    assert count_ops(r, "If") == 0 and not r.constraints
    assert any("the condition bound to 'was_padded' kept symbolic" in n.detail for n in r.rewrite_notes)
