"""``onnxport show`` / ``onnxport plot`` on ONNX files and on Python targets exported on the fly."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import onnx
import pytest

import onnxport
from onnxport.cli import main
from show.show_models import ALL

TARGET = textwrap.dedent('''
    import torch

    class Net(torch.nn.Module):
        def __init__(self, width=4):
            super().__init__()
            self.lin = torch.nn.Linear(width, 3)

        def forward(self, x):
            return torch.relu(self.lin(x))

    def build(width=4):
        return Net(width)
    ''')
EXAMPLE = textwrap.dedent('''
    def example_inputs():
        return (torch.randn(2, 4),), {"x": {0: "batch"}}
    ''')


@pytest.fixture()
def scan_path(tmp_path):
    path = tmp_path / "scan.onnx"
    onnx.save(ALL["scan"](), path)
    return str(path)


def _target(tmp_path, with_example: bool, name: str = "net.py") -> str:
    path = tmp_path / name
    path.write_text(TARGET + (EXAMPLE if with_example else ""))
    return str(path)


def test_show_file(scan_path, capsys):
    assert main(["show", scan_path]) == 0
    assert capsys.readouterr().out == onnxport.pretty_onnx(scan_path)
    assert main(["show", scan_path, "--no-shapes", "--max-values", "1"]) == 0
    out = capsys.readouterr().out
    assert out == onnxport.pretty_onnx(scan_path, shapes=False, max_values=1)
    assert "init    init: float32[4] [0, ...]" in out and "-> scaled\n" in out


def test_plot_file_png_svg_and_dot(scan_path, tmp_path, capsys):
    png, svg, dot = tmp_path / "m.png", tmp_path / "m.svg", tmp_path / "m.dot"
    assert main(["plot", scan_path, "-o", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG") and f"wrote {png}" in capsys.readouterr().out
    assert main(["plot", scan_path, "-o", str(svg), "--dot", str(dot)]) == 0
    assert ET.parse(svg).getroot().tag.endswith("svg")
    assert dot.read_text() == onnxport.plot_dot(scan_path)
    capsys.readouterr()
    assert main(["plot", scan_path]) == 0  # no -o: the DOT text on stdout
    assert capsys.readouterr().out == onnxport.plot_dot(scan_path)
    out = tmp_path / "m.pic"
    assert main(["plot", scan_path, "-o", str(out), "--format", "svg"]) == 0
    assert ET.parse(out).getroot().tag.endswith("svg")


def test_plot_without_graphviz(scan_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["plot", scan_path, "-o", str(tmp_path / "m.png")]) == 2
    err = capsys.readouterr().err
    assert "`dot` is not installed" in err and "apt-get install graphviz" in err


def test_show_file_target_with_example_inputs(tmp_path, capsys):
    target = _target(tmp_path, with_example=True)
    assert main(["show", f"{target}:build"]) == 0
    out = capsys.readouterr().out
    assert "input   x: float32[batch, 4]" in out
    assert "init    lin.weight: float32[3, 4]" in out
    assert "Relu(" in out and "output  output: float32[batch, 3]" in out


def test_model_arg_and_module_target(tmp_path, monkeypatch, capsys):
    _target(tmp_path, with_example=False, name="show_target_mod.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["show", "show_target_mod:build", "--input", "x: float32[batch, 6]", "--model-arg", "width=6"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "input   x: float32[batch, 6]" in out and "lin.weight: float32[3, 6]" in out


def test_target_with_config(tmp_path, capsys):
    target = _target(tmp_path, with_example=False)
    config = tmp_path / "net.toml"
    config.write_text('[inputs.x]\ndtype = "float32"\ndims = ["rows", 5]\n\n'
                      '[dims]\nrows = { min = 1, max = 8, example = 2 }\n')
    assert main(["show", f"{target}:build", "--config", str(config), "--model-arg", "width=5"]) == 0
    out = capsys.readouterr().out
    assert "input   x: float32[rows, 5]" in out and "output  output: float32[rows, 3]" in out


def test_plot_target(tmp_path, capsys):
    target = _target(tmp_path, with_example=True)
    svg = tmp_path / "net.svg"
    assert main(["plot", f"{target}:build", "-o", str(svg)]) == 0
    text = svg.read_text()
    assert ET.fromstring(text).tag.endswith("svg") and ">Relu<" in text


def test_target_without_inputs_asks_for_them(tmp_path, capsys):
    target = _target(tmp_path, with_example=False)
    assert main(["show", f"{target}:build"]) == 2
    err = capsys.readouterr().err
    assert "defines no example_inputs()" in err and "--input" in err and target in err


@pytest.mark.parametrize("argv, message", [
    (["show", "/nonexistent/m.onnx"], "no such file"),
    (["show", "not_a_target"], "neither an ONNX file nor a Python target"),
    (["show", "/nonexistent/x.py:build"], "does not exist"),
])
def test_user_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_onnx_file_refuses_target_options(scan_path, capsys):
    assert main(["show", scan_path, "--input", "x: float32[n, 4]"]) == 2
    assert "apply to Python targets only" in capsys.readouterr().err


def test_entry_point(scan_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "onnxport", "show", scan_path, "--no-shapes"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == onnxport.pretty_onnx(scan_path, shapes=False)


def test_module_target_from_the_current_directory(tmp_path):
    import subprocess
    import sys

    (tmp_path / "netmod.py").write_text(
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
        "def example_inputs():\n    return (torch.randn(2, 3),), {'x': {0: 'batch'}}\n")
    out = subprocess.run([sys.executable, "-m", "onnxport", "show", "netmod:Net"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "x: float32[batch, 3]" in out.stdout


def test_plot_refuses_an_unknown_picture_suffix(tmp_path, capsys):
    from onnxport.cli import main

    path = tmp_path / "m.onnx"
    import onnxport
    import torch

    onnxport.to_onnx(torch.nn.Linear(3, 2), (torch.randn(2, 3),)).save(path)
    assert main(["plot", str(path), "-o", str(tmp_path / "m.xyz")]) == 2
    assert "suffix" in capsys.readouterr().err
    assert not (tmp_path / "m.xyz").exists()


@pytest.mark.parametrize("option", ["-o", "--dot"])
def test_plot_into_a_missing_directory_exits_2_before_rendering(scan_path, tmp_path, capsys, option):
    missing = tmp_path / "missing" / ("m.dot" if option == "--dot" else "m.svg")
    argv = ["plot", scan_path, option, str(missing)] + (["-o", str(tmp_path / "m.svg")] if option == "--dot" else [])
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"onnxport: error: {option}: the directory {missing.parent} does not exist (create it first)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.onnx"]  # the picture was not drawn either


@pytest.mark.parametrize("content, message", [(b"", "is empty (0 bytes)"),
                                              (b"\x08\x07", "holds no IR version or no graph"),
                                              (b"not protobuf at all \xff\xfe", "not a readable ONNX model")])
def test_show_refuses_files_that_are_not_models(tmp_path, capsys, content, message):
    path = tmp_path / "m.onnx"
    path.write_bytes(content)
    assert main(["show", str(path)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
