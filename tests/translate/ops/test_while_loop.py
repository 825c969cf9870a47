"""torch._higher_order_ops.while_loop -> ONNX Loop: carried values, the condition function,
additional inputs, parameters, data-dependent trip counts including 0 and 1."""

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim

from exportcheck import check_export, count_ops, MODES


def _loop(result):
    (node,) = [n for n in ir.traversal.RecursiveGraphIterator(result.model.graph) if n.op_type == "Loop"]
    return node


class CountTo(torch.nn.Module):
    """Runs ``n`` iterations (``n`` an input tensor): the trip count depends on the data."""

    def forward(self, x, n):
        def cond_fn(i, x):
            return i < n

        def body_fn(i, x):
            return i + 1, x * 2 + i

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("inline,optimize", MODES)
def test_while_loop_data_dependent_trip_count(dtype, inline, optimize):
    x = torch.randint(-3, 4, (3, 2)).to(dtype)
    n = torch.tensor(4)
    result = check_export(CountTo(), (x, n), {"x": {0: Dim("B")}, "n": None}, inline=inline, optimize=optimize,
                          inputs=[(x, torch.tensor(0)), (x[:1], torch.tensor(1)), (torch.ones(5, 2, dtype=dtype),
                                                                                   torch.tensor(7))])
    loop = _loop(result)
    assert loop.inputs[0] is None  # no trip count: the condition alone ends the loop
    body = loop.attributes["body"].as_graph()
    assert [v.dtype for v in body.inputs[:2]] == [ir.DataType.INT64, ir.DataType.BOOL]
    assert all(v.shape is not None for v in body.inputs)
    calls = [n.op_type for n in body if n.domain == "onnxport"]
    assert len(calls) == (0 if inline else 2)


@pytest.mark.slow
def test_while_loop_zero_iterations_returns_the_initial_values():
    x = torch.randn(3, 2)
    result = check_export(CountTo(), (x, torch.tensor(0)), {"x": {0: Dim("B")}, "n": None},
                          inputs=[(x, torch.tensor(-2)), (x[:2], torch.tensor(3))])
    sess = ort.InferenceSession(result.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    i, y = sess.run(None, {"x": x.numpy(), "n": np.array(0, dtype=np.int64)})
    assert int(i) == 0
    np.testing.assert_array_equal(y, x.numpy())


class Accumulate(torch.nn.Module):
    """Adds ``|x| + 0.5`` until the total passes ``limit``; a parameter scales each step."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor([1.5, 0.5]))

    def forward(self, x, limit):
        def cond_fn(acc, steps):
            return acc.sum() < limit

        def body_fn(acc, steps):
            return acc + (x.abs() + 0.5) * self.scale, steps + 1

        # x, limit and the parameter reach the while_loop node as its additional inputs
        return while_loop(cond_fn, body_fn, (torch.zeros_like(x), torch.zeros((), dtype=torch.int64)))


@pytest.mark.slow
@pytest.mark.parametrize("inline,optimize", MODES)
def test_while_loop_additional_inputs_and_parameters(inline, optimize):
    x = torch.randn(4, 2)
    result = check_export(Accumulate(), (x, torch.tensor(20.0)), {"x": {0: Dim("B")}, "limit": None},
                          inline=inline, optimize=optimize,
                          inputs=[(x, torch.tensor(-1.0)), (x[:1], torch.tensor(0.5)),
                                  (torch.randn(7, 2), torch.tensor(100.0))])
    assert count_ops(result, "Loop") == 1
    hop = next(n for n in result.program.graph.nodes if n.target is torch.ops.higher_order.while_loop)
    assert len(hop.args[3]) == 3  # x, limit, scale


class Halve(torch.nn.Module):
    """Data-dependent: halves the values until every one is below 1, counting the steps."""

    def forward(self, x):
        def cond_fn(x, k):
            return (x.abs() > 1).any()

        def body_fn(x, k):
            return x / 2, k + 1

        return while_loop(cond_fn, body_fn, (x, torch.zeros((), dtype=torch.int64)))


@pytest.mark.slow
@pytest.mark.parametrize("inline", [False, True])
def test_while_loop_condition_on_the_carried_tensor(inline):
    x = torch.randn(3, 4) * 10
    check_export(Halve(), (x,), {"x": {0: Dim("B")}}, inline=inline,
                 inputs=[(torch.full((2, 4), 0.5),), (torch.full((1, 4), 3.0),), (torch.randn(6, 4) * 1000,)])


class IntCounter(torch.nn.Module):
    """A Python int carry (an unbacked SymInt in the graph) bounded by a dynamic size."""

    def forward(self, x):
        return while_loop(lambda i, x: i < x.shape[0], lambda i, x: (i + 1, x * 2 - i), (0, x))[1]


@pytest.mark.slow
@pytest.mark.parametrize("inline", [False, True])
def test_while_loop_int_carry_and_size_bound(inline):
    result = check_export(IntCounter(), (torch.randn(3, 2),), {"x": {0: Dim("B")}}, inline=inline,
                          sizes=[{"B": 1}, {"B": 6}])
    body = _loop(result).attributes["body"].as_graph()
    assert body.inputs[2].dtype == ir.DataType.INT64 and len(body.inputs[2].shape) == 0


class WhileInScan(torch.nn.Module):
    """Per time step, halve the state until it is small (at most 20 times): a Loop in a Scan body."""

    def forward(self, x, h):
        from torch._higher_order_ops.scan import scan

        def step(h, xt):
            k, h2 = while_loop(lambda k, h: (h.abs().sum() > 1) & (k < 20), lambda k, h: (k + 1, h / 2),
                               (torch.zeros((), dtype=torch.int64), h + xt))
            return h2, k.reshape(1).clone()

        return scan(step, h, x)


@pytest.mark.slow
@pytest.mark.parametrize("inline", [False, True])
def test_while_loop_inside_scan(inline):
    T, B = Dim("T"), Dim("B")
    result = check_export(WhileInScan(), (torch.randn(5, 3) * 5, torch.randn(3)), {"x": {0: T, 1: B}, "h": {0: B}},
                          inline=inline, sizes=[{"T": 1, "B": 1}, {"T": 8, "B": 4}])
    assert count_ops(result, "Scan") == 1 and count_ops(result, "Loop") == 1


class AliasingBody(torch.nn.Module):
    def forward(self, x):
        return while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x), (torch.zeros((), dtype=torch.int64), x))


def test_body_returning_its_input_asks_for_clone():
    import onnxport

    with pytest.raises(onnxport.errors.ControlFlowError) as info:
        onnxport.to_onnx(AliasingBody(), (torch.randn(3, 4),))
    assert "while_loop" in str(info.value) and ".clone()" in str(info.value)
    assert info.value.where is not None and "test_while_loop.py" in info.value.where
