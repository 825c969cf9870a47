"""``onnxport export-hf DIR -o OUT --task TASK`` on directories written by ``save_pretrained`` from tiny
configs (2 layers, width 64, vocab 1000, seeded): every task, run in process through the command
line, with the network closed (``HF_HUB_OFFLINE=1``, and a socket that refuses to connect).

Each export is checked on its files, its input and output names and dims (as Optimum and
onnxruntime-genai name them), the validation and decoding checks the command ran (its JSON
report), and independently: a single model run in onnxruntime against eager PyTorch at a size the
command did not use; the Llama decoder loaded and run by onnxruntime-genai itself, whose greedy
tokens must be those of ``generate``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from onnxport.cli import main
from onnxport.verify import OrtRunner

transformers = pytest.importorskip("transformers")

VOCAB, WIDTH, LAYERS, HEADS, FF = 1000, 64, 2, 4, 128
IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)


def _save(path, model) -> str:
    model.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """Model directories by name, each written by save_pretrained from a seeded tiny model."""
    root = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    bert = transformers.BertConfig(vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=LAYERS,
                                   num_attention_heads=HEADS, intermediate_size=FF, max_position_embeddings=64,
                                   num_labels=3, architectures=["BertForSequenceClassification"])
    vit = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=WIDTH, num_hidden_layers=LAYERS,
                                 num_attention_heads=HEADS, intermediate_size=FF, num_labels=5)
    whisper = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=80, encoder_layers=LAYERS,
                                         decoder_layers=LAYERS, encoder_attention_heads=HEADS,
                                         decoder_attention_heads=HEADS, d_model=WIDTH,
                                         encoder_ffn_dim=FF, decoder_ffn_dim=FF, max_source_positions=32,
                                         max_target_positions=64, decoder_start_token_id=1, **IDS)
    llama = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=FF,
                                     num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=2,
                                     max_position_embeddings=128, **IDS)
    t5 = transformers.T5Config(vocab_size=VOCAB, d_model=WIDTH, d_kv=16, d_ff=FF, num_layers=LAYERS, num_heads=HEADS,
                               decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    return {
        "bert": _save(root / "bert", transformers.BertForSequenceClassification(bert)),
        "vit": _save(root / "vit", transformers.ViTForImageClassification(vit)),
        "whisper": _save(root / "whisper", transformers.WhisperForConditionalGeneration(whisper)),
        "llama": _save(root / "llama", transformers.LlamaForCausalLM(llama)),
        "t5": _save(root / "t5", transformers.T5ForConditionalGeneration(t5)),
    }


def export_hf(directory, out, *options) -> tuple[int, dict]:
    """Run the command in process; ``(exit code, its JSON report)``."""
    report = out.parent / f"{out.name}.json"
    code = main(["export-hf", str(directory), "-o", str(out), "--report", str(report), "--quiet", *options])
    return code, json.loads(report.read_text()) if report.exists() else {}


def signature(path) -> tuple[dict, dict]:
    """``({input: dims}, {output: dims})`` of an ONNX file, dim_params as strings."""
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)

    def dims(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    return {v.name: dims(v) for v in proto.graph.input}, {v.name: dims(v) for v in proto.graph.output}


def assert_checked(report: dict, models: list[str], decodings: int = 0) -> None:
    """The command validated every model (sizes other than the example's included) and ran the
    decoding checks, all passing."""
    assert report["ok"] is True
    assert sorted(report["validation"]) == sorted(models)
    for stem, validation in report["validation"].items():
        assert validation["ok"] and len({c["sizes"] for c in validation["checks"]}) >= 3, stem
    assert len(report["generation"]) == decodings
    for g in report["generation"]:
        assert g["ok"] and len(g["expected"][0]) >= 1 and g["got"] == g["expected"], g["label"]


def eager(directory, cls, inputs: dict, field: str) -> np.ndarray:
    model = getattr(transformers, cls).from_pretrained(directory, local_files_only=True).eval()
    with torch.no_grad():
        return model(**inputs)[field].numpy()


@pytest.mark.parametrize("task,field,width", [("feature-extraction", "last_hidden_state", WIDTH),
                                              ("text-classification", "logits", 3)])
def test_text_encoder_tasks(dirs, tmp_path, task, field, width):
    out = tmp_path / "bert"
    code, report = export_hf(dirs["bert"], out, "--task", task)
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.onnx"]
    inputs, outputs = signature(out / "model.onnx")
    assert inputs == {n: ["batch_size", "sequence_length"] for n in ("input_ids", "attention_mask", "token_type_ids")}
    assert outputs == {field: ["batch_size", "sequence_length", width] if task == "feature-extraction"
                       else ["batch_size", width]}
    assert_checked(report, ["model"])
    gen = torch.Generator().manual_seed(5)
    feed = {"input_ids": torch.randint(3, VOCAB, (3, 13), generator=gen),
            "attention_mask": torch.ones(3, 13, dtype=torch.int64),
            "token_type_ids": torch.zeros(3, 13, dtype=torch.int64)}
    feed["attention_mask"][2, 9:] = 0
    got = OrtRunner(str(out / "model.onnx")).run([feed[n] for n in inputs])[0]
    cls = "BertModel" if task == "feature-extraction" else "BertForSequenceClassification"
    np.testing.assert_allclose(got, eager(dirs["bert"], cls, feed, field), atol=1e-4, rtol=1e-3)


def test_image_classification(dirs, tmp_path):
    out = tmp_path / "vit"
    code, report = export_hf(dirs["vit"], out, "--task", "image-classification")
    assert code == 0
    inputs, outputs = signature(out / "model.onnx")
    assert inputs == {"pixel_values": ["batch_size", 3, 32, 32]} and outputs == {"logits": ["batch_size", 5]}
    assert_checked(report, ["model"])
    pixels = torch.randn(5, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    got = OrtRunner(str(out / "model.onnx")).run([pixels])[0]
    expected = eager(dirs["vit"], "ViTForImageClassification", {"pixel_values": pixels}, "logits")
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-3)


def test_speech_recognition_encoder_and_decoder_with_cache(dirs, tmp_path):
    out = tmp_path / "whisper"
    code, report = export_hf(dirs["whisper"], out, "--task", "automatic-speech-recognition", "--generate", "8")
    assert code == 0
    assert {"encoder_model.onnx", "decoder_model.onnx", "config.json", "generation_config.json"} == \
        {p.name for p in out.iterdir()}
    enc_in, enc_out = signature(out / "encoder_model.onnx")
    assert enc_in == {"input_features": ["batch_size", 80, 64]}
    assert enc_out["encoder_hidden_states"] == ["batch_size", 32, WIDTH]
    assert enc_out["present.1.encoder.value"] == ["batch_size", HEADS, 32, 16]
    dec_in, dec_out = signature(out / "decoder_model.onnx")
    assert dec_in["input_ids"] == ["batch_size", "decoder_sequence_length"]
    assert dec_in["past_key_values.0.decoder.key"] == ["batch_size", HEADS, "past_decoder_sequence_length", 16]
    assert dec_in["past_key_values.0.encoder.key"] == ["batch_size", HEADS, 32, 16]
    assert dec_out["logits"] == ["batch_size", "decoder_sequence_length", VOCAB]
    assert sorted(dec_out["present.1.decoder.key"][2].split(" + ")) == \
        ["decoder_sequence_length", "past_decoder_sequence_length"]
    assert_checked(report, ["encoder_model", "decoder_model"], decodings=2)


def test_text_generation_with_past_runs_in_onnxruntime_genai(dirs, tmp_path):
    import onnxruntime_genai as og

    out = tmp_path / "llama"
    code, report = export_hf(dirs["llama"], out)  # the task from config.json's architectures
    assert code == 0 and report["task"] == "text-generation-with-past"
    assert {p.name for p in out.iterdir()} == {"model.onnx", "genai_config.json", "config.json",
                                               "generation_config.json"}
    inputs, outputs = signature(out / "model.onnx")
    assert inputs["input_ids"] == inputs["position_ids"] == ["batch_size", "sequence_length"]
    assert inputs["attention_mask"] == ["batch_size", "total_sequence_length"]
    assert inputs["past_key_values.1.value"] == ["batch_size", 2, "past_sequence_length", 16]
    assert outputs["logits"] == ["batch_size", "sequence_length", VOCAB]
    assert sorted(outputs["present.0.key"][2].split(" + ")) == ["past_sequence_length", "sequence_length"]
    assert_checked(report, ["model"], decodings=2)
    genai = json.loads((out / "genai_config.json").read_text())["model"]
    assert genai["decoder"]["num_key_value_heads"] == 2 and genai["decoder"]["head_size"] == 16
    assert genai["decoder"]["num_hidden_layers"] == LAYERS and genai["vocab_size"] == VOCAB

    prompt = [5, 17, 42, 99, 7, 3]
    runtime = og.Model(str(out))
    params = og.GeneratorParams(runtime)
    params.set_search_options(max_length=len(prompt) + 12, do_sample=False)
    generator = og.Generator(runtime, params)
    generator.append_tokens(np.array([prompt], dtype=np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    got = [int(t) for t in generator.get_sequence(0)]
    model = transformers.LlamaForCausalLM.from_pretrained(dirs["llama"], local_files_only=True).eval()
    config = transformers.GenerationConfig(max_new_tokens=12, do_sample=False, **IDS)
    expected = model.generate(torch.tensor([prompt]), generation_config=config)[0].tolist()
    assert len(got) > len(prompt) and got == expected[:len(got)]


def test_text2text_generation_with_past(dirs, tmp_path):
    out = tmp_path / "t5"
    code, report = export_hf(dirs["t5"], out, "--task", "text2text-generation-with-past", "--generate", "8")
    assert code == 0
    enc_in, enc_out = signature(out / "encoder_model.onnx")
    assert enc_in == {n: ["batch_size", "encoder_sequence_length"] for n in ("input_ids", "attention_mask")}
    assert enc_out["present.0.encoder.key"] == ["batch_size", HEADS, "encoder_sequence_length", 16]
    dec_in, dec_out = signature(out / "decoder_model.onnx")
    assert dec_in["encoder_hidden_states"] == ["batch_size", "encoder_sequence_length", WIDTH]
    assert dec_in["encoder_attention_mask"] == ["batch_size", "encoder_sequence_length"]
    assert dec_in["past_key_values.1.encoder.value"] == ["batch_size", HEADS, "encoder_sequence_length", 16]
    assert list(dec_out) == ["logits"] + [f"present.{i}.decoder.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    assert_checked(report, ["encoder_model", "decoder_model"], decodings=2)


# ------------------------------------------------------------------------------------ user errors
def _refused(capsys, out, argv, *fragments) -> None:
    assert main(["export-hf", *argv, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("onnxport: error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    assert not out.exists() or out.is_file()


def test_user_errors_leave_nothing_written(dirs, tmp_path, capsys):
    out = tmp_path / "out"
    _refused(capsys, out, [str(tmp_path / "missing")], "is not a directory")
    _refused(capsys, out, [dirs["vit"], "--task", "text-generation-with-past"],
             "no model class for the model type 'vit'", "its tasks are feature-extraction, image-classification")
    weightless = tmp_path / "weightless"
    weightless.mkdir()
    (weightless / "config.json").write_text((Path(dirs["bert"]) / "config.json").read_text())
    _refused(capsys, out, [str(weightless)], "has no weights")
    afile = tmp_path / "afile"
    afile.write_text("")
    _refused(capsys, afile, [dirs["bert"]], "is a file")
    assert afile.read_text() == ""


def test_task_of_a_directory_from_its_architecture(dirs):
    from onnxport.pretrained.load import infer_task, read_config, tasks_of

    bert = read_config(dirs["bert"])
    assert infer_task(bert) == "text-classification"
    assert tasks_of(bert)[:2] == ["feature-extraction", "text-classification"]
    assert infer_task(read_config(dirs["whisper"])) == "automatic-speech-recognition"
