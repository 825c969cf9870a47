"""Relations between dims: declared (total = past + seq), derived by torch.export (u = t + 1), or
among the adopted constraints; validation generates only sizes that satisfy them."""

import pytest
import torch

import onnxport
from exportcheck import check_export
from onnxport.capture.relations import candidates, evaluate, missing_hint, parse_relations, symbol
from onnxport.verify.sizes import validation_sizes


def test_relations_parse_resolve_and_evaluate():
    rel = parse_relations({"total": "past + seq", "both": "2*total"}, {"past", "seq", "total", "both"})
    assert rel["total"] == symbol("past") + symbol("seq")
    assert evaluate(rel, {"past": 0, "seq": 3}) == {"past": 0, "seq": 3, "total": 3, "both": 6}


@pytest.mark.parametrize("relations,match", [
    ({"total": "past +"}, "not an expression"),
    ({"total": "past + other"}, "other"),
    ({"total": "total + 1"}, "by itself"),
    ({"a": "b + 1", "b": "a - 1"}, "cycle"),
])
def test_malformed_relations_are_refused(relations, match):
    with pytest.raises(onnxport.DynamicShapesError, match=match):
        parse_relations(relations, {"past", "seq", "total", "a", "b"})


def test_generated_sizes_satisfy_every_relation_and_reach_an_empty_cache():
    rel = parse_relations({"total": "past + seq"})
    sets = validation_sizes({"batch": 2, "seq": 3, "past": 5, "total": 8}, {}, [], relations=rel, empty={"past"})
    assert len(sets) >= 6
    assert all(s["total"] == s["past"] + s["seq"] for _, s in sets)
    assert {s["past"] for why, s in sets if why.startswith("empty")} == {0}


def test_candidates_and_the_hint_name_a_relation_the_example_has():
    assert ("total", "past + seq") in candidates({"past": 5, "seq": 3, "total": 8})
    hint = missing_hint({"past": 5, "seq": 3, "total": 8}, {"past": 9, "seq": 5, "total": 11})
    assert 'relations={"total": "past + seq"}' in hint
    assert missing_hint({"past": 5, "seq": 3, "total": 8}, {"past": 9, "seq": 5, "total": 14}) == ""


class MaskedSum(torch.nn.Module):
    """Attention over the cached and the new steps in miniature: the mask covers both."""

    def forward(self, past, new, mask):
        both = torch.cat([past, new], dim=1)
        if mask.shape[1] < both.shape[1]:  # a branch on sizes, like transformers' mask padding
            mask = torch.nn.functional.pad(mask, (0, both.shape[1] - mask.shape[1]))
        return (both * mask[:, :, None]).sum(1)


def _inputs(past=7, seq=3):
    return torch.randn(2, past, 4), torch.randn(2, seq, 4), torch.ones(2, past + seq)


DIMS = {"past": {0: "batch", 1: "past"}, "new": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "total"}}


@pytest.mark.slow
def test_without_the_relation_the_branch_is_refused_with_the_relation_to_declare():
    with pytest.raises(onnxport.SpecializationError) as info:
        onnxport.to_onnx(MaskedSum(), _inputs(), dynamic_shapes=DIMS, rewrite_control_flow=False)
    assert 'relations={"total": "past + seq"}' in info.value.hint


def test_a_declared_relation_decides_the_branch_and_validation_respects_it():
    r = check_export(MaskedSum(), _inputs(), DIMS, relations={"total": "past + seq"})
    sets = [c.sizes for c in r.validate().checks if c.inputs.startswith("sizes")]
    for text in sets:
        sizes = dict(kv.split("=") for kv in text.split(", "))
        assert int(sizes["total"]) == int(sizes["past"]) + int(sizes["seq"])
    with pytest.raises(onnxport.DynamicShapesError, match="do not satisfy"):
        onnxport.to_onnx(MaskedSum(), (torch.randn(2, 7, 4), torch.randn(2, 3, 4), torch.ones(2, 9)),
                         dynamic_shapes=DIMS, relations={"total": "past + seq"})


class Shift(torch.nn.Module):
    def forward(self, x, y):
        return x + y[:, 1:]


def test_a_relation_torch_export_derives_is_adopted_with_a_warning():
    with pytest.warns(UserWarning, match="u = t \\+ 1"):
        r = check_export(Shift(), (torch.randn(2, 5), torch.randn(2, 6)), {"x": {1: "t"}, "y": {1: "u"}},
                         expect_inputs={"y": [2, "t + 1"]})
    assert str(r.captured.relations["u"]) == "t + 1"


class Cat(torch.nn.Module):
    def forward(self, a, b, c):
        return torch.cat([a, b], 1) * c


def test_an_adopted_equality_is_a_relation_of_the_generated_sizes():
    with pytest.warns(UserWarning, match="== total"):
        r = check_export(Cat(), (torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 7)),
                         {"a": {1: "p"}, "b": {1: "s"}, "c": {1: "total"}})
    texts = [c.sizes for c in r.validate().checks if c.inputs.startswith("sizes")]
    assert len(texts) >= 3
    for text in texts:
        sizes = {k: int(v) for k, v in (kv.split("=") for kv in text.split(", "))}
        assert sizes["total"] == sizes["p"] + sizes["s"]


def test_when_onnxruntime_rejects_what_eager_accepts_the_report_names_the_relation():
    import dataclasses

    r = onnxport.to_onnx(MaskedSum(), _inputs(), dynamic_shapes=DIMS, relations={"total": "past + seq"})
    # the same model validated as if the relation had not been stated: total is generated on its own
    unstated = r.replace(captured=dataclasses.replace(r.captured, relations={}))
    report = unstated.validate()
    failed = [c for c in report.checks if not c.ok and not c.rejected]
    assert failed and all('relations={"total": "past + seq"}' in c.note for c in failed), report
