"""``onnxport export``: end to end as a subprocess (speech encoder, contract, checkpoint and config
errors) and in process (``--input`` declarations, exit codes, help)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from onnxport.cli import main
from onnxport.config import load_config, make_inputs
from onnxport.verify import OrtRunner

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
TOY = str(HERE / "toy_models.py")
SPEECH = ROOT / "examples" / "speech_encoder.py"
SPEECH_TOML = ROOT / "examples" / "speech_encoder.toml"

FRAMER_TOML = """
[model]
vocab = 5
[inputs.features]
dtype = "float32"
dims = ["batch", "time", 16]
[inputs.lengths]
dtype = "int64"
dims = ["batch"]
lengths_of = "features.time"
[outputs.logits]
dtype = "float32"
dims = ["batch", "out_time", {vocab}]
[outputs.out_lengths]
dtype = "int64"
dims = ["batch"]
[dims]
time = {{ min = 2, max = 64 }}
"""


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "onnxport", "export", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def dims_of(value) -> list:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def assert_user_error(proc: subprocess.CompletedProcess, out: Path, *fragments: str) -> str:
    """Exit code 2, no traceback, nothing written; the error: a first line ``onnxport: error: ...``
    of at most 200 characters after the prefix, then ``at`` / ``fix`` lines."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("onnxport: error: "))
    assert len(lines[first]) <= len("onnxport: error: ") + 200, lines[first]
    assert all(line.startswith("  ") for line in lines[first + 1:]), proc.stderr
    error = "\n".join(lines[first:])
    for f in fragments:
        assert f in error, error
    assert not out.exists()
    return error


