import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.optimize.fuse_conv_bn import ConvBatchNormFusionPass
from optcheck import check_pass, ops, parse, rules_fired

SIZES = [{"N": 1, "H": 5}, {"N": 3, "H": 8}]
PARAMS = ("float[2, 3, 3, 3] w = {%s}, float[2] s = {1.5, 0.5}, float[2] b = {0.1, -0.2}, "
          "float[2] mu = {0.3, -1.0}, float[2] var = {2.0, 0.25}" % ",".join(str(i % 7 - 3) for i in range(54)))


@pytest.mark.parametrize("conv_bias", [True, False])
def test_batch_norm_folded_into_conv(conv_bias):
    bias = ", float[2] cb = {1.0, -1.0}" if conv_bias else ""
    conv = "c = Conv<pads = [1, 1, 1, 1]>(x, w, cb)" if conv_bias else "c = Conv<pads = [1, 1, 1, 1]>(x, w)"
    m = parse(f"""
g (float[N, 3, H, H] x) => (float[N, 2, H, H] y) <{PARAMS}{bias}> {{
  {conv}
  y = BatchNormalization<epsilon = 0.001>(c, s, b, mu, var)
}}""")
    model = check_pass(ConvBatchNormFusionPass(), m, SIZES, atol=1e-4)
    assert ops(model)["BatchNormalization"] == 0 and ops(model)["Conv"] == 1


def test_conv_output_used_twice_or_dynamic_weights_left_alone():
    m = parse(f"""
g (float[N, 3, H, H] x, float[2] s2) => (float[N, 2, H, H] y, float[N, 2, H, H] z, float[N, 2, H, H] q) <{PARAMS}> {{
  c = Conv<pads = [1, 1, 1, 1]>(x, w)
  y = BatchNormalization(c, s, b, mu, var)
  z = Relu(c)
  c2 = Conv<pads = [1, 1, 1, 1]>(x, w)
  q = BatchNormalization(c2, s2, b, mu, var)
}}""")
    model = check_pass(ConvBatchNormFusionPass(), m, SIZES, atol=1e-4)
    assert ops(model)["BatchNormalization"] == 2


def test_folded_initializers_keep_their_names():
    m = parse(f"""
g (float[N, 3, H, H] x) => (float[N, 2, H, H] y) <{PARAMS}, float[2] cb = {{1.0, -1.0}}> {{
  c = Conv<pads = [1, 1, 1, 1]>(x, w, cb)
  y = BatchNormalization(c, s, b, mu, var)
}}""")
    model = check_pass(ConvBatchNormFusionPass(), m, SIZES, atol=1e-4)
    conv = next(n for n in model.graph if n.op_type == "Conv")
    assert [v.name for v in conv.inputs[1:]] == ["w", "cb"]


@pytest.mark.parametrize("bias", [True, False])
def test_conv_bn_rule_fires_on_exported_conv_batch_norm(bias):
    bn = torch.nn.BatchNorm2d(4)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1, bias=bias), bn)
    r = check_export(model, (torch.randn(2, 3, 8, 8),), ({0: "b", 2: "h", 3: "w"},),
                     sizes=[{"b": 1, "h": 5, "w": 9}, {"b": 3, "h": 12, "w": 4}])
    assert count_ops(r, "BatchNormalization") == 0 and count_ops(r, "Conv") == 1
    assert rules_fired(r.model, "Conv") == ["ConvBatchNorm"]
