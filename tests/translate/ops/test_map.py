"""torch._higher_order_ops.map -> ONNX Scan with no state: one or several mapped inputs, extra
arguments, parameters, several outputs. torch's map needs at least one row (eager raises on a
length-0 leading axis), and so does the ONNX model (no guard for 0 rows)."""

import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from torch._higher_order_ops.map import map as hmap
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops, MODES


def _scan(result):
    (node,) = [n for n in ir.traversal.RecursiveGraphIterator(result.model.graph) if n.op_type == "Scan"]
    return node


class OneInput(torch.nn.Module):
    def forward(self, x, w):
        return hmap(lambda row, w: (row * w).sum(-1) + row.shape[0], x, w)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("inline,optimize", MODES)
def test_map_one_input_with_argument(dtype, inline, optimize):
    T, D = Dim("T"), Dim("D")
    x = torch.randint(-4, 5, (3, 4, 5)).to(dtype)
    w = torch.randint(-4, 5, (5,)).to(dtype)
    result = check_export(OneInput(), (x, w), {"x": {0: T, 1: D}, "w": None}, inline=inline, optimize=optimize,
                          sizes=[{"T": 1, "D": 2}, {"T": 8, "D": 1}], expect_outputs={"output": ["T", "D"]})
    node = _scan(result)
    assert node.attributes["num_scan_inputs"].as_int() == 1
    assert len(node.inputs) == 1  # no state variables; w is captured by the body


def test_map_over_zero_rows_raises_as_pytorch_does():
    T, D = Dim("T"), Dim("D")
    result = onnxport.to_onnx(OneInput(), (torch.randn(3, 4, 5), torch.randn(5)),
                              dynamic_shapes={"x": {0: T, 1: D}, "w": None})
    session = ort.InferenceSession(result.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x, w = torch.randn(0, 4, 5), torch.randn(5)
    with pytest.raises(RuntimeError, match="cannot be 0"):
        OneInput()(x, w)
    with pytest.raises(Exception, match="Scan"):
        session.run(None, {"x": x.numpy(), "w": w.numpy()})
    assert [n.op_type for n in result.model.graph] == ["Scan"]


class SeveralInputsOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 2)

    def forward(self, a, b, c):
        def f(xs, c):
            ai, bi = xs
            p = self.proj(ai * bi)
            return p + c, ai - bi, p.sum(0) > 0

        return hmap(f, (a, b), c)


@pytest.mark.slow
@pytest.mark.parametrize("inline,optimize", MODES)
def test_map_several_inputs_and_outputs(inline, optimize):
    T, R = Dim("T"), Dim("R")
    result = check_export(SeveralInputsOutputs(), (torch.randn(4, 5, 3), torch.randn(4, 5, 3), torch.randn(2)),
                          {"a": {0: T, 1: R}, "b": {0: T, 1: R}, "c": None}, inline=inline, optimize=optimize,
                          sizes=[{"T": 1, "R": 1}, {"T": 6, "R": 3}])
    node = _scan(result)
    assert node.attributes["num_scan_inputs"].as_int() == 2 and len(node.outputs) == 3
    assert [v.dtype for v in result.model.graph.outputs] == [ir.DataType.FLOAT, ir.DataType.FLOAT, ir.DataType.BOOL]
    assert len(result.model.functions) == (0 if inline else 1)


class MapOfScan(torch.nn.Module):
    """A map whose body runs a scan (a cumulative sum per row)."""

    def forward(self, x):
        from torch._higher_order_ops.scan import scan

        def row_cumsum(row):
            def step(c, v):
                c2 = c + v
                return c2, c2.clone()

            return scan(step, torch.zeros_like(row[0]), row)[1]

        return hmap(row_cumsum, x)


@pytest.mark.slow
@pytest.mark.parametrize("inline", [False, True])
def test_map_with_nested_scan(inline):
    T, U = Dim("T"), Dim("U")
    result = check_export(MapOfScan(), (torch.randn(3, 4),), {"x": {0: T, 1: U}}, inline=inline,
                          sizes=[{"T": 1, "U": 1}, {"T": 5, "U": 7}])
    assert count_ops(result, "Scan") == 2


class AliasingMap(torch.nn.Module):
    def forward(self, x):
        return hmap(lambda row: row, x)


def test_map_body_returning_its_input_asks_for_clone():
    import onnxport

    with pytest.raises(onnxport.errors.ControlFlowError) as info:
        onnxport.to_onnx(AliasingMap(), (torch.randn(3, 4),))
    assert "map" in str(info.value) and ".clone()" in str(info.value)
    assert info.value.where is not None and "test_map.py" in info.value.where
