"""scan -> ONNX Scan: carries, several scanned inputs and outputs, dim/reverse, additional inputs
(tensors, parameters, buffers, SymInts), nested scans, one function per distinct body, aliasing.

torch's scan needs at least one step (eager raises on a length-0 scanned axis), and so does the
ONNX Scan made from it (no guard); a scan made from a Python loop by ``rewrite_control_flow`` returns
what the loop gives after no iterations (the initial carries, 0 stacked rows), checked against it.
"""

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
import scipy.spatial.distance
import torch
from torch._higher_order_ops.scan import scan
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops
from onnxport.torch_behaviour import scan_accepts_zero_length


MODES = [pytest.param(inline, opt, id=f"{'inline' if inline else 'functions'}-{'opt' if opt else 'noopt'}")
         for inline, opt in ((False, True), (True, True), (False, False))]
ALL_MODES = MODES + [pytest.param(True, False, id="inline-noopt")]


def _scan_nodes(result):
    return [n for n in ir.traversal.RecursiveGraphIterator(result.model.graph) if n.op_type == "Scan"]


def _check_body_form(result, inline):
    """Default: every Scan body is one call of a local function; inline=True: no functions left."""
    for node in _scan_nodes(result):
        body = node.attributes["body"].as_graph()
        if inline:
            assert all(n.domain != onnxport.translate.program.DOMAIN for n in body), "a call was left in the body"
        else:
            calls = [n for n in body if n.domain == onnxport.translate.program.DOMAIN]
            assert len(calls) == 1, [n.op_type for n in body]
    assert bool(result.model.functions) is not inline


# ------------------------------------------------------------------------------ the reference case
class PairwiseDistance(torch.nn.Module):
    def forward(self, x, y):
        def combine_fn(y, xi):
            return [y.clone(), torch.sqrt(((y - xi.reshape(1, -1)) ** 2).sum(1))]

        _, out = torch.ops.higher_order.scan(combine_fn, [y], [x], additional_inputs=[])
        return out


