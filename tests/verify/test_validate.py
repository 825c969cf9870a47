"""validate() looks beyond the example: translations wrong on part of the input domain, wrong
updated buffers, wrong output dtypes are reported, each row naming the input it used."""

from __future__ import annotations

import re

import onnx_ir as ir
import pytest
import torch

import onnxport
from exportcheck import Fn
from onnxport.translate.registry import override

aten = torch.ops.aten


def relu_as_abs(ctx, x):
    """Right on positive inputs, wrong on negative ones."""
    return ctx.op.Abs(x)


def failing_whys(report) -> set[str]:
    return {c.why for c in report.checks if not c.ok and not c.rejected}


@pytest.mark.parametrize("dynamic", [True, False])
def test_wrong_on_negatives_with_a_positive_example_is_reported(dynamic):
    x = torch.rand(3, 8) + 1  # the example lies in [1, 2)
    with override({aten.relu.default: relu_as_abs}):
        result = onnxport.to_onnx(Fn(torch.relu).eval(), (x,), dynamic_shapes={"x": {0: "n"}} if dynamic else None)
    report = result.validate()
    assert not report.ok
    assert "sign-symmetric values" in failing_whys(report)
    # the example's own values and the size sets alone would have passed it
    assert all(c.ok for c in report.checks if c.inputs == "example" or c.inputs.startswith("sizes"))
    assert "FAIL" in str(report) and "sign-symmetric values" in str(report)


def test_a_right_model_passes_every_kind_of_input():
    x = torch.rand(3, 8) + 1
    report = onnxport.to_onnx(Fn(torch.relu).eval(), (x,), dynamic_shapes={"x": {0: "n"}}).validate()
    assert report.ok, report
    whys = {c.why for c in report.checks}
    assert {"the example", "sign-symmetric values", "exact zeros"} <= whys
    assert any(w.startswith("large values") for w in whys) and any(w.startswith("NaN") for w in whys)
    assert any(w.startswith("4x the example") for w in whys)


class Normalize(torch.nn.Module):
    """x / sqrt(mean(x^2) + eps): defined at zero only thanks to eps."""

    def forward(self, x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)


def test_a_translation_losing_an_epsilon_is_caught_by_exact_zeros():
    def sqrt_without_eps(ctx, x):  # sqrt(v + eps) computed as sqrt(v) - eps: the epsilon lost
        return ctx.op.Sub(ctx.op.Sqrt(x), ctx.scalar(1e-5 ** 0.5, ir.DataType.FLOAT))

    x = torch.rand(2, 6) + 1
    with override({aten.sqrt.default: sqrt_without_eps}):
        result = onnxport.to_onnx(Normalize().eval(), (x,), dynamic_shapes={"x": {0: "n"}})
    assert "exact zeros" in failing_whys(result.validate())


class Lookup(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 4)

    def forward(self, ids):
        return self.emb(ids) * 2


def test_token_ids_are_tried_across_the_vocabulary():
    def embedding_clipped(ctx, weight, ids, *rest):  # right for the ids the example holds, wrong above 9
        return ctx.op.Gather(weight, ctx.op.Min(ids, ctx.scalar(9, ir.DataType.INT64)))

    ids = torch.randint(0, 10, (2, 5))
    report = onnxport.to_onnx(Lookup().eval(), (ids,), dynamic_shapes={"ids": {0: "b", 1: "t"}}).validate()
    assert report.ok, report
    ranged = [c for c in report.checks if c.why.startswith("integers across")]
    assert ranged and "ids in 0..49" in ranged[0].why
    with override({aten.embedding.default: embedding_clipped}):
        wrong = onnxport.to_onnx(Lookup().eval(), (ids,), dynamic_shapes={"ids": {0: "b", 1: "t"}})
    assert any(w.startswith("integers across") for w in failing_whys(wrong.validate()))


class Seq(torch.nn.Module):
    def forward(self, x):
        return x.cumsum(1) * 2


def test_each_sizes_row_ran_at_the_sizes_it_names():
    result = onnxport.to_onnx(Seq().eval(), (torch.randn(2, 7, 3),), dynamic_shapes={"x": {0: "batch", 1: "time"}})
    report = result.validate()
    rows = [c for c in report.checks if c.inputs.startswith("sizes")]
    assert len(rows) >= 5
    for c in rows:
        named = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", c.sizes))
        assert c.shape == (named["batch"], named["time"], 3), c
    far = [c for c in rows if c.why.startswith("4x")]
    assert far and far[0].shape[1] >= 64 and far[0].shape[0] == 8


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x):
        self.count.add_(x.sum(0))
        x.mul_(2)
        return x + self.count


def _rewire(result, output: str, make) -> onnxport.ExportResult:
    """A copy of ``result`` whose ONNX output ``output`` is replaced by ``make(graph, old value)``."""
    model = ir.from_proto(result.model_proto)
    graph = model.graph
    index = [v.name for v in graph.outputs].index(output)
    old = graph.outputs[index]
    node = make(graph, old)
    graph.append(node)
    old.name = output + ".before"
    node.outputs[0].name = output
    graph.outputs[index] = node.outputs[0]
    return result.replace(model=model)


