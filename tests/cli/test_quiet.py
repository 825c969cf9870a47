"""A quiet terminal: what other libraries print during a command (warnings, log lines, C++ messages on
file descriptor 2) is held back unless ``--verbose``; onnxport's own lines and warnings are shown,
and ``export-hf --quiet`` prints nothing on success."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.test_export_hf_files import llama  # noqa: F401 - fixture: a saved tiny Llama

pytestmark = pytest.mark.usefixtures("offline")  # the hub offline, no connection (conftest.py)

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = re.compile(r"Failed to load|deprecated|FutureWarning|UserWarning|^W\d{4} ", re.MULTILINE)

SNIPPET = textwrap.dedent("""
    import logging, os, sys, warnings
    from onnxport.cli.quiet import hold_foreign_output, terminal

    warnings.simplefilter("always")
    early = logging.getLogger("torch._export.example")  # a handler made before, as torch makes its own
    early.addHandler(logging.StreamHandler(sys.stderr))
    early.propagate = False

    def warn_from(module, path, text, category):
        code = compile(f"import warnings\\nwarnings.warn({text!r}, {category})", path, "exec")
        exec(code, {"__name__": module})

    with hold_foreign_output(show=sys.argv[1] == "show") as held:
        early.warning("W1204 12:00:00.000000 1 torch/_export/x.py:1] a note from torch")
        logging.getLogger("torchao.example").warning("Failed to load libexample.so")  # logging's last resort
        warn_from("fakelib.models", "/somewhere/site-packages/fakelib/models.py", "x is deprecated", "FutureWarning")
        os.write(2, b"[W native] a C++ message\\n")
        warn_from("onnxport.example", "/somewhere/onnxport/example.py", "adopted time % 2 == 0", "UserWarning")
        warn_from("my_model", "/home/me/my_model.py", "my own note", "UserWarning")
        print("onnxport: capture 1.00s", file=terminal())
    print("HELD", len(held.lines), file=sys.stderr)
""")


def run_snippet(mode: str) -> str:
    """The snippet's stderr, holding (``hold``) or showing (``show``) what other libraries print."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SNIPPET, mode], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_foreign_output_is_held_and_the_commands_own_lines_shown():
    err = run_snippet("hold")
    assert not FOREIGN.search(err.replace("UserWarning: my own note", "")), err
    assert "a C++ message" not in err
    assert "onnxport: warning: adopted time % 2 == 0" in err  # the library's own warning, short
    assert "my_model.py" in err and "my own note" in err  # the user's code's warning, as Python prints it
    assert "onnxport: capture 1.00s" in err
    assert "HELD 4" in err  # torch's log line, torchao's, the FutureWarning, the C++ message


def test_verbose_shows_everything():
    err = run_snippet("show")
    for text in ("W1204 ", "Failed to load libexample.so", "FutureWarning: x is deprecated", "a C++ message",
                 "adopted time % 2 == 0", "onnxport: capture 1.00s", "HELD 0"):
        assert text in err, err


@pytest.mark.slow
def test_export_hf_quiet_prints_nothing_on_success(llama, tmp_path):  # noqa: F811 - the fixture
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "onnxport", "export-hf", str(llama), "-o", str(tmp_path / "out"),
                           "--quiet", "--generate", "0"], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not FOREIGN.search(proc.stdout + proc.stderr), proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    assert (tmp_path / "out" / "model.onnx").exists()


@pytest.mark.parametrize("count, said", [(1, "1 line other libraries printed was"),
                                         (2, "2 lines other libraries printed were")])
def test_an_export_error_says_that_output_was_held(monkeypatch, capfd, count, said):
    import argparse

    import onnxport.cli as cli
    from onnxport.errors import ExportError

    def run(args):
        for _ in range(count):
            os.write(2, b"W1204 12:00:00.000000 1 torch/_export/x.py:1] why it failed\n")
        raise ExportError("the export failed")

    def parser():
        p = argparse.ArgumentParser()
        p.add_argument("--verbose", action="store_true")
        p.add_argument("--debug", action="store_true")
        p.set_defaults(_run=run)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main([]) == 2
    err = capfd.readouterr().err
    assert "onnxport: error: the export failed" in err and "why it failed" not in err
    assert f"({said} held back; --verbose shows them)" in err, err
    assert cli.main(["--verbose"]) == 2
    err = capfd.readouterr().err
    assert "why it failed" in err and "held back" not in err, err


CRASH = textwrap.dedent("""
    import os, sys
    from onnxport.cli.quiet import hold_foreign_output
    from onnxport.errors import ExportError

    error = {"crash": RuntimeError("a crash"), "export": ExportError("an export error")}[sys.argv[1]]
    with hold_foreign_output():
        os.write(2, b"[W native] what the library said first\\n")
        print("a warning line a library wrote", file=sys.stderr)
        raise error
""")


@pytest.mark.parametrize("kind", ["crash", "export"])
def test_a_crash_shows_the_held_output_before_its_traceback(kind):
    """A crash (not an ``ExportError``) prints what was held first: it may say why; an ``ExportError``
    leaves it held (the command says that output was held)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CRASH, kind], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)
    err = proc.stderr
    assert proc.returncode == 1 and "Traceback" in err, err
    if kind == "export":
        assert "what the library said first" not in err and "a warning line" not in err, err
        return
    assert err.index("what the library said first") < err.index("a warning line") < err.index("Traceback"), err
    assert "RuntimeError: a crash" in err.split("Traceback", 1)[1]
