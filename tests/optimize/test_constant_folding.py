import numpy as np
import onnx_ir as ir
import pytest

from onnxport.optimize.constant_folding import ConstantFoldingPass
from optcheck import check_pass, ops, parse

SIZES = [{"N": 3}, {"N": 7}]

FUNCTION = """
<domain: "local", opset_import: ["" : 20]>
scale (a) => (b) {
  two = Constant<value = float[1] {2.0}>()
  one = Constant<value = float[1] {1.0}>()
  s = Add(two, one)
  b = Mul(a, s)
}"""


@pytest.mark.parametrize("dtype,op", [("float", "Add"), ("float", "Mul"), ("int64", "Sub"), ("int64", "Div")])
def test_folds_arithmetic_on_constants(dtype, op):
    m = parse(f"""
g ({dtype}[N, 3] x) => ({dtype}[N, 3] y) {{
  a = Constant<value = {dtype}[3] {{7, -9, 4}}>()
  b = Constant<value = {dtype}[3] {{2, 4, -3}}>()
  c = {op}(a, b)
  y = Add(x, c)
}}""")
    model = check_pass(ConstantFoldingPass(), m, SIZES)
    # one constant is left, held by an initializer (the two Constant nodes are gone)
    assert ops(model)[op] == (1 if op == "Add" else 0) and ops(model)["Constant"] == 0
    (add,) = [n for n in model.graph if n.op_type == "Add"]
    assert list(model.graph.initializers.values()) == [add.inputs[1]]


def test_folds_static_shape_and_size_not_dynamic():
    m = parse("""
g (float[N, 3, 4] x) => (float[N, 12] y, int64[1] n, int64 sz) {
  s = Shape<start = 1>(x)
  p = ReduceProd<keepdims = 1>(s)
  n = Shape<start = 0, end = 1>(x)
  shape = Concat<axis = 0>(n, p)
  y = Reshape(x, shape)
  sx = Constant<value = float[3, 4] {1,2,3,4,5,6,7,8,9,10,11,12}>()
  sz = Size(sx)
}""")
    model = check_pass(ConstantFoldingPass(), m, SIZES)
    counts = ops(model)
    assert counts["ReduceProd"] == 0 and counts["Size"] == 0
    assert counts["Shape"] == 1  # the dynamic N stays computed
    assert model.graph.outputs[2].name == "sz"


def test_size_cap_leaves_big_tensors_alone():
    m = parse("""
g (float[N] x) => (float[N] y) {
  shape = Constant<value = int64[1] {100000}>()
  big = ConstantOfShape<value = float[1] {1.0}>(shape)
  total = ReduceSum<keepdims = 0>(big)
  y = Add(x, total)
}""")
    model = check_pass(ConstantFoldingPass(size_limit=1024), m, SIZES)
    assert ops(model)["ConstantOfShape"] == 1
    model = check_pass(ConstantFoldingPass(size_limit=1 << 20, input_limit=1 << 20), m, SIZES)
    assert ops(model)["ConstantOfShape"] == 0 and ops(model)["ReduceSum"] == 0


def test_weight_transpose_folded_into_single_use_initializer():
    m = parse("""
g (float[N, 4] x) => (float[N, 5] y, float[N, 4] z)
  <float[5, 4] w = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20},
   float[4, 4] v = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}> {
  wt = Transpose<perm = [1, 0]>(w)
  y = MatMul(x, wt)
  vt = Transpose<perm = [1, 0]>(v)
  z0 = MatMul(x, vt)
  z = MatMul(z0, v)
}""")
    model = check_pass(ConstantFoldingPass(size_limit=8), m, SIZES)
    w = model.graph.initializers["w.T"]  # the stored layout changed: so did the name
    assert list(w.shape) == [4, 5] and ops(model)["Transpose"] == 1  # v: used twice and over the cap
    np.testing.assert_array_equal(w.const_value.numpy()[:, 0], [1, 2, 3, 4])


def test_weight_parts_gathered_by_constant_index_become_initializers():
    """Each expert's matrix of a mixture-of-experts weight: one initializer per index, whatever the
    size cap; a weight also read otherwise, or an index taken twice, is left alone."""
    m = parse("""
g (float[N, 2] x) => (float[N, 2] y, float[N, 2] z)
  <float[3, 2, 2] w = {1,2,3,4,5,6,7,8,9,10,11,12}, float[2, 2, 2] v = {1,2,3,4,5,6,7,8}> {
  i0 = Constant<value = int64 {0}>()
  i2 = Constant<value = int64 {-1}>()
  w0 = Gather<axis = 0>(w, i0)
  w2 = Gather<axis = 0>(w, i2)
  a = MatMul(x, w0)
  y = MatMul(a, w2)
  v0 = Gather<axis = 0>(v, i0)
  v0b = Gather<axis = 0>(v, i0)
  b = MatMul(x, v0)
  z = MatMul(b, v0b)
}""")
    model = check_pass(ConstantFoldingPass(size_limit=1), m, SIZES)
    assert "w" not in model.graph.initializers and "v" in model.graph.initializers
    np.testing.assert_array_equal(model.graph.initializers["w.2"].const_value.numpy(), [[9, 10], [11, 12]])
    assert {"w.0", "w.2"} <= set(model.graph.initializers) and ops(model)["Gather"] == 2


def test_random_and_graph_inputs_are_not_constants():
    m = parse("""
g (float[N] x, float[2] init) => (float[N] y, float[2] r) <float[2] init = {1, 2}> {
  a = Constant<value = float[2] {1, 2}>()
  s = Add(init, a)
  r = RandomUniformLike(s)
  t = ReduceSum<keepdims = 0>(s)
  y = Add(x, t)
}""")
    model = ir.serde.deserialize_model(m)
    ConstantFoldingPass()(model)
    assert ops(model)["Add"] == 2 and ops(model)["RandomUniformLike"] == 1


def test_folds_inside_if_branches_and_functions_keeping_captures():
    m = parse("""
g (float[N] x, bool c) => (float[N] y, float[N] z) {
  k = Constant<value = float[1] {3.0}>()
  y = If(c) <
    then_branch = t () => (float[N] o) { two = Constant<value = float[1] {2.0}>() s = Add(two, k) o = Mul(x, s) },
    else_branch = e () => (float[N] o) { s = Neg(k) o = Add(x, s) }>
  z = local.scale(x)
}""", functions=FUNCTION)
    model = check_pass(ConstantFoldingPass(), m, [{"N": 3}, {"N": 5}])
    counts = ops(model)
    assert counts["Neg"] == 0 and counts["Add"] == 1  # only x + s in the else branch is left
    assert counts["Mul"] == 2 and counts["If"] == 1