def test_updated_buffers_and_inputs_are_compared_with_eager():
    result = onnxport.to_onnx(Counter().eval(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "n"}})
    report = result.validate()
    assert report.ok, report
    assert {"count.updated", "x.updated"} <= {c.output for c in report.checks}

    def old_count(graph, value):  # the updated buffer holds the value before the call
        return ir.node("Identity", [graph.initializers["count"]], num_outputs=1)

    stale = _rewire(result, "count.updated", old_count)
    bad = stale.validate()
    assert not bad.ok and all(c.output == "count.updated" for c in bad.checks if not c.ok and not c.rejected)

    def halved(graph, value):  # the updated input off by a factor
        half = ir.Value(name="half", const_value=ir.tensor(0.5, dtype=ir.DataType.FLOAT))
        graph.register_initializer(half)
        return ir.node("Mul", [value, half], num_outputs=1)

    assert not _rewire(result, "x.updated", halved).validate().ok


def test_an_output_of_another_dtype_fails_validation():
    result = onnxport.to_onnx(Fn(lambda x: x.argmax(-1)).eval(), (torch.randn(3, 5),), dynamic_shapes={"x": {0: "n"}})
    assert result.validate().ok

    def as_int32(graph, value):
        return ir.node("Cast", [value], attributes={"to": ir.DataType.INT32}, num_outputs=1)

    report = _rewire(result, "output", as_int32).validate()
    assert not report.ok and all("dtype" in c.note for c in report.checks if not c.ok and not c.rejected)


class Numbers(torch.nn.Module):
    def forward(self, x):
        return x + 1, 3, 2.5, True, x.shape[0] * 2


def test_python_numbers_returned_are_scalar_outputs_validated_as_such():
    result = onnxport.to_onnx(Numbers().eval(), (torch.randn(3, 2),), dynamic_shapes={"x": {0: "n"}})
    report = result.validate()
    assert report.ok, report
    assert len({c.output for c in report.checks if not c.rejected}) == 5


class TopK(torch.nn.Module):
    def forward(self, x):
        values, indices = x.topk(2, dim=-1)
        return values, indices.view(-1), x.argmax(-1), (x > 0).sum(-1)


def test_indices_among_equal_values_are_not_compared_other_outputs_are():
    report = onnxport.to_onnx(TopK().eval(), (torch.randn(3, 5),), dynamic_shapes={"x": {0: "n"}}).validate()
    assert report.ok, report
    zeros = {c.output: c for c in report.checks if c.why == "exact zeros"}
    assert zeros["output_1"].rejected and zeros["output_2"].rejected and "equal values" in zeros["output_1"].note
    assert zeros["output_0"].ok and not zeros["output_0"].rejected and zeros["output_3"].ok
    symmetric = [c for c in report.checks if c.why == "sign-symmetric values"]
    assert symmetric and all(c.ok and not c.rejected for c in symmetric)  # no ties there: compared
    assert "not compared" in str(report) and "eager rejects" not in str(report)
    assert not report.rejected and set(report.not_compared) >= {zeros["output_1"], zeros["output_2"]}


class Sanitize(torch.nn.Module):
    def forward(self, x):
        return torch.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0) * 2, x * 2


def test_nan_and_infinities_compared_where_eager_defines_the_outputs():
    def nan_to_num_keeping_nan(ctx, x, nan=None, posinf=None, neginf=None):  # NaN passed on unchanged
        out = ctx.op.Where(ctx.op.IsInf(x, detect_negative=0), ctx.scalar(posinf, ir.DataType.FLOAT), x)
        return ctx.op.Where(ctx.op.IsInf(x, detect_positive=0), ctx.scalar(neginf, ir.DataType.FLOAT), out)

    x = torch.randn(3, 4)
    right = onnxport.to_onnx(Fn(lambda x: torch.nan_to_num(x, 0.0, 1.0, -1.0) * 2).eval(), (x,),
                             dynamic_shapes={"x": {0: "n"}}).validate()
    special = [c for c in right.checks if c.why.startswith("NaN")]
    assert right.ok and special and all(not c.rejected for c in special)
    with override({aten.nan_to_num.default: nan_to_num_keeping_nan}):
        wrong = onnxport.to_onnx(Fn(lambda x: torch.nan_to_num(x, 0.0, 1.0, -1.0) * 2).eval(), (x,),
                                 dynamic_shapes={"x": {0: "n"}}).validate()
    assert {w for w in failing_whys(wrong)} == {c.why for c in special}
    # an output eager leaves NaN in: that set is not compared, the others are
    both = onnxport.to_onnx(Sanitize().eval(), (x,), dynamic_shapes={"x": {0: "n"}}).validate()
    assert both.ok and all(c.rejected for c in both.checks if c.why.startswith("NaN"))


class TakesADict(torch.nn.Module):
    def forward(self, raw):
        return raw["a"] * 2 + raw["b"].sum(-1, keepdim=True)


def test_declared_inputs_named_as_the_onnx_inputs_reach_a_dict_argument():
    from onnxport.errors import ValidationError
    from onnxport.verify import InputSpec, validate

    x = {"a": torch.randn(2, 3), "b": torch.randn(2, 3)}
    result = onnxport.to_onnx(TakesADict().eval(), (x,), dynamic_shapes=({"a": {0: "n"}, "b": {0: "n"}},),
                              input_names=["a", "b"])
    assert [i.name for i in result.captured.inputs] != ["a", "b"]  # capture names them after the dict argument
    specs = [InputSpec("a", torch.float32, ("n", 3)), InputSpec("b", torch.float32, ("n", 3))]
    report = validate(result, specs=specs)
    assert report.ok, report
    by_why = {c.why: c for c in report.checks}
    assert by_why["exact zeros"].max_abs == 0.0 and by_why["exact zeros"].scale == 0.0  # zeros reached the model
    with pytest.raises(ValidationError, match="no input declaration makes"):
        validate(result, specs=specs[:1])
