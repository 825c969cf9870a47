import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.optimize.fuse_rms_norm import RMSNormFusionPass
from optcheck import check_pass, ops, parse, rules_fired

SIZES = [{"B": 2, "T": 3}, {"B": 3, "T": 8}]


@pytest.mark.parametrize("scale", [True, False])
def test_rms_norm_formula_fused_at_opset_23(scale):
    tail = "y = Mul(w, n)" if scale else "y = Identity(n)"
    m = parse(f"""
g (float[B, T, 8] x) => (float[B, T, 8] y) <float[8] w = {{1,2,3,4,5,6,7,8}}> {{
  two = Constant<value = float {{2.0}}>()
  sq = Pow(x, two)
  ax = Constant<value = int64[1] {{-1}}>()
  ms = ReduceMean<keepdims = 1>(sq, ax)
  eps = Constant<value = float {{1e-6}}>()
  me = Add(ms, eps)
  sd = Sqrt(me)
  r = Reciprocal(sd)
  n = Mul(x, r)
  {tail}
}}""", opset=23)
    model = check_pass(RMSNormFusionPass(), m, SIZES, atol=1e-4)
    assert ops(model)["RMSNormalization"] == 1 and ops(model)["ReduceMean"] == 0


def test_mean_of_other_tensor_not_fused():
    m = parse("""
g (float[B, T, 8] x, float[B, T, 8] u) => (float[B, T, 8] y) {
  sq = Mul(u, u)
  ax = Constant<value = int64[1] {-1}>()
  ms = ReduceMean<keepdims = 1>(sq, ax)
  eps = Constant<value = float {1e-6}>()
  me = Add(ms, eps)
  sd = Sqrt(me)
  y = Div(x, sd)
}""", opset=23)
    model = check_pass(RMSNormFusionPass(), m, SIZES, atol=1e-4)
    assert ops(model)["RMSNormalization"] == 0


class _RMSNormFormula(torch.nn.Module):
    """x / sqrt(mean(x^2) + eps) over the last axis, the division written as ``form``, optionally
    times a scale."""

    def __init__(self, form: str, scale: bool):
        super().__init__()
        self.form, self.scale = form, scale
        self.w = torch.nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x):
        v = x.pow(2).mean(-1, keepdim=True) + 1e-6
        n = {"div": lambda: x / torch.sqrt(v), "mul": lambda: x * torch.rsqrt(v),
             "rmul": lambda: torch.rsqrt(v) * x}[self.form]()
        return n * self.w if self.scale else n


@pytest.mark.parametrize("form", ["div", "mul", "rmul"])
@pytest.mark.parametrize("scale", [False, True])
def test_rms_norm_rules_fire_on_exported_formulas(form, scale):
    r = check_export(_RMSNormFormula(form, scale), (torch.randn(2, 3, 8),), ({0: "b", 1: "t"},), opset=23,
                     sizes=[{"b": 1, "t": 5}, {"b": 4, "t": 2}])
    assert count_ops(r, "RMSNormalization") == 1 and count_ops(r, "ReduceMean") == 0 and count_ops(r, "Mul") == 0
    fired = rules_fired(r.model, "RMSNormalization")[0]
    assert f"RMSNormFormula_{form}" in fired and ("RMSNormalizationScale" in fired) == scale


def test_rms_norm_not_fused_before_opset_23():
    r = check_export(_RMSNormFormula("mul", True), (torch.randn(2, 3, 8),), ({0: "b", 1: "t"},),
                     sizes=[{"b": 1, "t": 5}, {"b": 4, "t": 2}])
    assert count_ops(r, "RMSNormalization") == 0 and count_ops(r, "ReduceMean") == 1
