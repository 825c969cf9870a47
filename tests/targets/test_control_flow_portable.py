"""``target="portable"``: the control-flow models OpenVINO refuses as exported by default (local
functions; a Scan body reading a graph input) load there, and match eager PyTorch in OpenVINO at
the example and at other sizes, the user's dim names kept; still right in onnxruntime."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest
import torch
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim

import onnxport
from onnxport.errors import ValidationError
from ovload import compile_in_openvino
from tests.translate.ops.test_scan import PairwiseDistance as ScanDistances


class LoopDistances(torch.nn.Module):
    """The same as a Python loop over ``x.shape[0]``, rewritten to a Scan whose body reads ``y``."""

    def forward(self, x, y):
        dist = torch.empty(x.shape[0], y.shape[0])
        for i in range(x.shape[0]):
            dist[i, :] = torch.sqrt(((y - x[i:i + 1]) ** 2).sum(1))
        return dist


class Branches(torch.nn.Module):
    def forward(self, x, y):
        return torch.cond(x.sum() > 0, lambda x, y: (x * y + 1, (x - y).sum(1)),
                          lambda x, y: (x - y * 2, (x * y).sum(1) - 3), (x, y))


class CountTo(torch.nn.Module):
    """``n`` (an input) iterations of ``x * 2 + i``: the trip count depends on the data."""

    def forward(self, x, n):
        return while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 2 + i),
                          (torch.zeros((), dtype=torch.int64), x))


DISTANCE_DIMS = {"x": {0: Dim("x_rows"), 1: Dim("dim")}, "y": {0: Dim("y_rows"), 1: Dim("dim")}}
CASES = {  # name: model, example, dynamic_shapes, to_onnx options, validation sizes, extra inputs, dims
    "scan": (ScanDistances(), (torch.randn(3, 4), torch.randn(5, 4)), DISTANCE_DIMS, {},
             [{"x_rows": 1, "y_rows": 2, "dim": 7}, {"x_rows": 9, "y_rows": 4, "dim": 3}], None,
             ({"x": ["x_rows", "dim"], "y": ["y_rows", "dim"]}, {"output": ["x_rows", "y_rows"]})),
    "python loop": (LoopDistances(), (torch.randn(3, 4), torch.randn(5, 4)), DISTANCE_DIMS,
                    {"rewrite_control_flow": True},
                    [{"x_rows": 1, "y_rows": 2, "dim": 7}, {"x_rows": 9, "y_rows": 4, "dim": 3}], None,
                    ({"x": ["x_rows", "dim"], "y": ["y_rows", "dim"]}, {"output": ["x_rows", "y_rows"]})),
    "cond": (Branches(), (torch.rand(3, 4) + 0.1, torch.rand(3, 4)), {"x": {0: Dim("B")}, "y": {0: Dim("B")}}, {},
             [{"B": 1}, {"B": 7}], [(-torch.rand(2, 4) - 0.1, torch.rand(2, 4))],
             ({"x": ["B", 4], "y": ["B", 4]}, {})),
    "while_loop": (CountTo(), (torch.randn(3, 2), torch.tensor(4)), {"x": {0: Dim("B")}, "n": None}, {},
                   [{"B": 1}, {"B": 6}], [(torch.randn(5, 2), torch.tensor(0)), (torch.randn(2, 2), torch.tensor(7))],
                   ({"x": ["B", 2]}, {})),
}


def _dims(values) -> dict:
    return {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in values}


@pytest.mark.parametrize("case", list(CASES))
def test_portable_control_flow_runs_right_in_openvino(case, openvino):
    model, example, dims, options, sizes, inputs, (in_dims, out_dims) = CASES[case]
    result = onnxport.to_onnx(model.eval(), example, dynamic_shapes=dims, target="portable", **options)
    assert result.target == "portable"
    assert not result.model.functions
    onnx.checker.check_model(result.model_proto, full_check=True)
    compile_in_openvino(openvino, result.model_proto)  # loads
    report = result.validate(inputs=inputs, sizes=sizes, values=[], runtime="openvino")
    assert report.ok, report
    assert report.runtime.startswith("OpenVINO")
    assert {c.inputs for c in report.checks} >= {"example", "sizes 1", "sizes 2"}
    graph_dims = {**_dims(result.model.graph.inputs), **_dims(result.model.graph.outputs)}
    for name, expected in {**in_dims, **out_dims}.items():
        assert graph_dims[name] == expected, (name, graph_dims[name])
    assert result.validate(inputs=inputs, sizes=sizes[:1], values=[]).ok  # portable validates in onnxruntime


def test_default_export_of_a_scan_does_not_load_in_openvino(openvino):
    """What ``portable`` is for: the default export keeps its bodies as local functions, and the
    validation on OpenVINO says OpenVINO could not load it."""
    model, example, dims, *_ = CASES["scan"]
    result = onnxport.to_onnx(model, example, dynamic_shapes=dims)
    assert result.target == "onnxruntime" and result.model.functions
    with pytest.raises(ValidationError, match="OpenVINO .* could not load the model"):
        result.validate(runtime="openvino")


def test_loop_bodies_read_no_graph_input_from_outside():
    """The rewritten Python loop's Scan body read ``y`` from the main graph; under ``portable`` it
    is passed in as a state, and every body reads only its inputs, its own values and initializers."""
    model, example, dims, options, *_ = CASES["python loop"]
    default = onnxport.to_onnx(model, example, dynamic_shapes=dims, inline=True, **options)
    portable = onnxport.to_onnx(model, example, dynamic_shapes=dims, target="portable", **options)
    assert _outer_reads(default.model) == {"y"}
    assert _outer_reads(portable.model) == set()
    assert portable.validate(sizes=[{"x_rows": 2, "y_rows": 7, "dim": 5}], values=[]).ok


def _outer_reads(model: ir.Model) -> set[str]:
    """The names of the non-initializer values a Scan or Loop body reads from outside itself."""
    initializers = set(model.graph.initializers.values())
    found = set()
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.op_type not in ("Scan", "Loop"):
            continue
        body = node.attributes["body"].as_graph()
        inside = set(body.inputs) | {v for n in ir.traversal.RecursiveGraphIterator(body) for v in n.outputs}
        found |= {v.name for n in ir.traversal.RecursiveGraphIterator(body) for v in n.inputs
                  if v is not None and v not in inside and v not in initializers}
    return found
