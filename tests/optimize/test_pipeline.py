import numpy as np
import pytest
import torch

import onnxport
from onnxport.optimize.pipeline import optimize
from optcheck import check_pass, ops, parse


def test_values_captured_by_subgraphs_survive_dead_code_removal():
    m = parse("""
g (float[N] x, bool c) => (float[N] y) {
  k = Exp(x)
  unused = Sigmoid(x)
  w = Constant<value = float[3] {1, 2, 3}>()
  s = ReduceSum<keepdims = 0>(w)
  y = If(c) <
    then_branch = t () => (float[N] o) { o = Mul(k, s) },
    else_branch = e () => (float[N] o) { o = Neg(k) }>
}""")
    model = check_pass(lambda mod: optimize(mod, 20), m, [{"N": 2}, {"N": 5}])
    counts = ops(model)
    assert counts["Exp"] == 1 and counts["Sigmoid"] == 0 and counts["ReduceSum"] == 0 and counts["Constant"] == 0


def test_duplicate_initializers_and_constants_become_one():
    m = parse("""
g (float[N, 3] x) => (float[N, 3] y) <float[3] a = {1, 2, 3}, float[3] b = {1, 2, 3}> {
  c = Constant<value = float[3] {1, 2, 3}>()
  p = Add(x, a)
  q = Mul(p, b)
  y = Sub(q, c)
}""")
    model = check_pass(lambda mod: optimize(mod, 20), m, [{"N": 2}, {"N": 4}])
    assert len(model.graph.initializers) == 1 and ops(model)["Constant"] == 0


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 8)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        y = self.fc2(h) + x
        return y.reshape(x.shape[0], -1) * 0.5


class _Shapes(torch.nn.Module):
    def forward(self, x, m):
        b, t, d = x.shape
        y = x.transpose(1, 2).transpose(1, 2).reshape(b, t * d)
        return y.reshape(b, t, d) + m.expand(b, t, d)


@pytest.mark.parametrize("make", [
    lambda: (_Block(), (torch.randn(3, 5, 8),), {"x": {0: "batch", 1: "time"}}),
    lambda: (_Shapes(), (torch.randn(2, 3, 4), torch.randn(2, 1, 4)),
             {"x": {0: "batch", 1: "time"}, "m": {0: "batch"}}),
], ids=["block", "shapes"])
def test_models_validate_with_and_without_optimization(make):
    model, args, dyn = make()
    raw = onnxport.to_onnx(model.eval(), args, dynamic_shapes=dyn, optimize=False)
    opt = onnxport.to_onnx(model.eval(), args, dynamic_shapes=dyn, optimize=True)
    for r in (raw, opt):
        report = r.validate()
        assert report.ok, str(report)
        assert len({c.inputs for c in report.checks}) >= 3
    assert opt.count_nodes() < raw.count_nodes()
    assert [(v.name, str(v.shape)) for v in opt.model.graph.inputs] == \
        [(v.name, str(v.shape)) for v in raw.model.graph.inputs]
    assert [(v.name, str(v.shape)) for v in opt.model.graph.outputs] == \
        [(v.name, str(v.shape)) for v in raw.model.graph.outputs]
    counts = ops(opt.model)
    assert counts["Constant"] == 0 and counts["Identity"] == 0 and counts["Unsqueeze"] == 0


def test_opset_23_pipeline_runs():
    r = onnxport.to_onnx(_Block().eval(), (torch.randn(2, 4, 8),), dynamic_shapes={"x": {0: "b", 1: "t"}}, opset=23)
    assert r.validate().ok
    assert np.isfinite(r.validate().max_abs)


class _CondScan(torch.nn.Module):
    """Shape arithmetic inside a cond branch and a scan body (local functions or inlined)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        from torch._higher_order_ops.scan import scan

        def step(carry, row):
            h = torch.tanh(self.fc(row.reshape(1, -1)).reshape(-1) + carry)
            return h, h * 2

        def big(x):
            return x.reshape(x.shape[0], 2, 2).transpose(1, 2).transpose(1, 2).reshape(x.shape[0], -1) + 1

        def small(x):
            return x - 1

        y = torch.cond(x.sum() > 0, big, small, (x,))
        _, ys = scan(step, torch.zeros(4), y)
        return ys


@pytest.mark.slow
@pytest.mark.parametrize("inline", [False, True], ids=["functions", "inlined"])
def test_control_flow_bodies_optimized(inline):
    x = torch.rand(5, 4) + 0.1
    dyn = {"x": {0: "rows"}}
    raw = onnxport.to_onnx(_CondScan().eval(), (x,), dynamic_shapes=dyn, optimize=False, inline=inline)
    opt = onnxport.to_onnx(_CondScan().eval(), (x,), dynamic_shapes=dyn, optimize=True, inline=inline)
    for r in (raw, opt):
        report = r.validate(inputs=[(-x,), (torch.rand(3, 4) - 2,)])
        assert report.ok, str(report)
    assert opt.count_nodes() < raw.count_nodes()
    assert ops(opt.model)["Transpose"] < ops(raw.model)["Transpose"]


class _HandWritten(torch.nn.Module):
    """Layer norm, erf-Gelu and RMS norm written as formulas."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(8) + 0.5)
        self.b = torch.nn.Parameter(torch.randn(8))

    def forward(self, x):
        d = x - x.mean(-1, keepdim=True)
        n = d / torch.sqrt((d * d).mean(-1, keepdim=True) + 1e-5) * self.w + self.b
        g = 0.5 * n * (1 + torch.erf(n / 1.4142135623730951))
        return g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


@pytest.mark.slow
@pytest.mark.parametrize("opset", [20, 23])
def test_fusions_fire_on_translated_formulas(opset):
    r = onnxport.to_onnx(_HandWritten().eval(), (torch.randn(2, 3, 8),), dynamic_shapes={"x": {0: "b", 1: "t"}},
                         opset=opset)
    report = r.validate()
    assert report.ok, str(report)
    counts = ops(r.model)
    assert counts["LayerNormalization"] == 1 and counts["Gelu"] == 1 and counts["Erf"] == 0
    assert counts["RMSNormalization"] == (1 if opset >= 23 else 0)
