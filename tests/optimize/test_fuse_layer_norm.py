import pytest

from onnxport.optimize.fuse_layer_norm import LayerNormFusionPass
from optcheck import check_pass, ops, parse

SIZES = [{"B": 2, "T": 3}, {"B": 4, "T": 9}]
LN = """
g (float[B, T, 8] x) => (float[B, T, 8] y) <float[8] w = {{1,2,3,4,5,6,7,8}}, float[8] b = {{0,1,0,1,0,1,0,1}}> {{
  ax = Constant<value = int64[1] {{-1}}>()
  mean = ReduceMean<keepdims = 1>(x, ax)
  d = Sub(x, mean)
  {square}
  var = ReduceMean<keepdims = 1>(sq, ax)
  eps = Constant<value = float {{1e-5}}>()
  ve = Add(var, eps)
  std = Sqrt(ve)
  {normalize}
  {affine}
}}"""


@pytest.mark.parametrize("square", ["two = Constant<value = float {2.0}>()\n  sq = Pow(d, two)", "sq = Mul(d, d)"])
@pytest.mark.parametrize("normalize", ["n = Div(d, std)", "r = Reciprocal(std)\n  n = Mul(r, d)"])
@pytest.mark.parametrize("affine", ["s = Mul(n, w)\n  y = Add(b, s)", "y = Identity(n)"])
def test_layer_norm_formula_fused(square, normalize, affine):
    m = parse(LN.format(square=square, normalize=normalize, affine=affine))
    model = check_pass(LayerNormFusionPass(), m, SIZES, atol=1e-4)
    counts = ops(model)
    assert counts["LayerNormalization"] == 1 and counts["ReduceMean"] == 0 and counts["Sqrt"] == 0


def test_not_fused_over_a_leading_axis_or_with_other_variance():
    m = parse("""
g (float[B, T, 8] x) => (float[B, T, 8] y, float[B, T, 8] z) {
  ax = Constant<value = int64[1] {0}>()
  mean = ReduceMean<keepdims = 1>(x, ax)
  d = Sub(x, mean)
  sq = Mul(d, d)
  var = ReduceMean<keepdims = 1>(sq, ax)
  eps = Constant<value = float {1e-5}>()
  ve = Add(var, eps)
  std = Sqrt(ve)
  y = Div(d, std)
  last = Constant<value = int64[1] {-1}>()
  m2 = ReduceMean<keepdims = 1>(x, last)
  d2 = Sub(x, m2)
  sq2 = Mul(x, x)
  v2 = ReduceMean<keepdims = 1>(sq2, last)
  ve2 = Add(v2, eps)
  sd2 = Sqrt(ve2)
  z = Div(d2, sd2)
}""")
    model = check_pass(LayerNormFusionPass(), m, SIZES, atol=1e-4)
    assert ops(model)["LayerNormalization"] == 0
