import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common
import pytest
import torch
import torch.nn.functional as F

from exportcheck import check_export, count_ops
from onnxport.optimize.uniform_values import UniformWherePass
from optcheck import check_pass, ops, parse

SIZES = [{"N": 1}, {"N": 3}]


def _typed(proto):
    """The model with the dims of its intermediate values, as translation records them."""
    return onnx.shape_inference.infer_shapes(proto, data_prop=True)


def _pass():
    return ir.passes.Sequential(UniformWherePass(), common.RemoveUnusedNodesPass())


def _masked_softmax(mask: str, axes: str = "{-1}") -> str:
    """Scores masked by ``mask`` (a bool [1, 1, 4, 1] constant expanded to [N, 1, 4, 4]), softmax,
    and the fully-masked-row guard computed from the mask (as the SDPA translation emits it)."""
    return f"""
g (float[N, 2, 4, 4] s) => (float[N, 2, 4, 4] y) {{
  m = Constant<value = bool[1, 1, 4, 1] {mask}>()
  n = Shape<end = 1>(s)
  rest = Constant<value = int64[3] {{1, 4, 4}}>()
  shp = Concat<axis = 0>(n, rest)
  e = Expand(m, shp)
  low = Constant<value = float {{-1e9}}>()
  masked = Where(e, s, low)
  p = Softmax<axis = -1>(masked)
  ei = Cast<to = 6>(e)
  ax = Constant<value = int64[1] {axes}>()
  any = ReduceMax<keepdims = 1>(ei, ax)
  anyb = Cast<to = 9>(any)
  none = Not(anyb)
  zero = Constant<value = float {{0}}>()
  y = Where(none, zero, p)
}}"""


def test_all_true_mask_and_its_guard_vanish():
    model = check_pass(_pass(), _typed(parse(_masked_softmax("{1, 1, 1, 1}"))), SIZES)
    assert ops(model)["Where"] == 0 and ops(model)["ReduceMax"] == 0 and ops(model)["Expand"] == 0
    assert [n.op_type for n in model.graph] == ["Softmax"]


def test_all_false_condition_selects_the_other_branch():
    # every row masked: the first Where gives the constant, the guard gives zeros
    model = check_pass(_pass(), _typed(parse(_masked_softmax("{0, 0, 0, 0}"))), SIZES)
    # the guard's Where selects `zero`, a scalar: it broadcasts to the output, so that Where stays;
    # the first one selects `low`, also a scalar: it stays too
    assert ops(model)["Where"] == 2


def test_all_false_condition_selects_a_full_shape_else_branch():
    m = parse("""
g (float[N, 4] a, float[N, 4] b) => (float[N, 4] y) {
  c = Constant<value = bool[1, 1] {0}>()
  n = Shape<end = 1>(b)
  four = Constant<value = int64[1] {4}>()
  shp = Concat<axis = 0>(n, four)
  e = Expand(c, shp)
  r = Relu(b)
  y = Where(e, a, r)
}""")
    model = check_pass(_pass(), _typed(m), SIZES)
    assert [n.op_type for n in model.graph] == ["Relu"]


def test_mixed_mask_stays():
    model = check_pass(_pass(), _typed(parse(_masked_softmax("{1, 0, 1, 1}"))), SIZES)
    assert ops(model)["Where"] == 2 and ops(model)["ReduceMax"] == 1


def test_reduction_over_a_dynamic_axis_is_not_followed():
    # ReduceMax over axis 0 (size N, possibly 0 at run time) is not the repeated element for sure
    model = check_pass(_pass(), _typed(parse(_masked_softmax("{1, 1, 1, 1}", axes="{0}"))), SIZES)
    assert ops(model)["Where"] == 1 and ops(model)["ReduceMax"] == 1


def test_branch_smaller_than_the_output_stays():
    m = parse("""
g (float[4] a, float[N, 4] b) => (float[N, 4] y) {
  c = Constant<value = bool[1, 1] {1}>()
  n = Shape<end = 1>(b)
  four = Constant<value = int64[1] {4}>()
  shp = Concat<axis = 0>(n, four)
  e = Expand(c, shp)
  y = Where(e, a, b)
}""")
    model = check_pass(_pass(), _typed(m), SIZES)
    assert ops(model)["Where"] == 1


class ConstantMaskAttention(torch.nn.Module):
    """Attention whose mask masks nothing: a constant expanded to the batch (as Hugging Face's
    bidirectional mask without padding)."""

    def forward(self, q, k, v):
        mask = torch.ones(1, 1, 6, 1, dtype=torch.bool).expand(q.shape[0], 1, 6, 6)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("optimize", [True, False])
def test_attention_with_a_mask_that_masks_nothing(optimize):
    q, k, v = (torch.randn(2, 3, 6, 8) for _ in range(3))
    dyn = {"q": {0: "batch"}, "k": {0: "batch"}, "v": {0: "batch"}}
    result = check_export(ConstantMaskAttention(), (q, k, v), dyn, optimize=optimize)
    assert count_ops(result, "Where") == (0 if optimize else 2)
