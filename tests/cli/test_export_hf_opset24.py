"""``onnxport export-hf --opset 24``: a decoder whose cache is one buffer of ``max_length`` per key
and value, updated by ``TensorScatter`` and read by ``Attention`` with ``nonpad_kv_seqlen``
(``onnxport.pretrained.fixed_cache``); its greedy decoding in onnxruntime gives ``generate``'s tokens,
for one prompt and for a batch of two with the second left-padded, and so does a decoding fed
buffers longer than it fills."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from onnxport.cli import main
from onnxport.errors import ExportError
from onnxport.pretrained import export_pretrained
from onnxport.verify.decoding import first_positions

from tests.cli.test_export_hf_files import llama  # noqa: F401 - fixture: a saved tiny Llama

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("offline")]  # no network (conftest.py)


@pytest.fixture(scope="module")
def exported(llama, tmp_path_factory):  # noqa: F811 - the fixture imported above
    out = tmp_path_factory.mktemp("opset24")
    code = main(["export-hf", str(llama), "-o", str(out / "model"), "--opset", "24", "--generate", "8",
                 "--report", str(out / "report.json"), "--quiet"])
    return code, out


def test_opset24_writes_scatter_and_attention_and_decodes_as_generate(exported):
    code, out = exported
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    labels = [g["label"] for g in report["generation"]]
    assert labels == ["batch 1", "batch 2, the second prompt left-padded"]
    assert all(g["ok"] and len(g["got"][0]) == 8 for g in report["generation"])
    checks = report["validation"]["model"]["checks"]
    assert report["validation"]["model"]["ok"] and len(checks) == 4 * 5  # 4 sizes x logits and 4 caches
    assert {c["inputs"] for c in checks} == {"example", "one row", "padded step", "padded past"}
    assert not (out / "model" / "genai_config.json").exists()  # onnxruntime-genai would feed it a growing cache
    model = onnx.load(out / "model" / "model.onnx")
    assert {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")} == {24}
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("TensorScatter") == 4 and ops.count("Attention") == 2  # 2 layers, key and value each
    assert all(len(n.input) == 7 and n.input[6] for n in model.graph.node if n.op_type == "Attention")
    producer = {o: n.op_type for n in model.graph.node for o in n.output}
    assert {producer[v.name] for v in model.graph.output if v.name.startswith("present.")} == {"TensorScatter"}
    past = next(i for i in model.graph.input if i.name == "past_key_values.0.key")
    assert [d.dim_param or d.dim_value for d in past.type.tensor_type.shape.dim] == ["batch_size", 2, "max_length", 16]


def test_opset24_decodes_a_padded_batch_in_a_longer_buffer(exported, llama):  # noqa: F811
    """Own loop: buffers of prompt + new + 5 positions (a tail never written), left-padded row."""
    _, out = exported
    model = transformers.AutoModelForCausalLM.from_pretrained(llama).eval()
    torch.manual_seed(3)
    ids = torch.randint(3, 1000, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.int64)
    ids[1, :3], mask[1, :3] = 0, 0
    new = 6
    with torch.no_grad():
        expected = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False,
                                  pad_token_id=0, eos_token_id=None)[:, 7:].numpy()
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.log_severity_level = 1, 3
    session = ort.InferenceSession(str(out / "model" / "model.onnx"), options, providers=["CPUExecutionProvider"])
    length = 7 + new + 5
    feeds = {i.name: np.zeros((2, 2, length, 16), np.float32) for i in session.get_inputs()
             if i.name.startswith("past_key_values.")}
    m, tokens = mask.numpy(), ids.numpy()
    positions, seen, got = first_positions(m), 7, []
    names = [o.name for o in session.get_outputs()]
    for _ in range(new):
        n = tokens.shape[1]
        feeds.update(input_ids=tokens, attention_mask=m[:, :seen], position_ids=positions[:, seen - n:seen])
        result = dict(zip(names, session.run(None, feeds)))
        feeds.update({k: result["present" + k[len("past_key_values"):]] for k in feeds if k.startswith("past_")})
        tokens = result["logits"][:, -1].argmax(-1)[:, None].astype(np.int64)
        got.append(tokens[:, 0])
        seen += 1
        m = np.concatenate([m, np.ones((2, 1), np.int64)], axis=1)
        positions = np.concatenate([positions, positions[:, -1:] + 1], axis=1)
    assert np.array_equal(np.stack(got, axis=1), expected)
    assert not feeds["past_key_values.0.key"][:, :, 7 + new:].any()  # the tail stays unwritten


def test_opset24_refuses_a_task_other_than_decoding(llama):  # noqa: F811
    with pytest.raises(ExportError, match="fixed-buffer key/value cache of a decoder"):
        export_pretrained(llama, "feature-extraction", opset=24)


def test_opset24_validation_fails_a_cache_written_at_the_wrong_place(exported, llama):  # noqa: F811
    """The step check against eager catches new keys and values written at position 0 (no write_indices)."""
    from onnxport.pretrained.fixed_cache_check import check_fixed_cache

    _, out = exported
    proto = onnx.load(out / "model" / "model.onnx")
    for node in proto.graph.node:
        if node.op_type == "TensorScatter":
            del node.input[2]
    model = transformers.AutoModelForCausalLM.from_pretrained(llama).eval()
    report = check_fixed_cache(proto, model)
    assert not report.ok
    assert {c.inputs for c in report.checks if not c.ok} == {"example", "one row", "padded step", "padded past"}


def test_opset24_gpt2_multi_head_attention(tmp_path):
    """GPT-2: as many key/value heads as query heads (no repeat_kv), its own attention code."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                                     pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2")
    result = export_pretrained(tmp_path / "gpt2", generate=6, opset=24)
    assert result.ok, (result.parts["model"].validation, result.generation)
    ops = [n.op_type for n in result.parts["model"].model.graph]
    assert ops.count("TensorScatter") == 4 and ops.count("Attention") == 2
    assert [label for label, _ in result.generation] == ["batch 1", "batch 2, the second prompt left-padded"]
