"""Quantized exports judged in the user's terms: each mode on a tiny CNN trained on synthetic shapes
and on a tiny Llama trained on a short text (``benchmarks/trained.py``), against the default
tolerance (``AccuracyTolerance()``: top-1 agreement 0.99, cosine 0.99, greedy tokens 0.99); what
stays in float; a new, complete result each time, the float one unchanged."""

from collections import Counter

import pytest
import torch

import onnxport
from onnxport.quantize import AccuracyTolerance
from trained_models import cnn, llama, text_windows

pytest.importorskip("transformers")

MODE_OPS = {"int8": "MatMulInteger", "int8-static": "QuantizeLinear", "int4": "MatMulNBits"}
DEFAULT = AccuracyTolerance()


def ops(result) -> Counter:
    return Counter(n.op_type for n in result.model.graph)


@pytest.mark.parametrize("mode", ["int8", "int8-static", "int4"])
def test_each_mode_on_the_trained_cnn(mode):
    model, result, images, labels = cnn()
    float_ops = ops(result)
    calibration = [(images[i:i + 16],) for i in range(0, 128, 16)] if mode == "int8-static" else None
    q = result.quantize(mode, calibration_inputs=calibration)
    assert q is not result and q.quantization.mode == mode and result.quantization is None
    assert ops(result) == float_ops  # the float result is left as it was
    assert ops(q)[MODE_OPS[mode]] >= 1
    kept = {n.weight: n.kept for n in q.quantization.nodes}
    assert kept["classes.weight"] == "final projection"
    assert kept["hidden.weight"] == ""
    assert (kept["features.0.weight"] == "") == (mode == "int8-static")  # convolutions: static int8 only
    with torch.no_grad():
        assert (model(images).argmax(-1) == labels).float().mean() > 0.9  # the model learned its task

    report = q.validate(inputs=[(images,)])
    summary = report.summary()["output"]
    assert summary["kind"] == "classes" and report.top1_min == DEFAULT.top1
    assert report.ok and summary["top1"] >= DEFAULT.top1, report
    assert 0 < summary["max_abs"] < 1.0  # quantized: not float32-exact, and not far off
    assert "top-1 agreement" in str(report) and "accuracy within tolerance" in str(report)
    assert {c.inputs for c in report.checks} >= {"example", "sizes 1", "inputs 1"}


@pytest.mark.parametrize("mode", ["int8", "int8-static", "int4"])
def test_each_mode_on_the_trained_llama(mode):
    model, result, prompts = llama()
    options = {"int4": {"block_size": 16}, "int8-static": {"calibration_inputs": text_windows(8, offset=5)}}
    q = result.quantize(mode, **options.get(mode, {}))
    assert ops(q)[MODE_OPS[mode]] >= 1
    kept = {n.weight: n.kept for n in q.quantization.nodes}
    assert kept["lm_head.weight.T"] == "final projection"
    assert kept["model.layers.0.self_attn.k_proj.weight.T"] == ""  # feeds the cache: quantized
    if mode == "int4":
        assert q.quantization.block_size == 16

    agreement = q.check_generation(model, prompts, max_new_tokens=16)
    assert agreement.tolerance == DEFAULT.tokens
    assert agreement.ok and agreement.agreement >= DEFAULT.tokens, agreement
    assert len(agreement.expected[0]) == 16

    report = q.validate(inputs=text_windows(), sizes=[])
    summary = report.summary()
    assert summary["logits"]["kind"] == "classes" and summary["present.0.key"]["kind"] == "hidden"
    assert report.ok, report
    assert summary["logits"]["top1"] >= DEFAULT.top1
    assert min(s["cosine"] for n, s in summary.items() if n.startswith("present.")) >= DEFAULT.cosine


def test_a_tolerance_the_quantized_model_misses_fails():
    _, result, images, _ = cnn()
    q = result.quantize("int8", tolerance=AccuracyTolerance(top1=0.99, cosine=1.0))
    report = q.validate(inputs=[(images,)])
    assert report.ok  # classes are judged by top-1 only
    hidden = result.quantize("int8", kinds={"output": "hidden"}, tolerance=AccuracyTolerance(cosine=1.0))
    report = hidden.validate(inputs=[(images,)])
    assert not report.ok and "ACCURACY BELOW TOLERANCE" in str(report)


def test_a_corrupted_quantized_decoder_is_reported_at_its_first_divergence():
    model, result, prompts = llama()
    q = result.quantize("int8", keep_float=["lm_head"])
    import onnx

    proto = onnx.ModelProto()
    proto.CopyFrom(q.model_proto)
    head = next(t for t in proto.graph.initializer if t.name.startswith("lm_head"))
    values = onnx.numpy_helper.to_array(head).copy()[:, ::-1]  # the vocabulary reversed
    head.CopyFrom(onnx.numpy_helper.from_array(values.copy(), head.name))
    from onnxport.verify.accuracy import generation_agreement

    report = generation_agreement(model, proto, prompts, max_new_tokens=4)
    assert not report.ok and report.first_divergence == 0 and report.agreement < 0.5


def test_keep_float_and_the_errors_of_quantize():
    _, result, _, _ = cnn()
    with pytest.raises(onnxport.ExportError, match="nothing to quantize"):
        result.quantize("int8", keep_float=["hidden"])
    with pytest.raises(onnxport.ExportError, match="unknown quantization mode"):
        result.quantize("int2")
    with pytest.raises(onnxport.ExportError, match="power of 2"):
        result.quantize("int4", block_size=24)
    q = result.quantize("int8-static", keep_float=["features.0"])
    kept = {n.weight: n.kept for n in q.quantization.nodes}
    assert kept["features.0.weight"] == "user list" and kept["features.3.weight"] == ""
    assert "generated example-like inputs" in q.quantization.calibration
    with pytest.raises(onnxport.ExportError, match="already quantized"):
        q.quantize("int4")
    assert "quantized=int8-static" in repr(q)
    assert q.model.metadata_props["onnxport.quantization"] == "int8-static"


@pytest.mark.parametrize("mode", ["int8", "int8-static", "int4"])
def test_a_final_gemm_quantized_on_request_keeps_the_output_and_its_kind(mode):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    result = onnxport.to_onnx(mlp, (torch.randn(4, 16),), dynamic_shapes={"input": {0: "batch"}})
    assert [n.op_type for n in result.model.graph] == ["Gemm", "Relu", "Gemm"]
    q = result.quantize(mode, final_projection=False)
    assert all(not n.kept for n in q.quantization.nodes) and "Gemm" not in ops(q)  # both as MatMul, quantized
    assert [o.name for o in q.model.graph.outputs] == ["output"]
    assert dict(q.quantization.kinds) == {"output": "classes"}  # read on the float graph, whatever the mode
    report = q.validate(sizes=[{"batch": 3}])
    assert [c.kind for c in report.checks] == ["classes", "classes"]
    assert all(c.max_abs < 0.2 and c.cosine > 0.99 for c in report.checks)
