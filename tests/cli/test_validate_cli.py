"""``onnxport validate MODEL.onnx TARGET [--find-divergence]`` as a user runs it."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch

import onnxport
from onnxport.translate.registry import override

TARGET = textwrap.dedent('''
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.exp(torch.sigmoid(self.lin(x) * 2))

    def build():
        torch.manual_seed(0)
        return Net().eval()

    def example_inputs():
        return (torch.randn(3, 4),), {"x": {0: "batch"}}
''')


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "onnxport", *args], capture_output=True, text=True, timeout=300)


def _write(tmp_path, broken: bool):
    path = tmp_path / "net.py"
    path.write_text(TARGET)
    sys.path.insert(0, str(tmp_path))
    try:
        import importlib

        net = importlib.import_module("net")
        importlib.reload(net)
        args, ds = net.example_inputs()
        if broken:
            with override({torch.ops.aten.sigmoid.default: lambda ctx, x: ctx.op.Tanh(x)}):
                r = onnxport.to_onnx(net.build(), args, dynamic_shapes=ds)
        else:
            r = onnxport.to_onnx(net.build(), args, dynamic_shapes=ds)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("net", None)
    return str(path), r.save(tmp_path / "net.onnx")


def test_validate_matching_file(tmp_path):
    target, onnx_path = _write(tmp_path, broken=False)
    out = _cli("validate", onnx_path, f"{target}:build", "--report", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all outputs match" in out.stdout and "batch=" in out.stdout
    assert json.loads((tmp_path / "r.json").read_text())["ok"] is True


def test_validate_broken_file_finds_divergence(tmp_path):
    target, onnx_path = _write(tmp_path, broken=True)
    out = _cli("validate", onnx_path, f"{target}:build", "--find-divergence")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "MISMATCH" in out.stdout
    assert "first divergence at FX node" in out.stdout and "aten.sigmoid.default" in out.stdout
    assert "torch.sigmoid" in out.stdout  # the user's source line


def test_validate_bad_target_is_a_user_error(tmp_path):
    target, onnx_path = _write(tmp_path, broken=False)
    out = _cli("validate", onnx_path, f"{target}:nope")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "nope" in out.stderr


def test_validate_with_the_checkpoint_the_file_was_exported_with(tmp_path):
    target, _ = _write(tmp_path, broken=False)
    sys.path.insert(0, str(tmp_path))
    try:
        import net

        model = net.build()
        with torch.no_grad():
            model.lin.weight.mul_(3)  # trained weights differ from the factory's
        torch.save(model.state_dict(), tmp_path / "ckpt.pt")
        args, ds = net.example_inputs()
        onnx_path = onnxport.to_onnx(model, args, dynamic_shapes=ds).save(tmp_path / "trained.onnx")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("net", None)
    assert _cli("validate", onnx_path, f"{target}:build").returncode == 1  # fresh weights differ
    out = _cli("validate", onnx_path, f"{target}:build", "--checkpoint", str(tmp_path / "ckpt.pt"))
    assert out.returncode == 0, out.stdout + out.stderr


def _decoder_file(tmp_path, reversed_head: bool = False):
    """The example decoder (examples/decoder_with_cache.py) exported to a file, its vocabulary
    projection reversed on request (a decoder that computes something else)."""
    import importlib.util
    from pathlib import Path

    import onnx

    path = Path(__file__).resolve().parents[2] / "examples" / "decoder_with_cache.py"
    spec = importlib.util.spec_from_file_location("decoder_with_cache_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    call = example.example_inputs()
    r = onnxport.to_onnx(example.build(), kwargs=call["kwargs"], dynamic_shapes=call["dynamic_shapes"],
                         relations=call["relations"])
    proto = r.model_proto
    if reversed_head:
        head = next(t for t in proto.graph.initializer if t.name.startswith("lm_head"))
        values = onnx.numpy_helper.to_array(head)
        values = values[::-1].copy() if values.shape[0] == example.VOCAB else values[:, ::-1].copy()
        head.CopyFrom(onnx.numpy_helper.from_array(values, head.name))
    onnx.save(proto, str(tmp_path / "decoder.onnx"))
    return str(path), str(tmp_path / "decoder.onnx")


def test_validate_generate_decodes_as_the_models_generate(tmp_path, capsys):
    pytest.importorskip("transformers")
    from onnxport.cli import main

    target, onnx_path = _decoder_file(tmp_path)
    code = main(["validate", onnx_path, f"{target}:build", "--generate", "8", "--prompt", "5 17 42 9",
                 "--prompt", "8 64", "--report", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "generation matches" in out and "all outputs match" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["generation"]["ok"] is True and len(report["generation"]["got"]) == 2

    _, broken = _decoder_file(tmp_path, reversed_head=True)
    code = main(["validate", broken, f"{target}:build", "--generate", "4"])
    out = capsys.readouterr().out
    assert code == 1 and "first differing step: 0" in out and "MISMATCH" in out
