"""Saving with faults injected: a failed rename between the two files, a process killed mid-save,
stale files of earlier saves, missing directories, and the 2 GiB edge of inline serialization."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

import onnxport
from onnxport.saving import PROTOBUF_LIMIT, referenced_data, remove_stale_temporaries, serialized_size

HERE = Path(__file__).parent


def affine_model(weight: np.ndarray) -> ir.Model:
    """``y = x + w``: an ONNX model whose output shows which weights it read."""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [weight.shape[0]])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [weight.shape[0]])],
        [onnx.numpy_helper.from_array(weight, "w")])
    return ir.serde.deserialize_model(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 20)]))


def result_of(weight: np.ndarray) -> onnxport.ExportResult:
    return onnxport.ExportResult(affine_model(weight))


def run(path: Path, n: int) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": np.zeros(n, np.float32)})[0]


def leftovers(directory: Path, model: Path) -> list[str]:
    """Files beside ``model`` that neither it nor its data are: temporaries, unreferenced data."""
    used = {model.name, *referenced_data(str(model))} if model.exists() else set()
    return sorted(p.name for p in directory.iterdir() if p.name not in used)


W_A = np.full(1000, 1.0, np.float32)
W_B = np.full(1000, 2.0, np.float32)


def test_external_data_pair_replaces_the_old_pair(tmp_path):
    path = tmp_path / "m.onnx"
    result_of(W_A).save(path, external_data=True)
    first = referenced_data(str(path))
    assert len(first) == 1 and first[0].startswith("m.onnx.") and first[0].endswith(".data")
    result_of(W_B).save(path, external_data=True)
    second = referenced_data(str(path))
    assert second != first
    np.testing.assert_array_equal(run(path, 1000), W_B)
    assert leftovers(tmp_path, path) == []  # the old data file went with the old model


def test_saving_over_itself_keeps_one_data_file(tmp_path):
    path = tmp_path / "m.onnx"
    result_of(W_A).save(path, external_data=True)
    loaded = onnxport.ExportResult(ir.load(str(path)))
    loaded.save(tmp_path / "copy.onnx", external_data=True)
    result_of(W_A).save(path, external_data=True)
    np.testing.assert_array_equal(run(path, 1000), W_A)
    np.testing.assert_array_equal(run(tmp_path / "copy.onnx", 1000), W_A)
    assert leftovers(tmp_path, path) == sorted(["copy.onnx", *referenced_data(str(tmp_path / "copy.onnx"))])


def test_failed_switch_leaves_the_old_pair_whole(tmp_path, monkeypatch):
    """The data file moved into place, then the rename of the .onnx fails: the old .onnx still reads
    its own weights and the new data file is gone again."""
    path = tmp_path / "m.onnx"
    result_of(W_A).save(path, external_data=True)
    before = sorted(p.name for p in tmp_path.iterdir())
    real_replace = os.replace
    moved = []

    def replace(src, dst, *args, **kwargs):
        if os.fspath(dst) == str(path):
            raise OSError(28, "No space left on device")
        moved.append(os.fspath(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(onnxport.SaveError, match="could not save") as info:
        result_of(W_B).save(path, external_data=True)
    monkeypatch.undo()
    assert any(m.startswith(str(tmp_path / "m.onnx.")) for m in moved), "the data file was not moved before the switch"
    assert "unchanged" in info.value.hint
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    np.testing.assert_array_equal(run(path, 1000), W_A)


def test_inline_save_over_an_external_one_removes_the_stale_data(tmp_path):
    path = tmp_path / "m.onnx"
    result_of(W_A).save(path, external_data=True)
    (tmp_path / "m.onnx.data").write_bytes(b"written by an older release")
    (tmp_path / "other.onnx.data").write_bytes(b"not ours")
    result_of(W_B).save(path, external_data=False)
    assert referenced_data(str(path)) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "other.onnx.data"]
    np.testing.assert_array_equal(run(path, 1000), W_B)


def test_missing_directory_is_an_error_and_nothing_is_created(tmp_path):
    with pytest.raises(onnxport.SaveError, match="does not exist"):
        result_of(W_A).save(tmp_path / "missing" / "m.onnx")
    assert list(tmp_path.iterdir()) == []


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (tmp_path / f".onnxport-{dead}-abc").mkdir()
    (tmp_path / f".onnxport-{dead}-abc" / "m.onnx").write_bytes(b"partial")
    (tmp_path / f".onnxport-{os.getpid()}-live").mkdir()  # a save of this process, still running
    assert remove_stale_temporaries(str(tmp_path)) == [f".onnxport-{dead}-abc"]
    assert [p.name for p in tmp_path.iterdir()] == [f".onnxport-{os.getpid()}-live"]


KILLED_SAVE = r"""
import os, sys, time
import numpy as np
import onnx_ir as ir
sys.path.insert(0, {tests!r})
from test_saving import result_of
path, mode, ready = {path!r}, {mode!r}, {ready!r}
big = np.random.default_rng(0).standard_normal(8 << 20).astype(np.float32)  # 32 MiB of weights
result = result_of(np.full(1000, 2.0, np.float32))
graph = result.model.graph
def block():
    open(ready, "w").close()
    time.sleep(600)
