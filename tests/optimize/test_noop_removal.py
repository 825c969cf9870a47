import onnx
import onnx_ir as ir
import pytest

from onnxport.optimize.noop_removal import NoOpRemovalPass
from optcheck import check_pass, ops, parse

SIZES = [{"N": 3}, {"N": 6}]


@pytest.mark.parametrize("dtype", ["float", "int64", "bool"])
def test_identity_and_same_type_cast(dtype):
    to = {"float": 1, "int64": 7, "bool": 9}[dtype]
    m = parse(f"""
g ({dtype}[N, 4] x) => ({dtype}[N, 4] y, float[N, 4] f) <{dtype}[N, 4] a, {dtype}[N, 4] b> {{
  a = Identity(x)
  b = Cast<to = {to}>(a)
  y = Identity(b)
  f = Cast<to = 1>(b)
}}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    # a and b go; y and f are graph outputs of the graph input x: one node each must remain
    assert ops(model)["Identity"] == 1 and ops(model)["Cast"] == 1
    assert [n.inputs[0].name for n in model.graph] == ["x", "x"]


def test_transposes_cancel_merge_or_stay():
    m = parse("""
g (float[N, 3, 4] x) => (float[N, 3, 4] y, float[4, N, 3] z, float[3, N, 4] w) {
  t = Transpose<perm = [2, 0, 1]>(x)
  t2 = Transpose<perm = [1, 2, 0]>(t)
  y = Relu(t2)
  u = Transpose<perm = [1, 0, 2]>(x)
  v = Relu(u)
  z = Transpose<perm = [2, 1, 0]>(u)
  w = Transpose<perm = [0, 1, 2]>(v)
}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    # y: cancels (t unused after); z: u also feeds v, so z stays a Transpose of u; w: identity perm
    assert ops(model)["Transpose"] == 2
    perms = {n.outputs[0].name: (n.inputs[0].name, list(n.attributes["perm"].value))
             for n in model.graph if n.op_type == "Transpose"}
    assert perms == {"u": ("x", [1, 0, 2]), "z": ("u", [2, 1, 0])}
    assert model.graph.outputs[0].producer().inputs[0].name == "x"  # y = Relu(x)


def test_transpose_pair_merged_when_inner_has_one_use():
    m = parse("""
g (float[N, 3, 4] x) => (float[4, N, 3] z) {
  u = Transpose<perm = [1, 0, 2]>(x)
  z = Transpose<perm = [2, 1, 0]>(u)
}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    assert ops(model)["Transpose"] == 1
    (t,) = [n for n in model.graph if n.op_type == "Transpose"]
    assert t.inputs[0].name == "x" and list(t.attributes["perm"].value) == [2, 0, 1]


def test_reshape_expand_slice_same_shape_removed_others_kept():
    m = parse("""
g (float[N, 4] x) => (float[N, 4] y, float[N, 2] s2, float[N, 4] e2) <float[N, 4] r, float[N, 4] e, float[N, 4] s,
                                                                   float[N, 4] e2> {
  shp = Shape(x)
  r = Reshape(x, shp)
  e = Expand(r, shp)
  zero = Constant<value = int64[1] {0}>()
  big = Constant<value = int64[1] {9223372036854775807}>()
  one = Constant<value = int64[1] {1}>()
  two = Constant<value = int64[1] {2}>()
  s = Slice(e, zero, big, one)
  y = Relu(s)
  s2 = Slice(y, zero, two, one)
  e2 = Expand(y, shp)
}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    counts = ops(model)
    assert counts["Reshape"] == 0 and counts["Slice"] == 1
    # e2 is a graph output fed by y, another graph output: it keeps its node
    assert counts["Expand"] == 1


def test_squeeze_unsqueeze_round_trips():
    m = parse("""
g (float[N, 4] x) => (int64[1] d, float[N, 4] y) <int64[1] s, int64 q, float[N, 1, 4] u> {
  s = Shape<start = 0, end = 1>(x)
  zero = Constant<value = int64[1] {0}>()
  q = Squeeze(s, zero)
  d = Unsqueeze(q, zero)
  one = Constant<value = int64[1] {1}>()
  u = Unsqueeze(x, one)
  v = Squeeze(u, one)
  y = Relu(v)
}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    assert ops(model)["Squeeze"] == 0 and ops(model)["Unsqueeze"] == 0


def test_squeeze_of_dynamic_dim_kept():
    m = parse("""
g (float[N, 4] x) => (float[N, 4] y) <float[4] q> {
  zero = Constant<value = int64[1] {0}>()
  q = Squeeze(x, zero)
  y = Unsqueeze(q, zero)
}""")
    model = check_pass(NoOpRemovalPass(), m, [{"N": 1}])
    assert ops(model)["Squeeze"] == 1  # N is not statically 1


def test_squeeze_with_axes_computed_at_run_time_kept():
    m = parse("""
g (float[1, 1] x, int64[1] ax) => (float[1, 1, 1] y) {
  q = Squeeze(x, ax)
  both = Constant<value = int64[2] {0, 1}>()
  u = Unsqueeze(q, both)
  y = Relu(u)
}""")
    model = ir.serde.deserialize_model(m)  # not run: random axes would not be valid ones
    NoOpRemovalPass()(model)
    onnx.checker.check_model(ir.serde.serialize_model(model), full_check=True)
    assert ops(model)["Squeeze"] == 1 and ops(model)["Unsqueeze"] == 1  # ax may squeeze one axis or both


def test_concat_of_one_input_inside_if_and_function():
    fn = """
<domain: "local", opset_import: ["" : 20]>
f (a) => (b) {
  c = Concat<axis = 0>(a)
  b = Neg(c)
}"""
    m = parse("""
g (float[N] x, bool c) => (float[N] y, float[N] z) {
  k = Neg(x)
  y = If(c) <
    then_branch = t () => (float[N] o) { i = Identity(k) o = Concat<axis = 0>(i) },
    else_branch = e () => (float[N] o) { o = Concat<axis = 0>(x) }>
  z = local.f(x)
}""", functions=fn)
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    # the else branch output is the outer x itself: that Concat must stay (branch outputs are fresh values)
    assert ops(model)["Concat"] == 2 and ops(model)["Identity"] == 0


def test_unsqueeze_transpose_squeeze_becomes_one_transpose():
    m = parse("""
g (float[N, 5, 3, 4] x) => (float[3, N, 5, 4] y) {
  zero = Constant<value = int64[1] {0}>()
  u = Unsqueeze(x, zero)
  t = Transpose<perm = [3, 1, 2, 0, 4]>(u)
  three = Constant<value = int64[1] {3}>()
  s = Squeeze(t, three)
  y = Relu(s)
}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    counts = ops(model)
    assert counts["Transpose"] == 1 and counts["Squeeze"] == 0 and counts["Unsqueeze"] == 0


@pytest.mark.parametrize("dtype", ["float", "int64"])
def test_unsqueeze_chain_merged(dtype):
    m = parse(f"""
g ({dtype}[N, 5] x) => ({dtype}[1, N, 1, 5, 1] y, {dtype}[N, 1, 5] z) {{
  zero = Constant<value = int64[1] {{0}}>()
  two = Constant<value = int64[1] {{2}}>()
  last = Constant<value = int64[1] {{-1}}>()
  a = Unsqueeze(x, zero)
  b = Unsqueeze(a, two)
  y = Unsqueeze(b, last)
  one = Constant<value = int64[1] {{1}}>()
  z = Unsqueeze(x, one)
}}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    assert ops(model)["Unsqueeze"] == 2


@pytest.mark.parametrize("dtype", ["float", "int64"])
def test_neutral_elements_removed_unless_they_broadcast(dtype):
    m = parse(f"""
g ({dtype}[N, 3] x) => ({dtype}[N, 3] y, {dtype}[2, N, 3] z) {{
  one = Constant<value = {dtype} {{1}}>()
  zero = Constant<value = {dtype}[3] {{0, 0, 0}}>()
  a = Mul(one, x)
  b = Sub(a, zero)
  c = Div(b, one)
  d = Add(zero, c)
  y = Neg(d)
  ones = Constant<value = {dtype}[2, 1, 1] {{1, 1}}>()
  z = Mul(x, ones)
  w = Sub(zero, x)
}}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    counts = ops(model)
    assert counts["Mul"] == 1 and counts["Add"] == 0 and counts["Div"] == 0 and counts["Sub"] == 1


def test_zero_bias_initializer_is_kept():
    m = parse("""
g (float[N, 3] x) => (float[N, 3] y) <float[3] bias = {0, 0, 0}> {
  a = Add(x, bias)
  y = Neg(a)
}""")
    model = check_pass(NoOpRemovalPass(), m, SIZES)
    assert ops(model)["Add"] == 1
