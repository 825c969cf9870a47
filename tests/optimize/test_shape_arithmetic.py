from onnxport.optimize.shape_arithmetic import ShapeArithmeticPass
from optcheck import check_pass, ops, parse

SIZES = [{"B": 2, "T": 3}, {"B": 5, "T": 7}]


def test_gather_unsqueeze_chain_becomes_shape_slice():
    m = parse("""
g (float[B, T, 4] x) => (float[B, T, 4] y, int64[2] d) {
  s = Shape(x)
  i0 = Constant<value = int64 {0}>()
  i1 = Constant<value = int64 {-2}>()
  zero = Constant<value = int64[1] {0}>()
  b = Gather<axis = 0>(s, i0)
  t = Gather<axis = 0>(s, i1)
  b1 = Unsqueeze(b, zero)
  t1 = Unsqueeze(t, zero)
  four = Constant<value = int64[1] {4}>()
  shp = Concat<axis = 0>(b1, t1, four)
  y = Reshape(x, shp)
  d = Concat<axis = 0>(b1, t1)
}""")
    model = check_pass(ShapeArithmeticPass(), m, SIZES)
    counts = ops(model)
    assert counts["Gather"] == 0 and counts["Unsqueeze"] == 0 and counts["Concat"] == 0
    d = model.graph.outputs[1].producer()
    assert d.op_type == "Shape" and (d.attributes["start"].value, d.attributes["end"].value) == (0, 2)
    reshape = next(n for n in model.graph if n.op_type == "Reshape")
    assert list(reshape.inputs[1].const_value.numpy()) == [0, 0, 4]


def test_reshape_takes_zero_and_minus_one_from_result_dims():
    m = parse("""
g (float[B, T, 4] x) => (float[B, T4] y, float[B, T, 2, 2] z) <float[B, T4] y, float[B, T, 2, 2] z> {
  b = Shape<start = 0, end = 1>(x)
  t = Shape<start = 1, end = 2>(x)
  four = Constant<value = int64[1] {4}>()
  t4 = Mul(t, four)
  s1 = Concat<axis = 0>(b, t4)
  y = Reshape(x, s1)
  two = Constant<value = int64[2] {2, 2}>()
  s2 = Concat<axis = 0>(b, t, two)
  z = Reshape(x, s2)
}""")
    model = check_pass(ShapeArithmeticPass(), m, SIZES + [{"B": 0, "T": 3}, {"B": 2, "T": 0}])
    reshapes = [n for n in model.graph if n.op_type == "Reshape"]
    assert len(reshapes) == 1 and list(reshapes[0].inputs[1].const_value.numpy()) == [0, 0, 2, 2]
    flatten = next(n for n in model.graph if n.op_type == "Flatten")  # [0, -1] fails on a zero batch
    assert flatten.attributes["axis"].value == 1 and flatten.outputs[0].name == "y"


def test_minus_one_only_beside_static_sizes():
    m = parse("""
g (float[B, T, 4] x) => (float[T4, B] y, float[B, T, 4] z) <float[T4, B] y> {
  b = Shape<start = 0, end = 1>(x)
  t = Shape<start = 1, end = 2>(x)
  four = Constant<value = int64[1] {4}>()
  t4 = Mul(t, four)
  s1 = Concat<axis = 0>(t4, b)
  y = Reshape<allowzero = 1>(x, s1)
  s2 = Concat<axis = 0>(b, t, four)
  z = Reshape<allowzero = 1>(x, s2)
}""")
    model = check_pass(ShapeArithmeticPass(), m, SIZES + [{"B": 0, "T": 2}])
    y, z = [n for n in model.graph if n.op_type == "Reshape"]
    assert y.inputs[1].const_value is None  # two unknowns
    assert list(z.inputs[1].const_value.numpy()) == [0, 0, 4] and "allowzero" not in z.attributes


def test_reshape_with_two_unknowns_and_allowzero_left_alone():
    m = parse("""
g (float[B, T] x, float[T, B] w) => (float[T, B] y, float[B, T] z) <float[T, B] y, float[B, T] z> {
  b = Shape<start = 0, end = 1>(x)
  t = Shape<start = 1, end = 2>(x)
  s = Concat<axis = 0>(t, b)
  y = Reshape(x, s)
  s2 = Concat<axis = 0>(b, t)
  z = Reshape<allowzero = 1>(w, s2)
}""")
    model = check_pass(ShapeArithmeticPass(), m, SIZES)
    assert all(n.inputs[1].const_value is None for n in model.graph if n.op_type == "Reshape")


def test_one_source_per_dimension_and_expand_constant():
    m = parse("""
g (float[B, T] x, float[B, 1] m) => (float[B, T] y, float[B, 4] y2) <float[B, T] e, float[B, 4] e2> {
  r = Relu(x)
  b1 = Shape<start = 0, end = 1>(r)
  b2 = Shape<start = 0, end = 1>(m)
  t = Shape<start = 1, end = 2>(x)
  s = Concat<axis = 0>(b2, t)
  e = Expand(m, s)
  y = Add(e, r)
  four = Constant<value = int64[1] {4}>()
  s2 = Concat<axis = 0>(b1, four)
  e2 = Expand(m, s2)
  y2 = Neg(e2)
}""")
    model = check_pass(ShapeArithmeticPass(), m, SIZES)
    e, e2 = [n for n in model.graph if n.op_type == "Expand"]
    assert e.inputs[1].const_value is None  # T is not known from m: stays computed, from x
    assert list(e2.inputs[1].const_value.numpy()) == [1, 4]
    shapes = [n for n in model.graph if n.op_type == "Shape" and n.outputs[0].uses()]
    assert shapes and all(n.inputs[0].name == "x" for n in shapes)


def test_rewrites_inside_loop_body_and_function():
    fn = """
<domain: "local", opset_import: ["" : 20]>
f (a) => (b) {
  s = Shape(a)
  i = Constant<value = int64[1] {1}>()
  d = Gather<axis = 0>(s, i)
  b = Identity(d)
}"""
    m = parse("""
g (float[B, T] x) => (float[B, T] y, int64[1] d) {
  n = Constant<value = int64 {2}>()
  c = Constant<value = bool {1}>()
  y = Loop(n, c, x) <body = body (int64 i, bool cin, float[B, T] acc) => (bool cout, float[B, T] out) {
    cout = Identity(cin)
    s = Shape(acc)
    k = Constant<value = int64 {0}>()
    z = Constant<value = int64[1] {0}>()
    g0 = Gather<axis = 0>(s, k)
    g1 = Unsqueeze(g0, z)
    o = Constant<value = int64[1] {-1}>()
    shp = Concat<axis = 0>(g1, o)
    out = Reshape(acc, shp)
  }>
  d = local.f(x)
}""", functions=fn)
    model = check_pass(ShapeArithmeticPass(), m, SIZES)
    assert ops(model)["Gather"] == 0
