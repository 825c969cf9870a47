"""``onnxport export`` with a config's ``[stream]`` section: the streaming check (``onnxport.verify.stream``)
run after the validation on a model exported from a config, its table printed and written to the report;
a model right at every call the validation makes but wrong from an empty cache exits 1 with the failing
steps; a section that does not fit the declarations exits 2 naming the file and key, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from onnxport.cli import main
from onnxport.config import load_config

MODELS = '''
import torch


class Cache(torch.nn.Module):
    """Attention-like left context kept as ``cat([cache, chunk])[:, -keep:]``."""

    def __init__(self, keep=16):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.keep = keep

    def forward(self, chunk, cache):
        x = torch.cat([cache, chunk], 1)
        y = self.lin(x).tanh().cumsum(1)[:, -chunk.shape[1]:]
        return y, x[:, -self.keep:]


class StartFrame(Cache):
    """A learned start frame stands for the missing context when the cache is empty: a Python branch the
    export traces at the example's cache (16 frames) and drops."""

    def __init__(self):
        super().__init__()
        self.start = torch.nn.Parameter(torch.randn(1, 1, 8))

    def forward(self, chunk, cache):
        if cache.shape[1] == 0:
            cache = self.start.expand(chunk.shape[0], 1, 8)
        return super().forward(chunk, cache)


def build_cache(keep=16):
    torch.manual_seed(0)
    return Cache(keep).eval()


def build_start_frame():
    torch.manual_seed(0)
    return StartFrame().eval()
