"""The runnable examples a new user copies from: each script with a ``__main__`` block runs to the end
(from a temporary working directory, where it writes its models) with the installed torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if "__main__" in p.read_text())


def test_the_examples_are_found():
    assert {p.name for p in SCRIPTS} >= {"decoder_with_cache.py", "scan_cdist.py", "loop_cdist.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_example_runs(script, tmp_path):
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=900)
    assert done.returncode == 0, \
        f"{script.name} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