@pytest.mark.slow
@pytest.mark.parametrize("inline,optimize", ALL_MODES)
def test_pairwise_distance_matches_cdist(inline, optimize):
    x_rows, y_rows, dim = Dim("x_rows"), Dim("y_rows"), Dim("dim")
    result = check_export(
        PairwiseDistance(), (torch.randn(3, 4), torch.randn(5, 4)),
        {"x": {0: x_rows, 1: dim}, "y": {0: y_rows, 1: dim}}, inline=inline, optimize=optimize,
        sizes=[{"x_rows": 1, "y_rows": 1, "dim": 17}, {"x_rows": 20, "y_rows": 7, "dim": 4}],
        expect_inputs={"x": ["x_rows", "dim"], "y": ["y_rows", "dim"]},
        expect_outputs={"output": ["x_rows", "y_rows"]})
    assert len(_scan_nodes(result)) == 1
    assert count_ops(result, "Scan") == 1
    _check_body_form(result, inline)
    session = ort.InferenceSession(result.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for (nx, ny) in [(3, 5), (1, 1), (20, 7), (64, 3)]:
        for d in (4, 17):
            x = rng.standard_normal((nx, d)).astype(np.float32)
            y = rng.standard_normal((ny, d)).astype(np.float32)
            (got,) = session.run(None, {"x": x, "y": y})
            expected = scipy.spatial.distance.cdist(x.astype(np.float64), y.astype(np.float64))
            assert got.shape == (nx, ny)
            np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


class LoopDistances(torch.nn.Module):
    def forward(self, x, y):
        dist = torch.empty(x.shape[0], y.shape[0])
        for i in range(x.shape[0]):
            dist[i, :] = torch.sqrt(((y - x[i:i + 1]) ** 2).sum(1))
        return dist


def _session(result):
    return ort.InferenceSession(result.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("inline,optimize", MODES)
def test_zero_length_rewritten_loop_gives_the_empty_result(inline, optimize):
    # onnxruntime's Scan cannot slice a 0-length axis; the Python loop returns an empty [0, y_rows]
    x_rows, y_rows, dim = Dim("x_rows"), Dim("y_rows"), Dim("dim")
    result = onnxport.to_onnx(LoopDistances(), (torch.randn(3, 4), torch.randn(5, 4)),
                              dynamic_shapes={"x": {0: x_rows, 1: dim}, "y": {0: y_rows, 1: dim}},
                              rewrite_control_flow=True, inline=inline, optimize=optimize)
    assert len(_scan_nodes(result)) == 1
    session = _session(result)
    for nx, ny, d in [(0, 5, 4), (0, 1, 17), (1, 3, 4), (6, 2, 3)]:
        x, y = torch.randn(nx, d), torch.randn(ny, d)
        (got,) = session.run(None, {"x": x.numpy(), "y": y.numpy()})
        expected = LoopDistances()(x, y).numpy()
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_zero_length_scan_does_what_the_installed_torch_does():
    # torch 2.13's scan refuses a length-0 scanned axis and the ONNX model (no guard) refuses it too;
    # from torch 2.14 it returns empty outputs, and so does the ONNX model (guarded)
    x_rows, y_rows, dim = Dim("x_rows"), Dim("y_rows"), Dim("dim")
    result = onnxport.to_onnx(PairwiseDistance(), (torch.randn(3, 4), torch.randn(5, 4)),
                              dynamic_shapes={"x": {0: x_rows, 1: dim}, "y": {0: y_rows, 1: dim}})
    session = _session(result)
    x, y = torch.randn(0, 4), torch.randn(5, 4)
    try:
        expected = PairwiseDistance()(x, y)
    except (RuntimeError, IndexError):
        with pytest.raises(Exception, match="Scan"):
            session.run(None, {"x": x.numpy(), "y": y.numpy()})
        assert [n.op_type for n in result.model.graph] == ["Scan"]
    else:
        (got,) = session.run(None, {"x": x.numpy(), "y": y.numpy()})
        assert got.shape == tuple(expected.shape)
    for nx, ny in [(1, 2), (4, 7)]:
        x, y = torch.randn(nx, 4), torch.randn(ny, 4)
        (got,) = session.run(None, {"x": x.numpy(), "y": y.numpy()})
        np.testing.assert_allclose(got, PairwiseDistance()(x, y).numpy(), atol=1e-5, rtol=1e-5)


class LoopCarryAndRows(torch.nn.Module):
    def forward(self, x, h):
        rows = torch.zeros(x.shape[0], x.shape[1])
        for i in range(x.shape[1]):
            h = h * 0.5 + x[:, i]
            rows[:, i] = h
        return h, rows


def test_zero_length_rewritten_loop_keeps_the_initial_carry():
    T, B = Dim("T"), Dim("B")
    result = onnxport.to_onnx(LoopCarryAndRows(), (torch.randn(3, 4), torch.randn(3)),
                              dynamic_shapes={"x": {0: B, 1: T}, "h": {0: B}}, rewrite_control_flow=True)
    assert len(_scan_nodes(result)) == 1
    session = _session(result)
    for b, t in [(3, 0), (2, 0), (2, 5)]:
        x, h = torch.randn(b, t), torch.randn(b)
        got = session.run(None, {"x": x.numpy(), "h": h.numpy()})
        for g, e in zip(got, LoopCarryAndRows()(x, h)):
            assert g.shape == tuple(e.shape) and g.dtype == e.numpy().dtype
            np.testing.assert_allclose(g, e.numpy(), atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------ carries, inputs, outputs
class TwoCarries(torch.nn.Module):
    """Two carries, two scanned inputs, three outputs (one per carry and one mixed)."""

    def forward(self, a, b, c0, d0):
        def f(carry, x):
            (c, d), (ai, bi) = carry, x
            c2 = c + ai * bi
            d2 = d * 2 - bi
            return (c2, d2), (c2.clone(), d2 + ai, (c2 * d2).sum(0, keepdim=True))

        return scan(f, (c0, d0), (a, b))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("inline,optimize", MODES)
def test_scan_several_carries_inputs_outputs(dtype, inline, optimize):
    T, B = Dim("T"), Dim("B")

    def t(*shape):
        return torch.randint(-3, 4, shape).to(dtype) if dtype != torch.float32 else torch.randn(shape)

    result = check_export(TwoCarries(), (t(4, 3), t(4, 3), t(3), t(3)),
                          {"a": {0: T, 1: B}, "b": {0: T, 1: B}, "c0": {0: B}, "d0": {0: B}},
                          inline=inline, optimize=optimize,
                          sizes=[{"T": 1, "B": 2}, {"T": 9, "B": 5}])
    assert count_ops(result, "Scan") == 1
    _check_body_form(result, inline)


class DimReverse(torch.nn.Module):
    def __init__(self, dim, reverse):
        super().__init__()
        self.dim, self.reverse = dim, reverse

    def forward(self, x, h):
        def f(h, xi):
            h2 = h * 0.5 + xi
            return h2, h2 * 3

        return scan(f, h, x, dim=self.dim, reverse=self.reverse)


@pytest.mark.slow
@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_dim_and_reverse(dim, reverse):
    shape = [2, 3, 4]
    shape[dim] = 5  # the scanned axis
    h_shape = [s for i, s in enumerate(shape) if i != dim]
    T, B = Dim("T"), Dim("B")
    batch_axis = 0 if dim != 0 else 1
    result = check_export(DimReverse(dim, reverse), (torch.randn(shape), torch.randn(h_shape)),
                          {"x": {dim: T, batch_axis: B}, "h": {0: B}}, inline=dim == 1,
                          sizes=[{"T": 1, "B": 3}, {"T": 7, "B": 1}])
    (node,) = _scan_nodes(result)
    axes = node.attributes.get_ints("scan_input_axes", [0])
    directions = node.attributes.get_ints("scan_input_directions", [0])
    assert list(axes) == [dim] and list(directions) == [int(reverse)], (axes, directions)
    out_axes = node.attributes.get_ints("scan_output_axes", [0])
    out_directions = node.attributes.get_ints("scan_output_directions", [0])
    assert list(out_axes) == [dim] and list(out_directions) == [int(reverse)], (out_axes, out_directions)
    # movedim and flip folded into Scan: no Transpose, and the only Slices are the empty-scan guard's
    # (step 1 along the scanned axis)
    ops = [n.op_type for n in result.model.graph]
    assert "Transpose" not in ops and "ReverseSequence" not in ops, ops
    for n in result.model.graph:
        if n.op_type == "Slice":
            assert len(n.inputs) < 5 or n.inputs[4] is None, "a flip was left as a Slice"


class BoolCarry(torch.nn.Module):
    """A bool carry (seen-so-far) and a bool output (first time seen)."""

    def forward(self, x, seen0):
        def f(seen, xi):
            now = seen | xi
            return now, now & ~seen

        return scan(f, seen0, x)


@pytest.mark.slow
@pytest.mark.parametrize("inline", [False, True])
def test_scan_bool_carry(inline):
    T, B = Dim("T"), Dim("B")
    result = check_export(BoolCarry(), (torch.rand(5, 3) > 0.7, torch.zeros(3, dtype=torch.bool)),
                          {"x": {0: T, 1: B}, "seen0": {0: B}}, inline=inline,
                          sizes=[{"T": 1, "B": 2}, {"T": 9, "B": 4}])
    assert [v.dtype for v in result.model.graph.outputs] == [ir.DataType.BOOL, ir.DataType.BOOL]


@pytest.mark.parametrize("opset", [18, 21])
def test_scan_other_opsets(opset):
    result = check_export(PairwiseDistance(), (torch.randn(3, 4), torch.randn(5, 4)),
                          {"x": {0: "x_rows", 1: "dim"}, "y": {0: "y_rows", 1: "dim"}}, opset=opset)
    (fn,) = result.model.functions.values()
    assert fn.opset_imports[""] == opset and result.model.opset_imports[""] == opset


# ------------------------------------------------------------------------------ additional inputs
class WithState(torch.nn.Module):
    """The body uses a parameter, a buffer, an extra tensor and a SymInt of an outer input."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4) / 2)
        self.register_buffer("bias", torch.randn(4))

    def forward(self, x, h, scale):
        n = scale.shape[0]

        def f(h, xi):
            h2 = torch.tanh(h @ self.w + xi + self.bias) * scale.mean() + n
            return h2, h2 - h.shape[0]

        return scan(f, h, x)


@pytest.mark.slow
@pytest.mark.parametrize("inline,optimize", MODES)
def test_scan_additional_inputs(inline, optimize):
    T, B, N = Dim("T"), Dim("B"), Dim("N")
    result = check_export(WithState(), (torch.randn(5, 3, 4), torch.randn(3, 4), torch.randn(6)),
                          {"x": {0: T, 1: B}, "h": {0: B}, "scale": {0: N}}, inline=inline, optimize=optimize,
                          sizes=[{"T": 1, "B": 2, "N": 3}, {"T": 8, "B": 4, "N": 11}])
    assert "w" in result.model.graph.initializers or "p_w" in result.model.graph.initializers \
        or any("w" in k for k in result.model.graph.initializers)
    _check_body_form(result, inline)


# ------------------------------------------------------------------------------ nesting and sharing
class NestedScan(torch.nn.Module):
    def forward(self, x, h):
        def inner(c, v):
            return c + v, c * v

        def outer(h, row):
            c, ys = scan(inner, h, row)
            return c.clone(), ys.sum(0)

        return scan(outer, h, x)


@pytest.mark.slow
@pytest.mark.parametrize("inline,optimize", MODES)
def test_nested_scan(inline, optimize):
    T, U = Dim("T"), Dim("U")
    result = check_export(NestedScan(), (torch.randn(3, 4, 2), torch.randn(2)),
                          {"x": {0: T, 1: U}, "h": None}, inline=inline, optimize=optimize,
                          sizes=[{"T": 1, "U": 1}, {"T": 6, "U": 5}])
    assert count_ops(result, "Scan") == 2
    assert len(result.model.functions) == (0 if inline else 2)


class SameBodyTwice(torch.nn.Module):
    def forward(self, x, y, h):
        def f(h, v):
            return h + v, h * v

        h1, a = scan(f, h, x)
        h2, b = scan(f, h1, y)
        return a + b, h2


@pytest.mark.slow
def test_same_body_is_one_function():
    T, B = Dim("T"), Dim("B")
    result = check_export(SameBodyTwice(), (torch.randn(4, 3), torch.randn(4, 3), torch.randn(3)),
                          {"x": {0: T, 1: B}, "y": {0: T, 1: B}, "h": {0: B}})
    assert count_ops(result, "Scan") == 2
    assert len(result.model.functions) == 1
    (fn,) = result.model.functions.values()
    assert fn.domain == "onnxport"
    for v in list(fn.inputs) + list(fn.outputs):  # typed from the FX metadata
        assert v.dtype == ir.DataType.FLOAT and v.shape is not None, v


@pytest.mark.slow
def test_body_values_are_typed():
    result = onnxport.to_onnx(PairwiseDistance(), (torch.randn(3, 4), torch.randn(5, 4)),
                              dynamic_shapes={"x": {0: "x_rows", 1: "dim"}, "y": {0: "y_rows", 1: "dim"}})
    (node,) = _scan_nodes(result)
    body = node.attributes["body"].as_graph()
    dims = {v.name: [str(d) for d in v.shape] for v in list(body.inputs) + list(body.outputs)}
    assert sorted(dims.values()) == sorted([["y_rows", "dim"], ["dim"], ["y_rows", "dim"], ["y_rows"]]), dims
    (fn,) = result.model.functions.values()
    assert [str(d) for d in fn.inputs[1].shape] == ["dim"]


# ------------------------------------------------------------------------------ errors
class Aliasing(torch.nn.Module):
    def forward(self, x, y):
        def combine_fn(y, xi):
            return [y, (y - xi).sum(1)]

        return torch.ops.higher_order.scan(combine_fn, [y], [x], additional_inputs=[])[1]


def test_body_returning_its_input_asks_for_clone():
    with pytest.raises(onnxport.errors.ControlFlowError) as info:
        onnxport.to_onnx(Aliasing(), (torch.randn(3, 4), torch.randn(2, 4)))
    err = info.value
    assert ".clone()" in err.hint and "y" in err.hint
    assert err.where is not None and "test_scan.py" in err.where and "higher_order.scan" in err.where


@pytest.mark.parametrize("low", [0, 1])
@pytest.mark.parametrize("model,rewrite", [(PairwiseDistance(), False), (LoopDistances(), True)], ids=["scan", "loop"])
def test_zero_length_guard_only_where_pytorch_runs_0_steps_and_the_export_promises_them(model, rewrite, low):
    # a loop runs 0 times on every release; torch's own scan returns empty outputs from 2.14 on
    runs_empty = rewrite or scan_accepts_zero_length()
    x_rows, y_rows, dim = Dim("x_rows", min=low), Dim("y_rows"), Dim("dim")
    sizes = [{"x_rows": 6, "y_rows": 3, "dim": 5}] + (
        [{"x_rows": low, "y_rows": 2, "dim": 4}] if runs_empty or low else [])
    result = check_export(model, (torch.randn(3, 4), torch.randn(5, 4)),
                          {"x": {0: x_rows, 1: dim}, "y": {0: y_rows, 1: dim}}, sizes=sizes,
                          rewrite_control_flow=rewrite)
    # the guard is a Pad around the Scan (the body's sum over the dynamic dim pads inside its function)
    assert sum(n.op_type == "Pad" for n in result.model.graph) == (1 if runs_empty and low == 0 else 0)