'''

CONFIG = """
[inputs.chunk]
dtype = "float32"
dims = ["batch", "time", 8]
[inputs.cache]
dtype = "float32"
dims = ["batch", {past}, 8]
[outputs.y]
dtype = "float32"
dims = ["batch", "time", 8]
[outputs.next_cache]
dtype = "float32"
dims = ["batch", "kept", 8]
[dims]
batch = {{ min = 1, max = 8, example = 2 }}
time = {{ min = 1, max = 32, example = 4 }}
"""
PAST = CONFIG.format(past='"past"') + "past = { example = 16 }\n"
STREAM = '\n[stream]\nstates = { next_cache = "cache" }\n'


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("stream_models") / "streaming.py"
    path.write_text(MODELS)
    return str(path)


def export(tmp_path: Path, target: str, config: str, *options: str) -> tuple[int, Path, Path]:
    cfg, out, report = tmp_path / "stream.toml", tmp_path / "s.onnx", tmp_path / "r.json"
    cfg.write_text(config)
    code = main(["export", target, "-c", str(cfg), "-o", str(out), "--report", str(report), *options])
    return code, out, report


def test_stream_from_an_empty_cache_after_the_validation(tmp_path, models, capsys):
    config = PAST + STREAM + "steps = 5\nstart = { cache = 0 }\nbatches = [1, 3]\n"
    code, out, report = export(tmp_path, f"{models}:build_cache", config)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    onnx.checker.check_model(onnx.load(out), full_check=True)
    table = captured.out[captured.out.index("stream  output"):]  # after the validation's table
    assert "ONNX-eager" in captured.out[:captured.out.index("stream  output")]
    assert "states fed back: next_cache -> cache" in table and "stream matches" in table
    assert "onnxport: stream " in captured.err  # the step in the progress lines
    data = json.loads(report.read_text())
    assert data["ok"] is True and data["stream"]["ok"] is True
    stream = data["stream"]
    assert stream["steps"] == 5 and stream["states"] == [["next_cache", "cache"]]
    assert {s[1] for s in stream["streams"]} == {"batch=1, time=4", "batch=1, time=2", "batch=3, time=4",
                                                  "batch=3, time=2"}
    shapes = [c["shape"] for c in stream["checks"]
              if c["output"] == "next_cache" and c["inputs"].startswith("stream 1 ")]
    assert shapes == [[1, 4, 8], [1, 8, 8], [1, 12, 8], [1, 16, 8], [1, 16, 8]]  # from empty, filled, then cut
    assert all(c["ok"] for c in stream["checks"]) and len(stream["checks"]) == 4 * 5 * 2


def test_a_model_wrong_from_an_empty_cache_fails_the_stream_alone(tmp_path, models, capsys):
    code, out, report = export(tmp_path, f"{models}:build_start_frame", PAST + STREAM + "start = { cache = 0 }\n")
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert out.exists() and "streaming mismatch" in captured.err and "validation mismatch" not in captured.err
    assert "first: y at stream 1 step 0" in captured.err
    assert "STREAM MISMATCH" in captured.out and "failing steps:" in captured.out
    failing = [line.split() for line in captured.out.splitlines() if line.startswith("stream 1 step 0 ") and
               "FAIL" in line]  # the failing rows in the validation table's form
    assert {row[4] for row in failing} == {"y", "next_cache"}
    data = json.loads(report.read_text())
    assert data["ok"] is True  # every call the validation makes is right: the cache there is never empty
    assert data["stream"]["ok"] is False
    assert not any(c["ok"] for c in data["stream"]["checks"] if c["inputs"].endswith(" step 0"))
    # the same model streamed from the example's cache (zeros, 16 frames) never takes the dropped branch
    code, _, report = export(tmp_path, f"{models}:build_start_frame", PAST + STREAM)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(report.read_text())["stream"]["ok"] is True


def test_no_validate_skips_the_stream(tmp_path, models, capsys):
    code, out, report = export(tmp_path, f"{models}:build_start_frame", PAST + STREAM + "start = { cache = 0 }\n",
                               "--no-validate")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert out.exists() and "stream" not in json.loads(report.read_text())
    assert "stream  output" not in captured.out


def test_a_state_that_cannot_feed_its_input_at_a_step_exits_2_and_writes_nothing(tmp_path, models, capsys):
    config = CONFIG.format(past="16") + STREAM  # the cache input holds 16 frames, the model keeps 12
    code, out, report = export(tmp_path, f"{models}:build_cache", config, "--model-arg", "keep=12")
    err = capsys.readouterr().err
    assert code == 2, err
    assert "state output 'next_cache' is [2, 12, 8] at step 0" in err and "fix:" in err
    assert not out.exists() and not report.exists()


@pytest.mark.parametrize("section, fragments", [
    ('[stream]\nsteps = 3\n', ["[stream] has no states", 'next_cache = "cache"']),
    (STREAM + "stepz = 3\n", ["[stream] unknown key(s) ['stepz']", "keys are states, steps"]),
    ('[stream]\nstates = { nxt = "cache" }\n', ["'nxt' is not a declared output", "['y', 'next_cache']"]),
    ('[stream]\nstates = { next_cache = "cach" }\n', ["next_cache = 'cach' names no declared input",
                                                       "['chunk', 'cache']"]),
    ('[stream]\nstates = { next_cache = 3 }\n', ["states must be a non-empty table of output names"]),
    ('[stream]\nstates = { y = "cache", next_cache = "cache" }\n', ["feed the input(s) ['cache'] from more"]),
    ('[stream]\nstates = { y = "chunk", next_cache = "cache" }\n', ["every input a state"]),
    (STREAM + 'steps = "six"\n', ["[stream] steps must be an int, 1 or more, not 'six'"]),
    (STREAM + "steps = 0\n", ["[stream] steps must be an int, 1 or more, not 0"]),
    (STREAM + "start = { chunk = 0 }\n", ["[stream] start.chunk: 'chunk' is not a state input", "['cache']"]),
    (STREAM + "start = { cache = -1 }\n", ["start.cache: the size of 'past' must be an int, 0 or more"]),
    (STREAM + "start = { cache = { batch = 1 } }\n", ["'batch' is a dim of the fresh inputs too"]),
    (STREAM + "start = { cache = { past = 5000 } }\n", ["past = 5000 is outside 1..4096"]),
    (STREAM + "batches = [0]\n", ["[stream] batches must be an int, 1 or more, not 0"]),
    (STREAM + 'batch_dim = "batch"\nbatches = [9]\n', ["[stream] batches: [9] are outside 1..8, the range of batch"]),
    (STREAM + 'chunk_dim = "past"\n', ["chunk_dim = 'past' is not a dynamic dim of the fresh inputs ['chunk']"]),
])
def test_a_stream_section_that_does_not_fit_the_declarations_exits_2(tmp_path, models, capsys, section, fragments):
    code, out, report = export(tmp_path, f"{models}:build_cache", PAST + section)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("onnxport: error: config ")
    assert str(tmp_path / "stream.toml") in err and "[stream]" in err
    for fragment in fragments:
        assert fragment in err, err
    assert not out.exists() and not report.exists()


def test_state_pairs_of_another_dtype_or_rank_are_refused(tmp_path):
    base = PAST + '[outputs.count]\ndtype = "int64"\ndims = ["batch"]\n'
    with pytest.raises(Exception, match=r"\[stream\] states: output count: int64\[batch\] cannot feed input "
                                        r"cache: float32\[batch, past, 8\]"):
        load_config(_written(tmp_path, base + '[stream]\nstates = { count = "cache" }\n'))
    stream = load_config(_written(tmp_path, PAST + STREAM + "start = { cache = { past = 0 } }\n")).stream
    assert stream.states == {"next_cache": "cache"} and stream.start == {"past": 0} and stream.steps is None


def _written(tmp_path: Path, text: str) -> str:
    path = tmp_path / "parse.toml"
    path.write_text(text)
    return str(path)


def test_validate_runs_the_configs_stream_on_the_file(tmp_path, models, capsys):
    """``onnxport validate MODEL.onnx TARGET -c CONFIG`` runs the config's ``[stream]`` check on the file: a model
    wrong from an empty cache fails it (exit 1) though every single call the validation makes is right."""
    config = PAST + STREAM + "start = { cache = 0 }\n"
    code, out, _ = export(tmp_path, f"{models}:build_cache", config)
    assert code == 0, capsys.readouterr().err
    cfg, report = tmp_path / "stream.toml", tmp_path / "v.json"
    code = main(["validate", str(out), f"{models}:build_cache", "-c", str(cfg), "--report", str(report)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "states fed back: next_cache -> cache" in captured.out and "stream matches" in captured.out
    assert json.loads(report.read_text())["stream"]["ok"] is True
    # the file of a model right at every call but wrong from an empty cache, checked against that model
    code, wrong, _ = export(tmp_path, f"{models}:build_start_frame", config, "--no-validate")
    code = main(["validate", str(wrong), f"{models}:build_start_frame", "-c", str(cfg), "--report", str(report)])
    captured = capsys.readouterr()
    assert code == 1 and "STREAM MISMATCH" in captured.out
    data = json.loads(report.read_text())
    assert data["stream"]["ok"] is False and data["ok"] is True
