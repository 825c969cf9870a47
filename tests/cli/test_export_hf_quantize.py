"""``onnxport export-hf --quantize int4|int8``: a tiny Llama written by ``save_pretrained`` exported as a
quantized decoder for onnxruntime-genai. The written model holds the quantized operators with the
stated attributes, its accuracy against the float model is reported (logits' top-1 agreement and
error, greedy-token agreement, with their tolerance), and onnxruntime-genai loads the directory and
decodes greedily the tokens onnxruntime's own greedy decoding of that model chose."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch
from onnx import helper

from onnxport.cli import main
from onnxport.metadata import QUANTIZATION_KEY
from tests.cli.test_export_hf_files import llama  # noqa: F401 - fixture: a saved tiny Llama
from tests.targets.test_genai_cpu import _genai_tokens

pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)

og = pytest.importorskip("onnxruntime_genai")
transformers = pytest.importorskip("transformers")

GENERATE = 6


@pytest.fixture(scope="module")
def tied_qwen2(tmp_path_factory):
    """A tiny Qwen2 whose lm_head is tied to its token embedding, written by ``save_pretrained`` (seeded)."""
    path = tmp_path_factory.mktemp("hf") / "qwen2"
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def _export(llama, tmp_path, *extra):  # noqa: F811 - the fixture's value
    out = tmp_path / "out"
    report = tmp_path / "report.json"
    code = main(["export-hf", str(llama), "-o", str(out), "--quiet", "--generate", str(GENERATE),
                 "--report", str(report), *extra])
    data = json.loads(report.read_text())
    return code, out, data


def _check_report(code, data):
    """The accuracy is reported, with its tolerance, and the exit code follows it."""
    validation = data["validation"]["model"]
    assert validation["tolerance"] == {"top1": 0.99, "cosine": 0.99}
    logits = validation["outputs"]["logits"]
    assert logits["kind"] == "classes" and 0.0 <= logits["top1"] <= 1.0 and np.isfinite(logits["max_abs"])
    assert logits["max_abs"] > 0  # the quantized model is not the float one
    assert [g["label"] for g in data["generation"]] == ["batch 1", "batch 2, the second prompt left-padded"]
    for g in data["generation"]:
        assert g["tolerance"] == 0.99 and len(g["expected"][0]) == GENERATE
        assert g["agreement"] >= 0.5, g  # teacher-forced greedy steps choose the float model's token
    assert code == (0 if data["ok"] else 1)
    assert data["ok"] == (validation["ok"] and all(g["ok"] for g in data["generation"]))


@pytest.mark.slow
def test_export_hf_quantize_int4_decodes_in_genai(llama, tmp_path):  # noqa: F811
    code, out, data = _export(llama, tmp_path, "--quantize", "int4")
    _check_report(code, data)
    model = onnx.load(out / "model.onnx")
    nbits = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
    attrs = [{a.name: helper.get_attribute_value(a) for a in n.attribute} for n in nbits]
    # 2 layers x (q, k, v, o, gate, up, down) + lm_head; only the attention's own products stay MatMul
    assert len(nbits) == 15 and all(n.domain == "com.microsoft" for n in nbits)
    assert all(a["accuracy_level"] == 4 and a["block_size"] == 32 and a["bits"] == 4 for a in attrs)
    assert any(a["N"] == 1000 for a in attrs)  # the lm_head
    assert not [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in
                {i.name for i in model.graph.initializer}]
    assert {p.key: p.value for p in model.metadata_props}[QUANTIZATION_KEY] == "int4"
    config = json.loads((out / "genai_config.json").read_text())
    assert config["model"]["decoder"]["filename"] == "model.onnx"
    _check_genai(out, data)


@pytest.mark.slow
def test_export_hf_quantize_int4_gathers_a_tied_embedding_from_the_lm_head_blocks(tied_qwen2, tmp_path):
    code, out, data = _export(tied_qwen2, tmp_path, "--quantize", "int4", "--block-size", "16")
    _check_report(code, data)
    model = onnx.load(out / "model.onnx")
    nodes = {n.output[0]: n for n in model.graph.node}
    [gather] = [n for n in model.graph.node if n.op_type == "GatherBlockQuantized"]
    attrs = {a.name: helper.get_attribute_value(a) for a in gather.attribute}
    assert attrs == {"gather_axis": 0, "quantize_axis": 1, "block_size": 16, "bits": 4}
    # its table and scales are the lm_head's MatMulNBits weight and scales, reshaped: the table is stored once
    lm_head = [n for n in model.graph.node if n.op_type == "MatMulNBits" and
               any(a.name == "N" and a.i == 500 for a in n.attribute)]
    assert len(lm_head) == 1
    assert [nodes[gather.input[0]].input[0], nodes[gather.input[2]].input[0]] == list(lm_head[0].input[1:3])
    assert not [i for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT and
                list(i.dims) in ([500, 64], [64, 500])]
    _check_genai(out, data)


@pytest.mark.slow
def test_export_hf_quantize_int8_decodes_in_genai(llama, tmp_path):  # noqa: F811
    code, out, data = _export(llama, tmp_path, "--quantize", "int8")
    _check_report(code, data)
    model = onnx.load(out / "model.onnx")
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMulInteger") == 15 and "MatMulNBits" not in ops
    _check_genai(out, data)


def _check_genai(out, data):
    """onnxruntime-genai decodes, from the batch-1 prompt, the tokens onnxruntime's greedy decoding of
    the written model chose (the report's free decoding)."""
    from onnxport.pretrained.decoder import prompts
    from onnxport.pretrained.load import load_model

    model, _ = load_model(str(data["source"]))
    ids, _ = prompts(model)
    free = data["generation"][0]["free"][0]
    assert _genai_tokens(out, GENERATE, ids[0].tolist()) == free


@pytest.mark.parametrize("extra, says", [
    (["--quantize", "int4", "--block-size", "24"], "int4 block size 24 is not a power of 2"),
    (["--quantize", "int4", "--task", "feature-extraction"], "quantization of export-hf serves decoders"),
])
def test_export_hf_quantize_refuses_before_exporting(llama, tmp_path, capsys, extra, says):  # noqa: F811
    out = tmp_path / "out"
    assert main(["export-hf", str(llama), "-o", str(out), "--quiet", *extra]) == 2
    assert says in capsys.readouterr().err
    assert not out.exists()
