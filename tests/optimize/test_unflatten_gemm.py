import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.optimize.unflatten_gemm import UnflattenGemmPass
from optcheck import check_pass, ops, parse, rules_fired

SIZES = [{"B": 2, "S": 3}, {"B": 5, "S": 1}]
W = "float[3, 4] w = {1,2,3,4,5,6,7,8,9,10,11,12}, float[3] c = {1, 2, 3}"


@pytest.mark.parametrize("trans_b", [0, 1])
def test_reshape_gemm_reshape_becomes_matmul_add(trans_b):
    w = W if trans_b else "float[4, 3] w = {1,2,3,4,5,6,7,8,9,10,11,12}, float[3] c = {1, 2, 3}"
    m = parse(f"""
g (float[B, S, 4] x) => (float[B, S, 3] y) <{w}, float[BS, 4] f, float[B, S, 3] r> {{
  flat = Constant<value = int64[2] {{-1, 4}}>()
  f = Reshape(x, flat)
  o = Gemm<transB = {trans_b}>(f, w, c)
  lead = Shape<start = 0, end = 2>(x)
  three = Constant<value = int64[1] {{3}}>()
  s = Concat<axis = 0>(lead, three)
  r = Reshape(o, s)
  y = Relu(r)
}}""")
    model = check_pass(UnflattenGemmPass(), m, SIZES)
    counts = ops(model)
    assert counts["Gemm"] == 0 and counts["Reshape"] == 0 and counts["MatMul"] == 1 and counts["Add"] == 1


def test_gemm_feeding_other_shape_left_alone():
    m = parse(f"""
g (float[B, S, 4] x) => (float[S, B, 3] y) <{W}, float[BS, 4] f, float[S, B, 3] y> {{
  flat = Constant<value = int64[2] {{-1, 4}}>()
  f = Reshape(x, flat)
  o = Gemm<transB = 1>(f, w, c)
  lead = Shape<start = 0, end = 2>(x)
  back = Constant<value = int64[1] {{3}}>()
  s = Concat<axis = 0>(lead, back)
  y = Reshape(o, s)
}}""")
    model = check_pass(UnflattenGemmPass(), m, [{"B": 2, "S": 2}, {"B": 3, "S": 3}])
    assert ops(model)["Gemm"] == 1


class _FlatAddmm(torch.nn.Module):
    """``addmm`` over the flattened batch of a 3-D input, reshaped back."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 6))
        self.b = torch.nn.Parameter(torch.randn(6))

    def forward(self, x):
        return torch.addmm(self.b, x.reshape(-1, 8), self.w).reshape(x.shape[0], x.shape[1], 6)


def test_unflatten_rule_fires_on_exported_flattened_addmm():
    r = check_export(_FlatAddmm(), (torch.randn(2, 3, 8),), ({0: "b", 1: "t"},),
                     sizes=[{"b": 1, "t": 5}, {"b": 4, "t": 2}])
    assert count_ops(r, "Gemm") == 0 and count_ops(r, "Reshape") == 0 and count_ops(r, "Shape") == 0
    assert count_ops(r, "MatMul") == 1 and rules_fired(r.model, "Add") == ["UnflattenGemm"]
