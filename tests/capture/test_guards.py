"""Shape guards: each condition on sizes decided exactly over the declared sizes (proved, kept,
adopted or refused), adopted constraints stated and respected, validation at guard boundaries."""

from __future__ import annotations

import warnings

import onnx
import pytest
import sympy
import torch
from torch.export import Dim
from torch.utils._sympy.functions import FloorDiv, Mod

import onnxport
from exportcheck import check_export, count_ops
from onnxport.capture.guards import conditions as G

T = sympy.Symbol("s0", integer=True, positive=True)
B = sympy.Symbol("s1", integer=True, positive=True)


def var(symbol=T, name="time", lo=1, hi=None, adoptable=True):
    return G.SizeVar(symbol, name, lo, hi, adoptable)


# ------------------------------------------------------------------------------ exact evaluation
def test_a_condition_true_at_every_size_is_proved_by_evaluating_every_size():
    out = G.check(2 * FloorDiv(T, 2) < T + 1, {T: var()})
    assert out.excluded == [] and out.method.startswith("every size 1..4096")
    assert out.checked > 4096  # and sizes spread beyond


def test_a_condition_false_at_some_sizes_lists_exactly_those():
    out = G.check(sympy.Eq(Mod(T, 4), 0), {T: var(hi=100)})
    assert [p[0] for p in out.excluded] == [s for s in range(1, 101) if s % 4]
    text, python, names = G.readable(sympy.Eq(Mod(T, 4), 0), out, {T: var(hi=100)})
    assert text == "time % 4 == 0" and names == ("time",)


@pytest.mark.parametrize("expr, text", [
    (FloorDiv(T - 1, 2) >= 2, "time >= 5"),
    (T <= 8, "time <= 8"),
    (sympy.Eq(Mod(T + 1, 3), 0), "time % 3 == 2"),
])
def test_simple_forms_read_in_the_users_names(expr, text):
    out = G.check(expr, {T: var()})
    assert G.readable(expr, out, {T: var()})[0] == text


def test_several_dimensions_are_evaluated_on_a_grid():
    out = G.check(sympy.Ne(B * FloorDiv(T, 4), B), {T: var(), B: var(B, "batch")})
    assert out.method.startswith("a grid of") and out.symbols == (T, B)
    assert out.excluded and all(4 <= t <= 7 for t, _ in out.excluded)
    assert (4, 1) in out.excluded and (7, 3) in out.excluded and (8, 2) not in out.excluded


@pytest.mark.parametrize("expr, kept", [
    (sympy.Ne(FloorDiv(T, 4), 1), True),  # "is this size 1?"
    (sympy.Max(1, FloorDiv(T, 2)) > 1, True),
    (256 * sympy.Max(1, FloorDiv(T, 4)) > 256, True),
    (3 * FloorDiv(T, 4) > 1, True),  # numel > 1
    (FloorDiv(FloorDiv(T, 80) - 1, 4) + 1 > 1, True),  # "q_length > 1" of a length computed from T
    (FloorDiv(T, 4) >= 1, False),  # an output size of at least 1: the model needs it
    (T + Mod(4 - Mod(T, 4), 4) > 4, True),  # a length padded to whole chunks of 4: more than one chunk
    (T + Mod(4 - Mod(T, 4), 4) >= 8, True),
    (T > 4, False),  # a length not always a multiple of 4: the model may need it
    (T >= 5, False),
    (sympy.Eq(Mod(T, 4), 0), False),
])
def test_what_counts_as_torchs_size_one_specialization(expr, kept):
    assert G.compares_with_one(expr) == kept


