"""Size 1 of a dynamic dim: torch.export traces sizes from 2 on, so a comparison of a size with a
number the model's code makes (``if x.shape[1] == 1:``) is decided from that minimum alone, with no
guard. The export finds each such decision, runs size 1 in onnxruntime against eager PyTorch, and
exports size 1 on its own where they differ (joined under ONNX If), or, where it cannot, states
``n >= 2`` as a constraint or refuses an explicit range holding 1."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import onnxport
from exportcheck import check_export


class EqualsOne(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] == 1:
            return x * 2
        return x.sum(1, keepdim=True) + 1


class BatchOfOne(torch.nn.Module):
    def forward(self, x):
        if x.size(0) > 1:
            return x - x.mean(0, keepdim=True)
        return x * 0.5


class NotOne(torch.nn.Module):
    def forward(self, x):
        y = x.softmax(-1) if x.shape[-1] != 1 else torch.sigmoid(x)
        return y


def _right_at(result, sizes: list[dict]) -> None:
    report = result.validate(sizes=sizes, values=[])
    assert report.ok, f"\n{report}"


@pytest.mark.slow
@pytest.mark.parametrize("model,example,dims,at_one", [
    (EqualsOne(), (2, 5), {0: "b", 1: "n"}, [{"b": 3, "n": 1}, {"b": 1, "n": 1}, {"b": 2, "n": 7}]),
    (BatchOfOne(), (4, 3), {0: "batch"}, [{"batch": 1}, {"batch": 2}, {"batch": 9}]),
    (NotOne(), (2, 7), {0: "b", 1: "k"}, [{"b": 2, "k": 1}, {"b": 1, "k": 1}, {"b": 3, "k": 9}]),
], ids=["shape_eq_1", "size_gt_1", "shape_ne_1"])
def test_a_branch_decided_from_the_default_minimum_is_right_at_size_1(model, example, dims, at_one):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = check_export(model, (torch.randn(*example),), {"x": dims})
    name = next(iter(at_one[0].keys() - {"b"})) if len(at_one[0]) > 1 else "batch"
    assert [str(iv) for iv, _ in r.pieces] == [f"{name} == 1", f"{name} >= 2"]
    assert r.constraints == []  # size 1 is exported, not excluded
    said = [str(w.message) for w in seen if "on its own" in str(w.message)]
    assert len(said) == 1 and "test_size_one.py" in said[0] and f"{name} >= 2" in said[0]
    _right_at(r, at_one)


def test_a_size_1_branch_whose_sides_agree_at_1_stays_one_graph():
    class Agrees(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] > 1:
                return x.sum(0)
            return x[0]  # the sum over one row is that row

    r = check_export(Agrees(), (torch.randn(4, 3),), {"x": {0: "batch"}})
    assert not r.pieces and r.constraints == []
    floor = [g for g in r.guards if g.text == "batch >= 2"]
    assert len(floor) == 1 and "matches eager PyTorch at size 1" in floor[0].method
    _right_at(r, [{"batch": 1}])


class CausalOverCache(torch.nn.Module):
    """Attention over 4 cached steps and the ``n`` new ones, causal only when more than one step is new
    (transformers' ``is_causal = q_len > 1``): at n = 1 the new step sees every cached one."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.randn(1, 2, 4, 8))

    def forward(self, q):
        kv = torch.cat([self.cache, q], dim=2)
        return F.scaled_dot_product_attention(q, kv, kv, is_causal=q.shape[2] > 1)


def test_is_causal_given_as_a_size_condition_exports_both_sides():
    r = check_export(CausalOverCache(), (torch.randn(1, 2, 7, 8),), {"q": {2: "n"}})
    assert [str(iv) for iv, _ in r.pieces] == ["n == 1", "n >= 2"]
    _right_at(r, [{"n": 1}, {"n": 7}, {"n": 3}])


class CachedStep(torch.nn.Module):
    """New steps over a cache, the mask covering both (total = past + seq), one path for one new step."""

    def forward(self, x, cache, mask):
        if x.shape[1] == 1:
            return x * mask.sum(1)[:, None, None] + cache.mean(1, keepdim=True)
        return x.cumsum(1) + mask.shape[1]


@pytest.mark.slow
def test_size_1_of_a_dim_in_a_relation_is_a_piece_and_the_outputs_keep_their_names():
    r = check_export(CachedStep(), (torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.ones(2, 8)),
                     {"x": {0: "b", 1: "seq"}, "cache": {0: "b", 1: "past"}, "mask": {0: "b", 1: "total"}},
                     relations={"total": "past + seq"}, expect_outputs={"output": ["b", "seq", 4]})
    assert [str(iv) for iv, _ in r.pieces] == ["seq == 1", "seq >= 2"]
    _right_at(r, [{"b": 2, "seq": 1, "past": 6}, {"b": 1, "seq": 1, "past": 0}, {"b": 3, "seq": 4, "past": 2}])


def test_without_pieces_size_1_leaves_the_range_with_the_users_line():
    with pytest.warns(UserWarning, match=r"n >= 2 only \(required at .*test_size_one.py:\d+ in forward: if x.shape"):
        r = onnxport.to_onnx(EqualsOne(), (torch.randn(2, 5),), dynamic_shapes={"x": {0: "b", 1: "n"}},
                             rewrite_control_flow=False)
    assert [str(c) for c in r.constraints] == ["n >= 2"] and not r.pieces
    assert r.validate(values=[]).ok  # validation keeps to the sizes the export promises


def test_an_explicit_range_holding_1_is_refused_where_size_1_cannot_be_exported():
    with pytest.raises(onnxport.DynamicShapesError, match=r"wrong at n = 1") as info:
        onnxport.to_onnx(EqualsOne(), (torch.randn(2, 5),), dynamic_shapes={"x": {1: Dim("n", min=1, max=64)}},
                         rewrite_control_flow=False)
    assert "test_size_one.py" in (info.value.where or "") and "min=2" in info.value.hint


@pytest.mark.slow
def test_an_explicit_range_holding_1_gets_size_1_as_a_piece():
    r = onnxport.to_onnx(EqualsOne(), (torch.randn(2, 5),), dynamic_shapes={"x": {1: Dim("n", min=1, max=64)}})
    assert [str(iv) for iv, _ in r.pieces] == ["n == 1", "2 <= n <= 64"]
    _right_at(r, [{"n": 1}, {"n": 2}, {"n": 64}])


def test_validation_marks_and_tries_size_1_of_each_dim_alone():
    class Plain(torch.nn.Module):
        def forward(self, x):
            return x.cumsum(1) * 2

    report = onnxport.to_onnx(Plain(), (torch.randn(3, 6),), dynamic_shapes={"x": {0: "b", 1: "t"}}).validate(values=[])
    sets = {c.sizes: c.why for c in report.checks}
    assert sets["b=1, t=6"] == "size 1: b" and sets["b=3, t=1"] == "size 1: t"
    legend = str(report).split("\n\n")[1]
    for line in legend.splitlines():
        if line.startswith(("example", "sizes")):
            sizes = line.split("  ", 1)[1].strip().split(" (")[0]
            ones = [kv.split("=")[0] for kv in sizes.split(", ") if kv.split("=")[1] == "1"]
            assert ("size 1: " in line) == bool(ones), line
            assert all(n in line.split("size 1: ")[-1] for n in ones), line
