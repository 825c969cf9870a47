import functools

import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.optimize import pipeline
from onnxport.optimize.fuse_attention import AttentionFusionPass
from onnxport.optimize.pipeline import passes
from optcheck import check_pass, ops, parse, rules_fired

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


class _Attention(torch.nn.Module):
    """softmax(q @ k^T * s [+ mask]) @ v written out, the scale on the scores or split on q and k."""

    def __init__(self, mask: bool, split_scale: bool):
        super().__init__()
        self.mask, self.split_scale = mask, split_scale

    def forward(self, q, k, v, m):
        if self.split_scale:
            scores = (q * 0.5) @ (k * 0.5).transpose(-2, -1)
        else:
            scores = q @ k.transpose(-2, -1) / 2.0
        if self.mask:
            scores = scores + m
        return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("split_scale", [False, True])
def test_attention_rule_fires_on_exported_formula(monkeypatch, mask, split_scale):
    monkeypatch.setattr(pipeline, "optimize", functools.partial(pipeline.optimize, attention=True))
    q, k, v = (torch.randn(2, 2, 3, 4) for _ in range(3))
    dims = {0: "b", 2: "s"}
    r = check_export(_Attention(mask, split_scale), (q, k, v, torch.randn(2, 1, 3, 3)),
                     (dims, dims, dims, {0: "b", 2: "s", 3: "s"}), opset=23,
                     sizes=[{"b": 1, "s": 5}, {"b": 3, "s": 2}])
    assert count_ops(r, "Attention") == 1 and count_ops(r, "Softmax") == 0 and count_ops(r, "MatMul") == 0
    (att,) = [n for n in r.model.graph if n.op_type == "Attention"]
    scale = 0.5 * 0.5 if split_scale else 1 / 2.0
    assert abs(att.attributes.get_float("scale") - scale) < 1e-6 and len(att.inputs) == (4 if mask else 3)
    assert rules_fired(r.model, "Attention") == ["ScaledDotProductAttention"]