# ------------------------------------------------------------------------------ decisions
def test_adoptable_dimension_adopts_and_explicit_range_is_refused_with_the_excluded_sizes():
    cond = [(sympy.Eq(Mod(T, 2), 0), "model.py:7 in forward: y = x[:, ::2] + x[:, 1::2]", None)]
    guards = G.decide(cond, {T: var()})
    assert [(g.text, g.status) for g in guards] == [("time % 2 == 0", "adopted")]
    assert guards[0].holds({"time": 8}) and not guards[0].holds({"time": 9})
    with pytest.raises(onnxport.DynamicShapesError) as info:
        G.decide(cond, {T: var(lo=2, hi=100, adoptable=False)})
    assert "time % 2 == 0" in info.value.what and "time = 3, 5, 7" in info.value.what
    assert info.value.where.startswith("model.py:7")


def test_axes_named_alike_are_one_size_where_torch_gave_each_a_symbol():
    # pegasus_x: input_ids and attention_mask both "seq", torch keeps Eq(s70, s53) and a padding
    # condition over both (it raised "duplicate argument 'seq'" compiling the condition)
    S = sympy.Symbol("s2", integer=True, positive=True)
    variables = {B: var(B, "batch"), T: var(T, "seq"), S: var(S, "seq")}
    conds = [(sympy.Eq(S, T), "model.py:3 in forward: m = mask[:, :n]", None),
             (sympy.Eq(B * T - B * Mod(S, 4) + 4 * B, 4 * B * FloorDiv(S - Mod(S, 4), 4) + 4 * B),
              "model.py:4 in forward: x = x.view(b, -1, 4)", None)]
    guards = G.decide(conds, variables)
    assert [g.status for g in guards] == ["proved"]
    assert not G.adopted_of(guards)


def test_a_condition_met_choosing_strides_is_kept_never_adopted_or_refused():
    # (width - 1)//4 + 1 < ((height - 1)//4 + 1) * ((width - 1)//4 + 1): the stride order torch
    # compared for an elementwise product; its result picks a memory layout, not a value
    w = sympy.Symbol("s2", integer=True, positive=True)
    expr = FloorDiv(w - 1, 4) + 1 < (FloorDiv(T - 1, 4) + 1) * (FloorDiv(w - 1, 4) + 1)
    for variables in ({T: var(name="height"), w: var(w, "width")},
                      {T: var(name="height", lo=1, hi=64, adoptable=False), w: var(w, "width", 1, 64, False)}):
        (guard,) = G.decide([(expr, "model.py:3 in forward: y = x * s", None, True)], variables)
        assert guard.status == "kept" and guard.method == "strides or contiguity only"
        assert guard.excluded and guard.boundary  # validation looks on both sides
    (adopted,) = G.decide([(expr, "model.py:3 in forward: y = x * s", None, False)],
                          {T: var(name="height"), w: var(w, "width")})
    assert adopted.status == "adopted"


def test_a_branch_of_the_users_code_is_refused_naming_the_if():
    with pytest.raises(onnxport.SpecializationError) as info:
        G.decide([(T <= 8, None, "model.py:5 in forward: if x.shape[1] <= 8:")], {T: var()})
    assert info.value.where.endswith("if x.shape[1] <= 8:") and "rewrite_control_flow" in info.value.hint


def test_later_conditions_are_checked_on_the_sizes_adopted_ones_leave():
    conds = [(sympy.Ne(T, 2), None, None), (sympy.Eq(Mod(T, 2), 0), None, None), (T + Mod(T, 2) >= 0, None, None)]
    guards = {g.text: g for g in G.decide(conds, {T: var()})}
    assert guards["time % 2 == 0"].status == "adopted"
    assert guards["time != 2"].status == "kept" and guards["time != 2"].excluded == ({"time": 2},)


# ------------------------------------------------------------------------------ through to_onnx
class Pairs(torch.nn.Module):
    """Adds even and odd frames: correct for even lengths only."""

    def forward(self, x):  # [batch, time, 3]
        return x[:, ::2] + x[:, 1::2]


