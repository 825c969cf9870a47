import pytest

from onnxport.optimize.fuse_rms_norm import RMSNormFusionPass
from optcheck import check_pass, ops, parse

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
