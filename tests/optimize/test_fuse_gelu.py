import math

import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.optimize.fuse_gelu import GeluFusionPass
from optcheck import check_pass, ops, parse, rules_fired

SIZES = [{"N": 3}, {"N": 10}]
ERF = ["c = Constant<value = float {1.4142135}>()\n  a = Div(x, c)",
       "c = Constant<value = float {0.70710677}>()\n  a = Mul(c, x)"]
OUTER = ["hx = Mul(x, half)\n  y = Mul(hx, p)",
         "px = Mul(p, x)\n  y = Mul(px, half)",
         "ph = Mul(half, p)\n  y = Mul(x, ph)"]


@pytest.mark.parametrize("arg", ERF)
@pytest.mark.parametrize("outer", OUTER)
def test_erf_gelu_fused(arg, outer):
    m = parse(f"""
g (float[N, 5] x) => (float[N, 5] y) {{
  {arg}
  e = Erf(a)
  one = Constant<value = float {{1.0}}>()
  p = Add(e, one)
  half = Constant<value = float {{0.5}}>()
  {outer}
}}""")
    model = check_pass(GeluFusionPass(), m, SIZES, atol=1e-5)
    assert ops(model)["Gelu"] == 1 and ops(model)["Erf"] == 0 and ops(model)["Mul"] == 0


@pytest.mark.parametrize("cube", ["three = Constant<value = float {3.0}>()\n  x3 = Pow(x, three)",
                                  "xx = Mul(x, x)\n  x3 = Mul(xx, x)"])
def test_tanh_gelu_fused(cube):
    m = parse(f"""
g (float[N, 5] x) => (float[N, 5] y) {{
  {cube}
  k = Constant<value = float {{0.044715}}>()
  kx3 = Mul(k, x3)
  inner = Add(x, kx3)
  s = Constant<value = float {{0.7978846}}>()
  si = Mul(inner, s)
  t = Tanh(si)
  one = Constant<value = float {{1.0}}>()
  p = Add(one, t)
  half = Constant<value = float {{0.5}}>()
  hx = Mul(half, x)
  y = Mul(hx, p)
}}""")
    model = check_pass(GeluFusionPass(), m, SIZES, atol=1e-5)
    gelu = next(n for n in model.graph if n.op_type == "Gelu")
    assert gelu.attributes["approximate"].value == "tanh" and ops(model)["Tanh"] == 0


def test_wrong_constants_not_fused():
    m = parse("""
g (float[N, 5] x) => (float[N, 5] y) {
  c = Constant<value = float {0.5}>()
  a = Mul(c, x)
  e = Erf(a)
  one = Constant<value = float {1.0}>()
  p = Add(e, one)
  half = Constant<value = float {0.5}>()
  hx = Mul(x, half)
  y = Mul(hx, p)
}""")
    model = check_pass(GeluFusionPass(), m, SIZES)
    assert ops(model)["Gelu"] == 0


class _GeluFormula(torch.nn.Module):
    """0.5 * x * (1 + erf(x / sqrt(2))) or its tanh approximation, products grouped one way."""

    def __init__(self, approximate: str, grouping: str):
        super().__init__()
        self.approximate, self.grouping = approximate, grouping

    def forward(self, x):
        if self.approximate == "tanh":
            term = 1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3)))
        else:
            term = 1 + torch.erf(x / math.sqrt(2))
        if self.grouping == "half_x":
            return (0.5 * x) * term
        if self.grouping == "x_term":
            return (x * term) * 0.5
        return x * (0.5 * term)


@pytest.mark.slow
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("grouping", ["half_x", "x_term", "half_term"])
def test_gelu_rules_fire_on_exported_formulas(approximate, grouping):
    r = check_export(_GeluFormula(approximate, grouping), (torch.randn(2, 3, 8),), ({0: "b", 1: "t"},),
                     sizes=[{"b": 1, "t": 5}, {"b": 4, "t": 2}])
    assert count_ops(r, "Gelu") == 1 and count_ops(r, "Erf") == 0 and count_ops(r, "Tanh") == 0
    (gelu,) = [n for n in r.model.graph if n.op_type == "Gelu"]
    assert gelu.attributes.get_string("approximate", "none") == approximate
    assert rules_fired(r.model, "Gelu")[0].startswith(f"Gelu_{approximate}_{grouping}")
