import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.optimize.fuse_layer_norm import LayerNormFusionPass
from optcheck import check_pass, ops, parse, rules_fired

SIZES = [{"B": 2, "T": 3}, {"B": 4, "T": 9}]
LN = """
g (float[B, T, 8] x) => (float[B, T, 8] y) <float[8] w = {{1,2,3,4,5,6,7,8}}, float[8] b = {{0,1,0,1,0,1,0,1}}> {{
  ax = Constant<value = int64[1] {{-1}}>()
  mean = ReduceMean<keepdims = 1>(x, ax)
  d = Sub(x, mean)
  {square}
  var = ReduceMean<keepdims = 1>(sq, ax)
  eps = Constant<value = float {{1e-5}}>()
  ve = Add(var, eps)
  std = Sqrt(ve)
  {normalize}
  {affine}
}}"""


@pytest.mark.parametrize("square", ["two = Constant<value = float {2.0}>()\n  sq = Pow(d, two)", "sq = Mul(d, d)"])
@pytest.mark.parametrize("normalize", ["n = Div(d, std)", "r = Reciprocal(std)\n  n = Mul(r, d)"])
@pytest.mark.parametrize("affine", ["s = Mul(n, w)\n  y = Add(b, s)", "y = Identity(n)"])
def test_layer_norm_formula_fused(square, normalize, affine):
    m = parse(LN.format(square=square, normalize=normalize, affine=affine))
    model = check_pass(LayerNormFusionPass(), m, SIZES, atol=1e-4)
    counts = ops(model)
    assert counts["LayerNormalization"] == 1 and counts["ReduceMean"] == 0 and counts["Sqrt"] == 0


def test_not_fused_over_a_leading_axis_or_with_other_variance():
    m = parse("""
g (float[B, T, 8] x) => (float[B, T, 8] y, float[B, T, 8] z) {
  ax = Constant<value = int64[1] {0}>()
  mean = ReduceMean<keepdims = 1>(x, ax)
  d = Sub(x, mean)
  sq = Mul(d, d)
  var = ReduceMean<keepdims = 1>(sq, ax)
  eps = Constant<value = float {1e-5}>()
  ve = Add(var, eps)
  std = Sqrt(ve)
  y = Div(d, std)
  last = Constant<value = int64[1] {-1}>()
  m2 = ReduceMean<keepdims = 1>(x, last)
  d2 = Sub(x, m2)
  sq2 = Mul(x, x)
  v2 = ReduceMean<keepdims = 1>(sq2, last)
  ve2 = Add(v2, eps)
  sd2 = Sqrt(ve2)
  z = Div(d2, sd2)
}""")
    model = check_pass(LayerNormFusionPass(), m, SIZES, atol=1e-4)
    assert ops(model)["LayerNormalization"] == 0


class _LayerNormFormula(torch.nn.Module):
    """(x - mean) / sqrt(var + eps) over the last ``k`` axes, the division written as ``form``,
    then the affine step ``affine`` (``""``, ``"scale"``, ``"bias"`` or ``"scale_bias"``)."""

    def __init__(self, form: str, affine: str, k: int = 1):
        super().__init__()
        self.form, self.affine, self.axes = form, affine, tuple(range(-k, 0))
        self.w = torch.nn.Parameter(torch.rand(*[4] * (k - 1), 8) + 0.5)
        self.b = torch.nn.Parameter(torch.randn(*[4] * (k - 1), 8))

    def forward(self, x):
        d = x - x.mean(self.axes, keepdim=True)
        v = (d * d).mean(self.axes, keepdim=True) + 1e-5
        n = {"div": lambda: d / torch.sqrt(v), "mul": lambda: d * torch.rsqrt(v),
             "rmul": lambda: torch.rsqrt(v) * d}[self.form]()
        if "scale" in self.affine:
            n = n * self.w
        if "bias" in self.affine:
            n = n + self.b
        return n


@pytest.mark.slow
@pytest.mark.parametrize("form", ["div", "mul", "rmul"])
@pytest.mark.parametrize("affine", ["", "scale", "bias", "scale_bias"])
def test_layer_norm_rules_fire_on_exported_formulas(form, affine):
    r = check_export(_LayerNormFormula(form, affine), (torch.randn(2, 3, 8),), ({0: "b", 1: "t"},),
                     sizes=[{"b": 1, "t": 5}, {"b": 4, "t": 2}])
    assert count_ops(r, "LayerNormalization") == 1 and count_ops(r, "ReduceMean") == 0
    assert count_ops(r, "Mul") == 0 and count_ops(r, "Add") == 0
    (ln,) = [n for n in r.model.graph if n.op_type == "LayerNormalization"]
    assert len(ln.inputs) == (3 if "bias" in affine else 2)
    assert ln.attributes.get_int("axis") == -1 and abs(ln.attributes.get_float("epsilon") - 1e-5) < 1e-9
    fired = rules_fired(r.model, "LayerNormalization")[0]
    assert "LayerNormFormula_" in fired
    assert ("LayerNormalizationScale" in fired) == ("scale" in affine)
    assert ("LayerNormalizationBias" in fired) == ("bias" in affine)


def test_layer_norm_over_two_axes_fires():
    r = check_export(_LayerNormFormula("div", "scale_bias", k=2), (torch.randn(2, 4, 8),), ({0: "b"},),
                     sizes=[{"b": 1}, {"b": 5}])
    (ln,) = [n for n in r.model.graph if n.op_type == "LayerNormalization"]
    assert ln.attributes.get_int("axis") == -2 and len(ln.inputs) == 3


class _InBranch(torch.nn.Module):
    """The layer-norm formula in one branch of ``torch.cond``: a local function or an If branch."""

    def __init__(self):
        super().__init__()
        self.norm = _LayerNormFormula("div", "scale_bias")

    def forward(self, x):
        return torch.cond(x.sum() > 0, self.norm, lambda t: t * 2, (x,))


@pytest.mark.slow
@pytest.mark.parametrize("inline", [False, True], ids=["function", "if-branch"])
def test_layer_norm_rules_fire_in_control_flow_bodies(inline):
    x = torch.randn(2, 3, 8).abs()
    r = check_export(_InBranch(), (x,), ({0: "b", 1: "t"},), inputs=[(-x,)], inline=inline,
                     sizes=[{"b": 1, "t": 5}, {"b": 4, "t": 2}])
    assert count_ops(r, "LayerNormalization") == 1 and count_ops(r, "ReduceMean") == 0
    assert bool(r.model.functions) != inline
