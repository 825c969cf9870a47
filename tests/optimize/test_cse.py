import onnx_ir as ir

from onnxport.optimize.cse import CommonSubexpressionEliminationPass
from optcheck import check_pass, ops, parse

SIZES = [{"N": 2}, {"N": 5}]

FN = """
<domain: "local", opset_import: ["" : 20]>
f (a) => (b) {
  p = Exp(a)
  q = Exp(a)
  b = Add(p, q)
}"""


def test_merges_in_main_graph_if_branches_and_functions():
    m = parse("""
g (float[N, 3] x, bool c) => (float[N, 3] y, float[N, 3] z, float[N, 3] w) {
  a = Relu(x)
  b = Relu(x)
  y = Add(a, b)
  z = If(c) <
    then_branch = t () => (float[N, 3] o) { s1 = Sigmoid(x) s2 = Sigmoid(x) o = Mul(s1, s2) },
    else_branch = e () => (float[N, 3] o) { o = Neg(a) }>
  w = local.f(x)
}""", functions=FN)
    model = check_pass(CommonSubexpressionEliminationPass(), m, SIZES)
    counts = ops(model)
    assert counts["Relu"] == 1 and counts["Sigmoid"] == 1 and counts["Exp"] == 1


def test_different_attributes_and_random_ops_not_merged():
    m = parse("""
g (float[N, 3] x) => (float[N, 3] y, float[N, 3] r) {
  a = Softmax<axis = 0>(x)
  b = Softmax<axis = 1>(x)
  y = Add(a, b)
  r1 = RandomUniformLike(x)
  r2 = RandomUniformLike(x)
  r0 = Sub(r1, r2)
  r = Mul(r0, x)
}""")
    model = ir.serde.deserialize_model(m)
    CommonSubexpressionEliminationPass()(model)
    counts = ops(model)
    assert counts["Softmax"] == 2 and counts["RandomUniformLike"] == 2