def test_a_constraint_the_model_needs_is_adopted_stated_and_respected():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(Pairs(), (torch.randn(2, 10, 3),), {"x": {0: "batch", 1: "time"}})
    said = [str(w.message) for w in caught if "export holds" in str(w.message)]
    assert len(said) == 1 and "time % 2 == 0" in said[0] and "x[:, ::2] + x[:, 1::2]" in said[0]
    assert "time = 1, 3, 5" in said[0]
    assert [str(c) for c in r.constraints] == ["time % 2 == 0"]
    assert "constraints=[time % 2 == 0]" in repr(r)
    assert {p.key: p.value for p in r.model_proto.metadata_props}["onnxport.constraints"] == "time % 2 == 0"
    assert "constraints: time % 2 == 0" in r.pretty()
    report = r.validate()
    times = [int(c.sizes.split("time=")[1]) for c in report.checks if "time=" in c.sizes]
    assert times and all(t % 2 == 0 for t in times) and min(times) == 2


def test_an_explicit_range_the_model_cannot_take_is_refused():
    with pytest.raises(onnxport.DynamicShapesError) as info:
        onnxport.to_onnx(Pairs(), (torch.randn(2, 10, 3),), dynamic_shapes={"x": {1: Dim("time", min=2, max=100)}})
    e = info.value
    assert "time % 2 == 0" in e.what and "time = 3, 5" in e.what and "x[:, ::2]" in e.where


class TwoPools(torch.nn.Module):
    """Two stride-2 max pools over time: needs time >= 4, any length above."""

    def forward(self, x):  # [batch, time, 8]
        y = torch.nn.functional.max_pool2d(x.unsqueeze(1), (2, 1))
        return torch.nn.functional.max_pool2d(y, (2, 1)).squeeze(1)


@pytest.mark.parametrize("time", ["time", Dim("time"), Dim.AUTO, Dim.DYNAMIC])
def test_a_dimension_named_without_a_range_adopts_the_minimum_the_model_needs(time):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        r = check_export(TwoPools(), (torch.randn(2, 13, 8),), {"x": {0: "batch", 1: time}})
    name = "time" if isinstance(time, (str, Dim)) else "x_dim1"
    assert [str(c) for c in r.constraints] == [f"{name} >= 4"]
    sizes = [c.sizes for c in r.validate().checks if c.why == "minimum"]
    assert sizes and f"{name}=4" in sizes[0]


