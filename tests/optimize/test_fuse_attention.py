import pytest

from onnxport.optimize.fuse_attention import AttentionFusionPass
from onnxport.optimize.pipeline import passes
from optcheck import check_pass, ops, parse

SIZES = [{"B": 2, "S": 3}, {"B": 1, "S": 6}]


@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("split_scale", [False, True])
def test_sdpa_pattern_becomes_attention(mask, split_scale):
    if split_scale:
        scaling = """r = Constant<value = float {0.70710677}>()
  qs = Mul(q, r)
  ks = Mul(k, r)
  kt = Transpose<perm = [0, 1, 3, 2]>(ks)
  sc = MatMul(qs, kt)"""
    else:
        scaling = """kt = Transpose<perm = [0, 1, 3, 2]>(k)
  qk = MatMul(q, kt)
  r = Constant<value = float {2.0}>()
  sc = Div(qk, r)"""
    masking = "sm = Add(m, sc)" if mask else ""
    m = parse(f"""
g (float[B, 2, S, 4] q, float[B, 2, S, 4] k, float[B, 2, S, 4] v, float[B, 1, S, S] m) => (float[B, 2, S, 4] y) {{
  {scaling}
  {masking}
  p = Softmax<axis = -1>({"sm" if mask else "sc"})
  y = MatMul(p, v)
}}""", opset=23)
    model = check_pass(AttentionFusionPass(), m, SIZES, atol=1e-5)
    assert ops(model)["Attention"] == 1 and ops(model)["Softmax"] == 0


def test_softmax_over_other_axis_not_fused_and_option_off_by_default():
    m = parse("""
g (float[B, 2, S, 4] q, float[B, 2, S, 4] k, float[B, 2, S, 4] v) => (float[B, 2, S, 4] y) {
  kt = Transpose<perm = [0, 1, 3, 2]>(k)
  sc = MatMul(q, kt)
  p = Softmax<axis = 2>(sc)
  y = MatMul(p, v)
}""", opset=23)
    model = check_pass(AttentionFusionPass(), m, SIZES)
    assert ops(model)["Attention"] == 0
    assert not any(isinstance(p, AttentionFusionPass) for p in passes(23))
    assert any(isinstance(p, AttentionFusionPass) for p in passes(23, attention=True))