# ------------------------------------------------------------------------------------ subprocess
def test_speech_encoder_end_to_end(tmp_path):
    out, report = tmp_path / "enc.onnx", tmp_path / "report.json"
    proc = run_cli(f"{SPEECH}:build_encoder", "--config", str(SPEECH_TOML), "-o", str(out), "--report", str(report))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    proto = onnx.load(out)
    onnx.checker.check_model(proto, full_check=True)
    g = proto.graph
    assert [(v.name, dims_of(v)) for v in g.input] == [("features", ["batch", "time", 80]), ("lengths", ["batch"])]
    assert [(v.name, dims_of(v)) for v in g.output] == [("logits", ["batch", "out_time", 32]),
                                                         ("out_lengths", ["batch"])]
    data = json.loads(report.read_text())
    assert data["ok"] is True and data["model"] == str(out)
    sizes = {c["sizes"] for c in data["checks"]}
    assert {"batch=1, time=5", "batch=3, time=57", "batch=5, time=130", "batch=2, time=23"} <= sizes
    for line in ("sizes 3   batch=5, time=130 (sizes from [validate])", "exact zeros", "out_lengths"):
        assert line in proc.stdout
    # independently of the command's own validation: a size it did not try, padded sequences
    sys.path.insert(0, str(SPEECH.parent))
    try:
        from speech_encoder import build_encoder
    finally:
        sys.path.remove(str(SPEECH.parent))
    cfg = load_config(SPEECH_TOML)
    model = build_encoder(**cfg.model_args)
    x = make_inputs(cfg, {"batch": 4, "time": 41}, seed=11)
    logits, out_lengths = OrtRunner(proto).run([x["features"], x["lengths"]])
    with torch.no_grad():
        expected = model(**x)
    np.testing.assert_allclose(logits, expected["logits"].numpy(), atol=1e-4, rtol=1e-3)
    np.testing.assert_array_equal(out_lengths, expected["out_lengths"].numpy())
    assert logits.shape[1] == ((41 - 1) // 2) // 2 + 1


def test_outputs_not_matching_the_config(tmp_path):
    cfg, out = tmp_path / "framer.toml", tmp_path / "m.onnx"
    cfg.write_text(FRAMER_TOML.format(vocab=5))
    proc = run_cli(f"{TOY}:build_renamed", "-c", str(cfg), "-o", str(out))
    assert_user_error(proc, out, "missing ['logits']", "extra (not declared) ['scores']")


def test_checkpoint_with_wrong_keys(tmp_path):
    cfg, out, ckpt = tmp_path / "framer.toml", tmp_path / "m.onnx", tmp_path / "ckpt.pt"
    cfg.write_text(FRAMER_TOML.format(vocab=5))
    torch.save({"model": {"proj.weight": torch.zeros(5, 8), "lin.bias": torch.zeros(5)}, "epoch": 2}, ckpt)
    proc = run_cli(f"{TOY}:build_framer", "-c", str(cfg), "--checkpoint", str(ckpt), "-o", str(out))
    assert_user_error(proc, out, "missing from the checkpoint: lin.weight", "unexpected in the checkpoint: proj.weight")


def test_bad_toml(tmp_path):
    cfg, out = tmp_path / "bad.toml", tmp_path / "m.onnx"
    cfg.write_text(FRAMER_TOML.format(vocab=5).replace('dtype = "float32"', "dtype = float32", 1))
    proc = run_cli(f"{TOY}:build_framer", "-c", str(cfg), "-o", str(out))
    assert_user_error(proc, out, f"config file {cfg} is not valid TOML")


def test_declared_output_dim_wrong(tmp_path):
    cfg, out = tmp_path / "framer.toml", tmp_path / "m.onnx"
    cfg.write_text(FRAMER_TOML.format(vocab=7))
    proc = run_cli(f"{TOY}:build_framer", "-c", str(cfg), "-o", str(out))
    assert_user_error(proc, out, "output 'logits'", "axis 2 is declared 7", "the model gives 5")


# ------------------------------------------------------------------------------------ in process
def test_input_declarations(tmp_path, capsys):
    out, report = tmp_path / "net.onnx", tmp_path / "r.json"
    code = main(["export", f"{TOY}:build_net", "--input", "x: float32[batch, 16]", "--declare-output",
                 "scores: float32[batch, 4]", "--dim", "batch=1:50", "--model-arg", "hidden=6", "-o", str(out),
                 "--report", str(report)])
    assert code == 0, capsys.readouterr()
    g = onnx.load(out).graph
    assert [(v.name, dims_of(v)) for v in g.input] == [("x", ["batch", 16])]
    assert [(v.name, dims_of(v)) for v in g.output] == [("scores", ["batch", 4])]
    data = json.loads(report.read_text())
    assert data["ok"] and len({c["inputs"] for c in data["checks"]}) >= 4  # the example and three sizes or more
    assert "batch=1" in {c["sizes"] for c in data["checks"]}


def test_a_declared_output_names_a_data_dependent_dim(tmp_path, capsys):
    out = tmp_path / "kept.onnx"
    code = main(["export", f"{TOY}:build_kept", "--input", "boxes: float32[n, 4]", "--input", "scores: float32[n]",
                 "--declare-output", "kept: float32[num_detections, 4]",
                 "--declare-output", "kept_scores: float32[num_detections]", "-o", str(out), "--quiet"])
    assert code == 0, capsys.readouterr()
    g = onnx.load(out).graph
    assert [(v.name, dims_of(v)) for v in g.output] == [("kept", ["num_detections", 4]),
                                                        ("kept_scores", ["num_detections"])]
    runner = OrtRunner(str(out))
    for n in (3, 40):
        boxes, scores = torch.randn(n, 4), torch.rand(n)
        kept, kept_scores = runner.run([boxes, scores])
        expected = boxes[scores > 0.5] * 2
        assert kept.shape == tuple(expected.shape) and np.allclose(kept, expected.numpy())
        assert np.array_equal(kept_scores, scores[scores > 0.5].numpy())


def test_two_names_for_one_data_dependent_size_are_refused(tmp_path, capsys):
    out = tmp_path / "kept.onnx"
    code = main(["export", f"{TOY}:build_kept", "--input", "boxes: float32[n, 4]", "--input", "scores: float32[n]",
                 "--declare-output", "kept: float32[num_detections, 4]",
                 "--declare-output", "kept_scores: float32[num_scores]", "-o", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code != 0 and not out.exists()
    assert "'kept_scores' axis 0 is declared 'num_scores'" in err and "declare both axes 'num_detections'" in err


def test_validation_mismatch_exits_1_and_keeps_the_file(tmp_path, capsys):
    out, report = tmp_path / "d.onnx", tmp_path / "r.json"
    code = main(["export", f"{TOY}:build_drifting", "--input", "x: float32[batch, 16]", "-o", str(out),
                 "--report", str(report)])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert out.exists() and "validation mismatch" in captured.err
    assert "FAIL" in captured.out
    data = json.loads(report.read_text())
    assert data["ok"] is False and any(not c["ok"] for c in data["checks"])


def test_user_errors_write_nothing(tmp_path, capsys):
    out = tmp_path / "x.onnx"
    assert main(["export", f"{TOY}:build_net", "--input", "x: float32[batch, 15]", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "forward raised" in err and "x: (" in err and not out.exists()
    assert main(["export", f"{TOY}:missing", "--input", "x: float32[batch, 16]", "-o", str(out)]) == 2
    assert "has no attribute 'missing'" in capsys.readouterr().err
    assert main(["export", f"{TOY}:build_net", "-o", str(out)]) == 2
    assert "no inputs declared" in capsys.readouterr().err
    assert main(["export", f"{TOY}:build_net", "--input", "x: float32[batch, 16]", "--model-arg", "depth=2",
                 "-o", str(out)]) == 2
    assert "--model-arg" in capsys.readouterr().err and not out.exists()
    # --debug adds the traceback; the exit code stays that of a user error
    assert main(["--debug", "export", f"{TOY}:build_net", "--input", "x: float32[batch, 15]", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "forward raised" in err


def test_help_is_complete(capsys):
    with pytest.raises(SystemExit) as info:
        main(["export", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--config", "--checkpoint", "--input", "--declare-output", "--dim", "--model-arg", "--opset",
                   "--report", "--atol", "--no-validate", "exit codes", "TARGET"):
        assert option in text, option
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "export" in capsys.readouterr().out


def test_progress_steps_reach_the_callback_in_order(tmp_path, capsys):
    from onnxport.cli.common import Progress
    from onnxport.config import export_target

    calls = []
    cfg = tmp_path / "framer.toml"
    cfg.write_text(FRAMER_TOML.format(vocab=5))
    export_target(f"{TOY}:build_framer", config=str(cfg), on_step=lambda *a: calls.append(a))
    assert [c[0] for c in calls] == ["build", "capture", "decompose", "translate", "optimize", "finalize", "validate"]
    assert all(isinstance(s, float) and s >= 0 for _, s in calls)
    progress = Progress()  # stdout is captured, not a terminal: plain lines on stderr
    progress("capture", 1.5)
    progress.close()
    assert capsys.readouterr().err == "onnxport: capture 1.50s\n"
    quiet = Progress(quiet=True)
    quiet("capture", 1.5)
    assert capsys.readouterr().err == ""


def test_verbose_export_prints_one_line_per_step(capsys):
    import onnxport

    onnxport.to_onnx(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),), verbose=True)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["[onnxport] capture", "[onnxport] decompose",
                                                      "[onnxport] translate", "[onnxport] optimize",
                                                      "[onnxport] finalize"]


def test_options_over_the_config(tmp_path, capsys):
    cfg, out, report = tmp_path / "framer.toml", tmp_path / "f.onnx", tmp_path / "r.json"
    cfg.write_text(FRAMER_TOML.format(vocab=3) + '\n[export]\nopset = 19\n')
    code = main(["export", f"{TOY}:build_framer", "-c", str(cfg), "--model-arg", "vocab=3", "--opset", "18",
                 "--no-validate", "--quiet", "-o", str(out), "--report", str(report)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out == "" and captured.err == ""
    proto = onnx.load(out)
    assert {o.domain: o.version for o in proto.opset_import}[""] == 18
    assert [dims_of(v) for v in proto.graph.output] == [["batch", "out_time", 3], ["batch"]]
    assert json.loads(report.read_text())["ok"] is None


PAIRS_TOML = """
[inputs.x]
dtype = "float32"
dims = ["batch", "time", 16]
[outputs.output]
dtype = "float32"
dims = ["batch", "half", 16]
[dims]
time = {time}
"""


def test_a_dim_without_a_range_adopts_what_the_model_needs(tmp_path, capsys):
    cfg, out, report = tmp_path / "pairs.toml", tmp_path / "p.onnx", tmp_path / "r.json"
    cfg.write_text(PAIRS_TOML.format(time="{ example = 10 }"))
    with pytest.warns(UserWarning, match=r"time % 2 == 0 only .*toy_models.py.* excludes time = 1, 3, 5"):
        code = main(["export", f"{TOY}:build_pairs", "-c", str(cfg), "-o", str(out), "--report", str(report)])
    assert code == 0, capsys.readouterr().err
    sizes = [c["sizes"] for c in json.loads(report.read_text())["checks"]]
    times = [int(s.split("time=")[1].split(",")[0]) for s in sizes if "time=" in s]
    assert len(set(times)) >= 3 and all(t % 2 == 0 for t in times)
    assert {p.key: p.value for p in onnx.load(out).metadata_props}["onnxport.constraints"] == "time % 2 == 0"


def test_a_declared_range_the_model_cannot_take_exits_2_with_the_line_and_sizes(tmp_path, capsys):
    cfg, out = tmp_path / "pairs.toml", tmp_path / "p.onnx"
    cfg.write_text(PAIRS_TOML.format(time="{ min = 2, max = 64, example = 10 }"))
    assert main(["export", f"{TOY}:build_pairs", "-c", str(cfg), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "time % 2 == 0" in err and "time = 3, 5" in err and "toy_models.py" in err and not out.exists()


@pytest.mark.parametrize("option", ["--report", "-o"])
def test_an_output_path_in_a_missing_directory_exits_2_before_the_export(tmp_path, capsys, option):
    out, report = tmp_path / "net.onnx", tmp_path / "r.json"
    paths = {"-o": str(out), "--report": str(report), option: str(tmp_path / "missing" / "file")}
    code = main(["export", f"{TOY}:build_net", "--input", "x: float32[batch, 16]", "-o", paths["-o"],
                 "--report", paths["--report"]])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert lines == [f"onnxport: error: {option}: the directory {tmp_path / 'missing'} does not exist "
                     "(create it first)"]
    assert "capture" not in captured.err  # refused before the export started
    assert list(tmp_path.iterdir()) == []


class Refused:
    """A class weights-only loading refuses to unpickle."""


def test_checkpoint_errors_have_a_short_first_line_naming_the_cause(tmp_path):
    cfg, out = tmp_path / "framer.toml", tmp_path / "m.onnx"
    cfg.write_text(FRAMER_TOML.format(vocab=5))
    pickled, truncated = tmp_path / "pickled.pt", tmp_path / "truncated.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "extra": Refused()}, pickled)
    torch.save({"lin.weight": torch.zeros(5, 16), "lin.bias": torch.zeros(5)}, truncated)
    truncated.write_bytes(truncated.read_bytes()[:200])
    for ckpt, words in ((pickled, ["pickled", "test_export_cli.Refused", "refuses"]),
                        (truncated, ["damaged or truncated"])):
        proc = run_cli(f"{TOY}:build_framer", "-c", str(cfg), "--checkpoint", str(ckpt), "-o", str(out))
        error = assert_user_error(proc, out, *words)
        assert "--debug" in error  # torch's full message is one option away


SHARDED_TARGET = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(16, 32)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))


def build():
    return Net()


def example_inputs():
    return (torch.randn(2, 16),), {"x": {0: "batch"}}
"""


def test_a_checkpoint_sharded_over_two_safetensors_files(tmp_path):
    """``onnxport export target.py:build --checkpoint model.safetensors.index.json``: the weights split
    over two shards, read through the index, and the ONNX model equal to eager PyTorch with them."""
    from safetensors.torch import save_file

    from onnxport.config.target import build_model

    (tmp_path / "target.py").write_text(SHARDED_TARGET)
    trained = build_model(f"{tmp_path / 'target.py'}:build")
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in trained.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    state = trained.state_dict()
    shards = {"model-00001-of-00002.safetensors": [k for k in state if k.startswith("encoder.")],
              "model-00002-of-00002.safetensors": [k for k in state if k.startswith("head.")]}
    weight_map = {}
    for file, names in shards.items():
        save_file({k: state[k].contiguous() for k in names}, str(tmp_path / file))
        weight_map.update(dict.fromkeys(names, file))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": sum(t.numel() * 4 for t in state.values())},
                                 "weight_map": weight_map}))
    out, report = tmp_path / "net.onnx", tmp_path / "r.json"
    proc = run_cli(f"{tmp_path / 'target.py'}:build", "--checkpoint", str(index), "-o", str(out),
                   "--report", str(report))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert json.loads(report.read_text())["ok"] is True
    x = torch.randn(5, 16, generator=gen)
    got = OrtRunner(str(out)).run([x])[0]
    with torch.no_grad():
        expected = trained(x).numpy()
        fresh = build_model(f"{tmp_path / 'target.py'}:build")(x).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)
    assert not np.allclose(got, fresh, atol=1e-2)  # the checkpoint's weights, not the factory's