class ConvPoolConv(torch.nn.Module):
    """Needs time >= 7; torch.export states time >= 3 (the first convolution's check)."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Conv1d(4, 4, 3)
        self.pool = torch.nn.MaxPool1d(2, ceil_mode=True)
        self.second = torch.nn.Conv1d(4, 4, 3)

    def forward(self, x):  # [batch, 4, time]
        return self.second(self.pool(self.first(x)))


def test_the_smallest_size_eager_takes_is_adopted_where_torch_states_a_smaller_one():
    model = ConvPoolConv()
    refused = []
    for t in range(1, 9):
        try:
            model(torch.randn(1, 4, t))
        except RuntimeError:
            refused.append(t)
    assert refused == list(range(1, 7))  # the model itself: time >= 7
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = check_export(model, (torch.randn(2, 4, 20),), {"x": {0: "batch", 2: "time"}})
    assert [str(c) for c in r.constraints] == ["time >= 7"]
    assert any("time >= 7" in str(w.message) and "eager PyTorch raises below it" in str(w.message) for w in caught)
    report = r.validate(sizes=[{"time": 7}, {"time": 8}])
    assert report.ok and not report.rejected
    with pytest.raises(onnxport.ValidationError):
        r.validate(sizes=[{"time": 6}])


def test_an_explicit_range_below_the_models_own_minimum_is_refused():
    with pytest.raises(onnxport.DynamicShapesError, match=r"declared from 3, but the model takes 7 and up") as info:
        onnxport.to_onnx(ConvPoolConv(), (torch.randn(2, 4, 20),),
                         dynamic_shapes={"x": {2: Dim("time", min=3, max=64)}})
    assert "min=7" in info.value.hint
    r = onnxport.to_onnx(ConvPoolConv(), (torch.randn(2, 4, 20),),
                         dynamic_shapes={"x": {2: Dim("time", min=7, max=64)}})
    assert r.constraints == [] and r.validate(sizes=[{"time": 7}, {"time": 9}]).ok


def test_torchs_size_one_specialization_keeps_the_sizes_and_validation_looks_there():
    class TopHalf(torch.nn.Module):
        def forward(self, x):
            return torch.topk(x, x.shape[-1] // 2, dim=-1).values

    r = check_export(TopHalf(), (torch.randn(2, 10),), {"x": {0: "batch", 1: "time"}})
    assert r.constraints == [] and not [g for g in r.guards if g.status == "kept"]  # k == 1: no layout guard
    times = {int(c.sizes.split("time=")[1]) for c in r.validate().checks if "time=" in c.sizes}
    assert {2, 3} & times and {4, 5} & times  # both sides of the kept guard


def test_every_dropped_guard_was_evaluated_exactly():
    class Ceil(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True)

    r = check_export(Ceil(), (torch.randn(2, 3, 8, 8),), {"x": {2: "h", 3: "w"}})
    proved = [g for g in r.guards if g.status == "proved"]
    assert proved and all(g.method.startswith(("every size", "a grid", "proved by range")) for g in proved)
    assert {c.why for c in r.validate().checks if "proved guard" in c.why}  # both parities looked at


class ShortOrLong(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] <= 8:
            return torch.softmax(x @ x.transpose(1, 2), dim=-1) @ x
        return x * 2.0


@pytest.mark.slow
def test_a_range_narrowed_by_a_branch_is_refused_naming_the_if_and_rewritten_on_request():
    x = torch.randn(2, 11, 6)
    ds = {"x": {0: Dim.DYNAMIC, 1: Dim.DYNAMIC}}
    with pytest.raises(onnxport.SpecializationError) as info:
        onnxport.to_onnx(ShortOrLong(), (x,), dynamic_shapes=ds, rewrite_control_flow=False)
    assert info.value.where.endswith("if x.shape[1] <= 8:")
    with pytest.warns(UserWarning, match="onnxport rewrote the if at"):  # by default, once capture fails on it
        r = onnxport.to_onnx(ShortOrLong(), (x,), dynamic_shapes=ds)
    assert count_ops(r, "If") == 1
    report = r.validate(inputs=[(torch.randn(3, 5, 6),), (torch.randn(1, 8, 6),), (torch.randn(2, 30, 6),)])
    assert report.ok, report


def test_validation_sizes_reach_below_the_example():
    r = check_export(Pairs(), (torch.randn(6, 12, 3),), {"x": {0: "batch"}})
    whys = [c.why for c in r.validate().checks]
    assert {"minimum", "minimum + 1", "below the example", "above the example"} <= set(whys)
    assert any(c.sizes == "batch=1" for c in r.validate().checks)


def test_user_sizes_breaking_an_adopted_constraint_are_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = onnxport.to_onnx(Pairs(), (torch.randn(2, 10, 3),), dynamic_shapes={"x": {1: "time"}})
    with pytest.raises(onnxport.ValidationError, match="time % 2 == 0"):
        r.validate(sizes=[{"time": 7}])
    assert r.validate(sizes=[{"time": 6}]).ok
    report = r.validate(inputs=[(torch.randn(2, 7, 3),), (torch.randn(1, 12, 3),)], sizes=[], values=[])
    whys = {c.inputs: c.why for c in report.checks}
    assert "outside the export's constraint time % 2 == 0" in whys["inputs 1"]
    assert "outside" not in whys["inputs 2"] and "outside" not in whys["example"]


def test_eager_rejection_of_generated_sizes_is_reported_not_failed():
    class NeedsFour(torch.nn.Module):
        def forward(self, x):
            torch._check(x.shape[1] != 3)  # eager raises at 3; torch.export keeps 3 in the range
            return x + 1

    r = onnxport.to_onnx(NeedsFour(), (torch.randn(2, 6),), dynamic_shapes={"x": {1: "time"}})
    report = r.validate(sizes=[{"time": 3}, {"time": 5}])
    rejected = report.rejected
    assert [c.sizes for c in rejected] == ["time=3"] and "eager rejects" in str(report)
    assert report.ok


def test_adopted_constraints_are_written_once_into_the_model_file(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = onnxport.to_onnx(TwoPools(), (torch.randn(2, 13, 8),), dynamic_shapes={"x": {1: "time"}})
    path = r.save(tmp_path / "m.onnx")
    meta = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert meta["onnxport.constraints"] == "time >= 4"


def test_nested_same_padding_sizes_are_evaluated_with_shared_subexpressions():
    # the size after n "same"-padded stride-2 convolutions nests the previous size twice per level:
    # printed whole, the expression doubles per level; with its repeated parts computed once the
    # check takes milliseconds, and gives what the whole expression gives
    from torch.utils._sympy.functions import CeilToInt, IntTrueDiv

    size = T
    for _ in range(4):
        size = FloorDiv(size + sympy.Max(0, 2 * CeilToInt(IntTrueDiv(size, 2)) + 1 - size) - 3, 2) + 1
    expr = sympy.Ne(size, 1)
    names = ("v0",)
    shared = G._compile_shared(*G._shared_form(expr), {T: "v0"}, names)
    whole = G._compile(G.python_text(expr, {T: "v0"}), names)
    assert [G._call(shared, (n,)) for n in range(1, 300)] == [G._call(whole, (n,)) for n in range(1, 300)]
    outcome = G.check(expr, {T: var()})
    assert outcome.excluded and outcome.excluded[0] == (1,)


class Concatenated(torch.nn.Module):
    def forward(self, x, y, m):
        return torch.cat([x, y]) * m


def test_size_one_is_probed_at_sizes_that_meet_the_adopted_equalities():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = check_export(Concatenated(), (torch.randn(3, 4), torch.randn(5, 4), torch.randn(8, 4)),
                         {"x": {0: "p"}, "y": {0: "s"}, "m": {0: "t"}})
    constraints = [str(c) for c in r.constraints]
    assert "(p + s) == t" in constraints and "p >= 2" not in constraints and "s >= 2" not in constraints
    assert r.validate(sizes=[{"p": 1, "s": 5, "t": 6}, {"p": 4, "s": 1, "t": 5}]).ok


class CutPaddedMap(torch.nn.Module):
    """A feature map computed from the image (patches of 4), padded to whole windows of 4 and cut back
    where it was padded (``x[:, :h, :w].contiguous()``, run at every size by the rewrite: a copy only
    where something was padded), as Swin's layers do."""

    def __init__(self):
        super().__init__()
        self.patches = torch.nn.Conv2d(3, 8, 4, 4)

    def forward(self, x):
        height, width = x.shape[2], x.shape[3]
        x = torch.nn.functional.pad(x, (0, (4 - width % 4) % 4, 0, (4 - height % 4) % 4))
        y = self.patches(x).permute(0, 2, 3, 1)
        _, h, w, c = y.shape
        pad_right, pad_bottom = (4 - w % 4) % 4, (4 - h % 4) % 4
        z = torch.nn.functional.pad(y, (0, 0, 0, pad_right, 0, pad_bottom)).cumsum(2)
        if pad_right > 0 or pad_bottom > 0:
            z = z[:, :h, :w, :].contiguous()
        return z.view(z.shape[0], h * w, c)


def test_whether_a_cut_is_contiguous_decides_no_size():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing adopted, not even on trial
        r = check_export(CutPaddedMap(), (torch.randn(2, 3, 64, 64),), {"x": {0: "batch", 2: "height", 3: "width"}},
                         rewrite_control_flow=True, values=[],
                         sizes=[{"batch": 1, "height": 96, "width": 80}, {"batch": 1, "height": 61, "width": 70},
                                {"batch": 2, "height": 20, "width": 33}])
    assert not r.constraints and count_ops(r, "If") == 0
