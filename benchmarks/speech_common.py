"""What the speech benchmark's sections share: the worker's set-up, errors read back, ONNX models counted and
run, the checkout's commit and versions, and one export run in a fresh process with a timeout
(``python benchmarks/speech.py --worker|--stream-worker EXPORTER NAME``)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCRIPT = HERE / "speech.py"  # the benchmark's entry point; its --worker / --stream-worker run one export
EXPORTERS = ("onnxport", "torch.onnx")
RESULT = "RESULT "


def _setup():
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))  # the onnxport of this checkout, the commit the report names
    import torch

    torch.set_num_threads(1)
    import speech_zoo

    return speech_zoo


def _first_line(e: BaseException) -> str:
    text = getattr(e, "summary", None) or str(e).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else "").removesuffix(" (detail below)")[:240]


def _root_cause(e: BaseException) -> BaseException:
    """The innermost cause of a wrapped error (torch.onnx wraps torch.export's)."""
    seen = set()
    while (e.__cause__ or e.__context__) is not None and id(e) not in seen:
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return e


def _user_frame(e: BaseException) -> str | None:
    """The innermost frame of the error's tracebacks inside a toolkit's code (or the zoo's)."""
    frames = []
    while e is not None:
        frames = traceback.extract_tb(e.__traceback__) + frames
        e = e.__cause__ or e.__context__
    for f in reversed(frames):
        if "speech-packages/" in f.filename or f.filename.endswith("speech_zoo.py"):
            return f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()[:120]}"
    return None


def _short(where: str | None) -> str | None:
    """A source line's file relative to the speech packages' folder or the checkout."""
    if not where:
        return where
    where = where.split("speech-packages/")[-1]
    return where.replace(str(ROOT) + "/", "")


def _count_nodes(proto) -> int:
    """Operator nodes of the model, its local functions inlined, subgraphs' nodes counted."""
    import onnx.inliner

    def count(graph) -> int:
        n = 0
        for node in graph.node:
            n += 1
            for attr in node.attribute:
                if attr.g is not None and attr.g.node:
                    n += count(attr.g)
                for g in attr.graphs:
                    n += count(g)
        return n

    return count(onnx.inliner.inline_local_functions(proto).graph)


def _session(proto):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _versions() -> dict:
    import importlib.metadata as md

    sys.path.insert(0, str(ROOT / "tests"))
    from third_party import SPEECH_PACKAGES

    def version(name: str) -> str:
        for where in (None, [str(SPEECH_PACKAGES)]):
            try:
                dists = md.distributions(name=name, path=where) if where else [md.distribution(name)]
                for d in dists:
                    return d.version
            except md.PackageNotFoundError:
                continue
        return "-"

    cpu = "?"
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    names = ("torch", "onnxruntime", "onnxscript", "onnx", "torchaudio", "speechbrain", "espnet", "asteroid",
             "encodec")
    return {"versions": {n: version(n) for n in names}, "onnxport_commit": _tree()["commit"],
            "python": platform.python_version(), "machine": f"{cpu}, {os.cpu_count()} cores"}


def _tree() -> dict:
    """The checkout's commit, and whether ``onnxport/`` differs from it (the exports run the tree as it is)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "--porcelain", "onnxport"))}


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore", PYTHONPATH=str(ROOT))


def run_one(name: str, exporter: str, timeout: int, flag: str = "--worker") -> dict:
    """Run ``speech.py <flag> exporter name`` in a fresh process with a timeout; its result, or why none."""
    cmd = [sys.executable, str(SCRIPT), flag, exporter, name]
    tree = _tree()
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=timeout)
        found = [json.loads(ln[len(RESULT):]) for ln in proc.stdout.splitlines() if ln.startswith(RESULT)]
        if found:
            result = found[-1]
        else:
            tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
            result = {"verdict": "crashed", "error": f"exit {proc.returncode}: {tail[-1][:240] if tail else ''}"}
    except subprocess.TimeoutExpired:
        result = {"verdict": "timeout", "error": f"over {timeout} s"}
    result["wall"] = round(time.perf_counter() - start, 1)
    result["tree"] = tree
    result["load"] = round(os.getloadavg()[0], 1)  # the machine's 1-minute load average when it ended
    return result


def _commits(meta: dict, runs: list[dict]) -> str:
    """Which onnxport the exports ran: one commit, or the commits the tree moved through during the run."""
    trees = [r["tree"] for r in runs if r.get("tree")]
    if not trees:
        return f"onnxport at {meta.get('onnxport_commit')}"
    commits = list(dict.fromkeys(t["commit"] for t in trees))
    dirty = sum(t["dirty"] for t in trees)
    text = f"onnxport at {commits[0]}" if len(commits) == 1 else f"onnxport from {commits[0]} to {commits[-1]}"
    if dirty:
        text += f", with changes not committed in `onnxport/` at {dirty} of {len(trees)} exports"
    loads = [r["load"] for r in runs if r.get("load") is not None]
    if loads:
        text += f"; the machine's 1-minute load average {min(loads):g} to {max(loads):g}"
    return text


def _fmt(value, digits: int = 1) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)
