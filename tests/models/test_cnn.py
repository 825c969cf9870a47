"""ResNet-style CNN with padding="same" convolutions (onnxport.demo_models), 1-D and 2-D."""

import pytest
import torch

from exportcheck import check_export, count_ops
from onnxport.demo_models import cnn_example, resnet_same_cnn


def _check_same_padding_convs(result):
    """Every "same" conv is written with explicit pads, the even kernels padded one more at the end."""
    convs = [n for n in result.model.graph if n.op_type == "Conv"]
    assert len(convs) == 5
    for node in convs:
        assert node.attributes.get("auto_pad") is None
        kernel = node.attributes["kernel_shape"].value
        dil = node.attributes["dilations"].value
        pads = node.attributes["pads"].value
        n = len(kernel)
        total = [d * (k - 1) for k, d in zip(kernel, dil)]
        assert [b + e for b, e in zip(pads[:n], pads[n:])] == total
        assert all(e - b in (0, 1) for b, e in zip(pads[:n], pads[n:]))


@pytest.mark.parametrize("optimize", [True, False])
def test_resnet_same_cnn_1d(optimize):
    model = resnet_same_cnn()
    args, dynamic_shapes = cnn_example()
    result = check_export(model, args, dynamic_shapes, atol=1e-4, rtol=0.0, optimize=optimize,
                          sizes=[{"batch": 3, "time": 7}, {"batch": 1, "time": 50}, {"batch": 5, "time": 2}],
                          expect_inputs={"x": ["batch", 8, "time"]}, expect_outputs={"output": ["batch", 5]})
    report = result.validate(sizes=[{"batch": 4, "time": 33}], atol=1e-4, rtol=0.0)
    assert report.ok and report.max_abs < 1e-4, report
    _check_same_padding_convs(result)
    # unoptimized: one BatchNormalization per batch norm (the optimizer may fold them into the convs)
    if not optimize:
        assert count_ops(result, "BatchNormalization") == 5
    # the global average over the dynamic time axis: a ReduceMean accumulating in float64
    # (onnxport.translate.ops._accurate), not onnxruntime's GlobalAveragePool, which adds a long run into a few
    # float32 sums
    assert count_ops(result, "MaxPool") == 1 and count_ops(result, "GlobalAveragePool") == 0
    assert count_ops(result, "ReduceMean") == 1


@pytest.mark.parametrize("opset", [18, 20])
def test_resnet_same_cnn_2d(opset):
    model = resnet_same_cnn(dims=2, seed=1)
    x = torch.randn(2, 8, 12, 10)
    result = check_export(model, (x,), {"x": {0: "batch", 2: "height", 3: "width"}}, atol=1e-4, rtol=0.0,
                          sizes=[{"batch": 3, "height": 9, "width": 13}, {"batch": 1, "height": 20, "width": 5}],
                          expect_inputs={"x": ["batch", 8, "height", "width"]}, opset=opset)
    assert result.validate(atol=1e-4, rtol=0.0).max_abs < 1e-4
    _check_same_padding_convs(result)


def test_batch_norm_statistics_are_not_trivial():
    """The running statistics differ from (0, 1): a translation ignoring them would fail."""
    model = resnet_same_cnn()
    bn = model.stem_bn
    assert bn.running_mean.abs().max() > 0.1 and (bn.running_var - 1).abs().max() > 0.1
