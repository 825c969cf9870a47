import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.optimize.fuse_gemm import GemmFusionPass
from optcheck import check_pass, ops, parse, rules_fired

SIZES = [{"N": 2}, {"N": 7}]
W = "float[4, 3] w = {1,2,3,4,5,6,7,8,9,10,11,12}"


@pytest.mark.parametrize("bias", ["float[3] c = {1, 2, 3}", "float[1, 3] c = {1, 2, 3}", "float c = {5}"])
def test_matmul_add_becomes_gemm(bias):
    m = parse(f"""
g (float[N, 4] x) => (float[N, 3] y) <{W}, {bias}> {{
  mm = MatMul(x, w)
  y = Add(c, mm)
}}""")
    model = check_pass(GemmFusionPass(), m, SIZES)
    assert ops(model)["Gemm"] == 1 and ops(model)["MatMul"] == 0


def test_transposed_weight_becomes_trans_b():
    m = parse("""
g (float[N, 4] x, float[3, 4] w) => (float[N, 3] y) <float[3] c = {1, 2, 3}, float[4, 3] wt> {
  wt = Transpose<perm = [1, 0]>(w)
  mm = MatMul(x, wt)
  y = Add(mm, c)
}""")
    model = check_pass(GemmFusionPass(), m, SIZES)
    gemm = next(n for n in model.graph if n.op_type == "Gemm")
    assert gemm.attributes["transB"].value == 1 and ops(model)["Transpose"] == 0


def test_3d_or_shared_matmul_left_alone():
    m = parse(f"""
g (float[N, 2, 4] x, float[N, 4] x2) => (float[N, 2, 3] y, float[N, 3] z, float[N, 3] z2)
  <{W}, float[3] c = {{1, 2, 3}}> {{
  mm = MatMul(x, w)
  y = Add(mm, c)
  mm2 = MatMul(x2, w)
  z = Add(mm2, c)
  z2 = Relu(mm2)
}}""")
    model = check_pass(GemmFusionPass(), m, SIZES)
    assert ops(model)["Gemm"] == 0


def test_fused_inside_if_branch_with_outer_weights():
    m = parse(f"""
g (float[N, 4] x, bool k) => (float[N, 3] y) <{W}, float[3] c = {{1, 2, 3}}> {{
  y = If(k) <
    then_branch = t () => (float[N, 3] o) {{ mm = MatMul(x, w) o = Add(mm, c) }},
    else_branch = e () => (float[N, 3] o) {{ mm2 = MatMul(x, w) o = Sub(mm2, c) }}>
}}""")
    model = check_pass(GemmFusionPass(), m, SIZES)
    counts = ops(model)
    assert counts["Gemm"] == 1 and counts["MatMul"] == 1 and counts["Sub"] == 1
    then = model.graph.node(0).attributes["then_branch"].as_graph()
    assert [n.op_type for n in then] == ["Gemm"] and [v.name for v in then.node(0).inputs] == ["x", "w", "c"]


class _MatMulAdd(torch.nn.Module):
    """``x @ w + b`` on 2-D ``x``; with ``transposed``, ``x @ y.t() + b`` for a second input ``y``."""

    def __init__(self, transposed: bool):
        super().__init__()
        self.transposed = transposed
        self.w = torch.nn.Parameter(torch.randn(8, 6))
        self.b = torch.nn.Parameter(torch.randn(6))

    def forward(self, x, y):
        return (x @ y.t() if self.transposed else x @ self.w) + self.b


@pytest.mark.parametrize("transposed", [False, True])
def test_gemm_rules_fire_on_exported_matmul_add(transposed):
    r = check_export(_MatMulAdd(transposed), (torch.randn(3, 8), torch.randn(6, 8)), ({0: "n"}, None),
                     sizes=[{"n": 1}, {"n": 7}])
    assert count_ops(r, "Gemm") == 1 and count_ops(r, "MatMul") == 0 and count_ops(r, "Transpose") == 0
    (gemm,) = [n for n in r.model.graph if n.op_type == "Gemm"]
    assert gemm.attributes.get_int("transB", 0) == int(transposed)
    assert rules_fired(r.model, "Gemm")[0].startswith("MatMulAdd_transB" if transposed else "MatMulAdd")