if mode == "writing":  # killed while the data file is being written
    graph.initializers.add(ir.Value(name="big", const_value=ir.tensor(big, name="big")))
    graph.initializers.add(ir.Value(name="slow", const_value=ir.LazyTensor(
        lambda: (block(), ir.tensor(big, name="slow"))[1], dtype=ir.DataType.FLOAT, shape=ir.Shape([8 << 20]))))
else:  # killed after the data file is in place, before the .onnx is switched
    graph.initializers.add(ir.Value(name="big", const_value=ir.tensor(big, name="big")))
    real = os.replace
    def replace(src, dst, *a, **k):
        if os.fspath(dst) == path:
            block()
        return real(src, dst, *a, **k)
    os.replace = replace
result.save(path, external_data=True)
"""


@pytest.mark.parametrize("mode", ["writing", "switching"])
def test_save_killed_midway_leaves_the_old_model_and_the_next_save_cleans_up(tmp_path, mode):
    path, ready = tmp_path / "m.onnx", tmp_path.parent / f"ready-{mode}"
    result_of(W_A).save(path, external_data=True)
    code = KILLED_SAVE.format(tests=str(HERE), path=str(path), mode=mode, ready=str(ready))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert child.poll() is None, "the saving process ended before the fault point"
            assert time.monotonic() < deadline, "the saving process never reached the fault point"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    left = leftovers(tmp_path, path)
    assert any(n.startswith(".onnxport-") for n in left), left
    if mode == "switching":
        assert any(n.startswith("m.onnx.") and n.endswith(".data") for n in left), left
    np.testing.assert_array_equal(run(path, 1000), W_A)  # the old pair, whole
    result_of(W_B).save(path, external_data=True)
    assert leftovers(tmp_path, path) == []
    np.testing.assert_array_equal(run(path, 1000), W_B)


# ------------------------------------------------------------------------------ the 2 GiB edge
def lazy_bytes(n: int) -> ir.LazyTensor:
    """``n`` zero bytes, made only when written (calloc'd pages: no memory until touched)."""
    return ir.LazyTensor(lambda: ir.tensor(np.zeros(n, np.uint8), name="big"), dtype=ir.DataType.UINT8,
                         shape=ir.Shape([n]))


def edge_model(n: int) -> ir.Model:
    """``y = Gather(big, idx)``: a model whose weights are ``n`` bytes."""
    idx = ir.Value(name="idx", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([3]))
    big = ir.Value(name="big", const_value=lazy_bytes(n), type=ir.TensorType(ir.DataType.UINT8), shape=ir.Shape([n]))
    node = ir.node("Gather", [big, idx], num_outputs=1)
    node.outputs[0].name = "y"
    graph = ir.Graph([idx], node.outputs, nodes=[node], initializers=[big], opset_imports={"": 20})
    return ir.Model(graph, ir_version=10)


def test_size_estimate_counts_more_than_the_weights():
    n = 2**31 - 64
    model = edge_model(n)
    assert serialized_size(model) > PROTOBUF_LIMIT >= n
    assert onnxport.ExportResult(model).needs_external_data()
    small = affine_model(W_A)
    exact = len(ir.serde.serialize_model(small).SerializeToString())
    assert exact <= serialized_size(small) <= exact + 1024 + 200



def test_external_data_with_only_small_tensors_writes_no_data_file(tmp_path):
    path = tmp_path / "m.onnx"
    result_of(np.ones(4, np.float32)).save(path, external_data=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    np.testing.assert_array_equal(run(path, 4), np.ones(4, np.float32))


def test_an_interrupted_save_leaves_the_old_pair(tmp_path, monkeypatch):
    path = tmp_path / "m.onnx"
    result_of(W_A).save(path, external_data=True)
    before = sorted(p.name for p in tmp_path.iterdir())
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if os.fspath(dst) == str(path):
            raise KeyboardInterrupt
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        result_of(W_B).save(path, external_data=True)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    np.testing.assert_array_equal(run(path, 1000), W_A)


class BigTable(__import__("torch").nn.Module):
    """A lookup table of ``2**31 - 64`` bytes: under protobuf's limit as weights, over it as a model."""

    def __init__(self, n: int):
        import torch

        super().__init__()
        self.register_buffer("table", torch.empty(n, dtype=torch.uint8))  # untouched pages: no memory until read

    def forward(self, idx):
        return self.table[idx].to(__import__("torch").int64) + idx


def test_model_at_the_2gib_edge_saves_and_validates(tmp_path):
    import torch

    n = 2**31 - 64
    result = onnxport.to_onnx(BigTable(n).eval(), (torch.tensor([0, 5, n - 1]),), dynamic_shapes={"idx": {0: "k"}})
    assert result.weights_bytes() == n and result.needs_external_data()
    path = result.save(tmp_path / "big.onnx")  # external data chosen: inline would pass 2 GiB
    (data,) = referenced_data(path)
    assert os.path.getsize(tmp_path / data) == n and os.path.getsize(path) < 1 << 20
    report = result.validate(sizes=[{"k": 2}], values=[])
    assert report.ok, report


# ------------------------------------------------------------------------------ file modes
@pytest.fixture
def umask():
    """``os.umask``, to set the process's umask in the test; the umask before it restored after it."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def _mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


@pytest.mark.parametrize("external_data", [False, True])
@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_saved_files_have_the_mode_open_gives_under_the_umask(tmp_path, umask, mask, external_data):
    umask(mask)
    path = tmp_path / "m.onnx"
    result_of(W_A).save(path, external_data=external_data)
    files = sorted(tmp_path.iterdir())
    assert len(files) == (2 if external_data else 1) and leftovers(tmp_path, path) == []
    for file in files:
        assert _mode(file) == 0o666 & ~mask, (file.name, oct(_mode(file)))
    umask(0o022)
    result_of(W_B).save(path, external_data=external_data)  # a file replaced takes the mode of the new one
    assert all(_mode(file) == 0o644 for file in tmp_path.iterdir())


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_write_file_gives_the_mode_open_gives_and_replaces_whole(tmp_path, umask, mask):
    from onnxport.saving import write_file

    umask(mask)
    target = tmp_path / "genai_config.json"
    with open(tmp_path / "plain.json", "wb") as f:
        f.write(b"{}")
    assert write_file(target, lambda f: f.write(b'{"a": 1}')) == str(target)
    assert target.read_bytes() == b'{"a": 1}'
    assert _mode(target) == _mode(tmp_path / "plain.json") == 0o666 & ~mask

    def fail(f):
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(onnxport.errors.SaveError, match="cannot write .*genai_config.json.*disk full"):
        write_file(target, fail)
    assert target.read_bytes() == b'{"a": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["genai_config.json", "plain.json"]
