"""The check of target ``genai-cpu``'s rewritten decoder against eager PyTorch (``onnxport.verify.rewritten``):
a float32 output beyond its float64 limit passes within ``CONTRIB_FACTOR`` times the standard export's
distance from float64 (the contrib kernels' rounding), and no further; a wrong rewrite (the rotary's sine
negated, keys and values swapped) is still refused with ``RuntimeTargetError``; the decoder of
``benchmarks/genai_int4.py`` trained a fixed number of seeded steps, beyond its own limit, passes."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import onnx_ir as ir
import pytest
import torch

from onnxport.errors import RuntimeTargetError
from onnxport.targets import TARGETS
from onnxport.targets import CONTRIB_FACTOR, genai_cpu
from onnxport.verify import rewritten
from onnxport.verify.rewritten import widened
from onnxport.targets.genai_attention import fuse_group_query_attention
from onnxport.targets.genai_rotary import fuse_rotary
from onnxport.verify.report import FLOAT64, Check, ValidationReport

pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)

transformers = pytest.importorskip("transformers")
pytest.importorskip("onnxruntime_genai")


def _row(onnx_f64: float, limit: float, output: str = "logits", basis: str = FLOAT64) -> Check:
    return Check("sizes 3", "batch=2", output, (2, 3, 8), 0.0, 0.0, onnx_f64 <= limit, scale=1.0,
                 eager_vs_float64=1e-6, onnx_vs_float64=onnx_f64, limit=limit, basis=basis)


def test_widened_limit_is_the_factor_times_the_standard_export():
    # the measured case: a rewritten Qwen2's logits 2.65e-5 of the scale from float64 against a limit of 2.43e-5,
    # its standard export 1.12e-5
    standard = ValidationReport((_row(1.12e-5, 2.43e-5), _row(1e-6, 1e-5, "present.0.key")))
    report = widened(ValidationReport((_row(2.65e-5, 2.43e-5), _row(1e-6, 1e-5, "present.0.key"))), standard,
                     CONTRIB_FACTOR)
    assert report.ok
    logits = report.checks[0]
    assert logits.limit == pytest.approx(CONTRIB_FACTOR * 1.12e-5) and "standard export" in logits.note
    assert report.checks[1] == _row(1e-6, 1e-5, "present.0.key")  # within its own limit: as it was
    # beyond the factor: refused
    beyond = CONTRIB_FACTOR * 1.12e-5 * 1.01
    assert not widened(ValidationReport((_row(beyond, 2.43e-5),)), standard, CONTRIB_FACTOR).ok
    # a row not judged against float64 (a dtype tolerance, a NaN where eager has none) stands
    failed = dataclasses.replace(_row(2.65e-5, 2.43e-5), basis="a float16 output: judged by ...")
    assert not widened(ValidationReport((failed,)), standard, CONTRIB_FACTOR).ok


def test_genai_cpu_judges_by_the_contrib_factor():
    assert TARGETS["genai-cpu"].kernel_factor == CONTRIB_FACTOR
    assert all(TARGETS[name].kernel_factor is None for name in ("portable", "openvino"))


def _tiny_qwen2(path):
    """A tiny Qwen2 (2 layers, hidden 64, grouped-query attention) of seeded random weights, written by
    ``save_pretrained`` to ``path``."""
    torch.manual_seed(3)
    config = transformers.Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = transformers.Qwen2ForCausalLM(config)
    model.eval().save_pretrained(path)
    return path


def _negated_sine(model: ir.Model):
    """``fuse_rotary``, then each ``RotaryEmbedding`` reading the sine negated: a rotation the wrong way."""
    found = fuse_rotary(model)
    for node in [n for n in model.graph if n.op_type == "RotaryEmbedding"]:
        neg = ir.Node("", "Neg", [node.inputs[3]])
        model.graph.append(neg)
        node.replace_input_with(3, neg.outputs[0])
    return found


def _keys_for_values(model: ir.Model):
    """``fuse_group_query_attention``, then each ``GroupQueryAttention`` reading the new values as keys
    and the keys as values."""
    reasons = fuse_group_query_attention(model)
    for node in [n for n in model.graph if n.op_type == "GroupQueryAttention"]:
        key, value = node.inputs[1], node.inputs[2]
        node.replace_input_with(1, value)
        node.replace_input_with(2, key)
    return reasons


@pytest.mark.parametrize("name, wrong", [("fuse_rotary", _negated_sine),
                                         ("fuse_group_query_attention", _keys_for_values)])
def test_a_wrong_rewrite_is_refused(tmp_path, monkeypatch, name, wrong):
    from onnxport.pretrained import export_pretrained

    source = _tiny_qwen2(tmp_path / "qwen2")
    monkeypatch.setattr(genai_cpu, name, wrong)
    with pytest.raises(RuntimeTargetError, match="rewritten for target 'genai-cpu' differs from eager"):
        export_pretrained(source, target="genai-cpu", validate=False, generate=0)


BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "genai_int4.py"
STEPS = 52  # the benchmark's decoder trained this many steps: its logits beyond their float64 limit


@pytest.mark.slow
def test_a_trained_decoder_passes(tmp_path, monkeypatch):
    """``benchmarks/genai_int4.py``'s Qwen2 (8 layers, hidden 256) trained ``STEPS`` seeded steps: rewritten,
    its logits lie beyond their own float64 limit at batch 2, 3 new tokens, no past (2.65e-5 of the scale,
    the limit 2.43e-5: the norm kernel's rounding), within ``CONTRIB_FACTOR`` times the standard export's
    distance, and the export passes."""
    from onnxport.pretrained import export_pretrained

    spec = importlib.util.spec_from_file_location("_bench_genai_int4", BENCHMARK)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the benchmark trains
    try:
        model, _, _ = bench.train_qwen2(STEPS)
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(tmp_path / "qwen2")
    widenings = []

    def spy(report, standard, factor):
        widenings.append(widened(report, standard, factor))
        return widenings[-1]

    monkeypatch.setattr(rewritten, "widened", spy)
    result = export_pretrained(tmp_path / "qwen2", target="genai-cpu", validate=False, generate=0)
    assert result.parts["model"].target == "genai-cpu"
    assert genai_cpu.genai_fusions(result.parts["model"].model)["skip_norm"] == genai_cpu.APPLIED
    # the case this test is for: the rewritten model beyond its own limit, within the standard export's
    assert len(widenings) == 1 and widenings[0].ok
    assert any("standard export" in c.note for c in widenings[0].checks if c.output == "logits")
