"""Speech models from the toolkits' own classes, exported by onnxport and by torch.onnx side by side.

The models are ``tests/speech_zoo.py``'s: torchaudio, SpeechBrain, ESPnet, asteroid and EnCodec classes at
small configs with seeded random weights, batch and time dynamic, lengths as inputs where the model takes
them. For each model and exporter, in a fresh process with a timeout (one hang does not stop the run):

* ``onnxport``: ``onnxport.to_onnx(model, args, dynamic_shapes=spec)``;
* ``torch.onnx``: ``torch.onnx.export(model, args, dynamic_shapes=spec, dynamo=True)``.

The ONNX model runs in onnxruntime (one thread) at the example and at two other (batch, time) with unequal
lengths, and, for the ESPnet encoders, at 20,010 frames (past the 20,006 their positional table covers),
each output compared with eager PyTorch (``|onnx - eager| <= 1e-4 * max(1, max|eager|) + 1e-3 * |eager|``,
integers exactly). Verdicts: ``right`` (every set); ``wrong`` (the numbers differ at the example);
``broken`` (right at the example, not at another set: a dim declared dynamic came out fixed, or the
numbers are right only at the example's length, or onnxruntime fails there); ``refused`` (the export
raised: its first line and the user's line); ``timeout``; ``crashed``. Also the export's seconds, its node
count (local functions inlined, subgraphs counted) and onnxruntime's latency at the example (one thread,
warmed up, the median of the runs).

Results go to ``out/speech.json`` as they come (``--fresh`` starts it anew); ``benchmarks/SPEECH.md`` is
written from it at the end, with the machine, the date and the versions of the run.

    python benchmarks/speech.py [--fresh] [--only torchaudio_conformer,espnet_conformer] [--timeout 600]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXPORTERS = ("onnxport", "torch.onnx")
DEFAULT_CACHE = ROOT / "out" / "speech.json"
DEFAULT_MARKDOWN = HERE / "SPEECH.md"
ATOL, RTOL = 1e-4, 1e-3
LONG_FRAMES = 20_010
RESULT = "RESULT "
VERDICTS = ("right", "wrong", "broken", "refused", "timeout", "crashed")


# ============================================================================ worker side
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
    return (lines[0] if lines else "")[:240]


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


def _flat(value: Any) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat(v)]
    return []  # None and plain values are not outputs of the ONNX model


def compare(got: list, expected: list) -> tuple[bool, float, str]:
    """``(ok, worst error relative to the output's scale, what differs)``."""
    import numpy as np

    if len(got) != len(expected):
        return False, float("nan"), f"{len(got)} outputs, eager {len(expected)}"
    worst = 0.0
    for i, (g, e) in enumerate(zip(got, expected)):
        e = e.detach().numpy()
        g = np.asarray(g)
        if g.shape != e.shape:
            return False, float("nan"), f"output {i}: shape {list(g.shape)}, eager {list(e.shape)}"
        if e.dtype.kind in "biu":
            if not np.array_equal(g.astype(e.dtype), e):
                return False, float("nan"), f"output {i}: {int((g.astype(e.dtype) != e).sum())} integers differ"
            continue
        e64, g64 = e.astype(np.float64), g.astype(np.float64)
        finite = np.isfinite(e64)
        if not np.array_equal(finite, np.isfinite(g64)):
            return False, float("nan"), f"output {i}: not finite where eager is (or the reverse)"
        if not finite.any():
            continue
        scale = max(1.0, float(np.abs(e64[finite]).max()))
        diff = np.abs(g64 - e64)[finite]
        worst = max(worst, float(diff.max()) / scale)
        if not np.all(diff <= ATOL * scale + RTOL * np.abs(e64[finite])):
            return False, worst, f"output {i}: max abs error {float(diff.max()):.2e} (scale {scale:.2e})"
    return True, worst, ""


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


def _feed(session, args: tuple) -> dict:
    tensors = _flat(args)
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(tensors):
        raise ValueError(f"the ONNX model takes {len(names)} inputs, the call {len(tensors)}")
    return {n: t.numpy() for n, t in zip(names, tensors)}


def _latency(session, feed: dict, budget: float = 3.0) -> float:
    for _ in range(3):
        session.run(None, feed)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 100):
        t = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - t)
    return round(1000 * statistics.median(times), 3)


def _declared_fixed(session, case) -> list[str]:
    """Dims declared dynamic that the ONNX model's inputs fix to a number."""
    import inspect

    names = list(inspect.signature(case.model.forward).parameters)
    inputs = session.get_inputs()
    fixed = []
    for arg, axes in case.dynamic_shapes.items():
        position = names.index(arg) if arg in names else None
        if position is None or position >= len(inputs):
            continue
        shape = inputs[position].shape
        for axis, dim in axes.items():
            if axis < len(shape) and isinstance(shape[axis], int):
                fixed.append(f"{inputs[position].name}[{axis}] ({getattr(dim, '__name__', dim)}) = {shape[axis]}")
    return fixed


def export_onnxport(case):
    import onnxport

    result = onnxport.to_onnx(case.model, case.args, dynamic_shapes=case.dynamic_shapes)
    strategy = getattr(result, "strategy", None) or getattr(getattr(result, "captured", None), "strategy", None)
    return result.model_proto, {"how": strategy} if strategy else {}


def export_torch_onnx(case):
    import torch

    program = torch.onnx.export(case.model, case.args, dynamic_shapes=case.dynamic_shapes, dynamo=True,
                                verbose=False)
    return program.model_proto, {}


EXPORT = {"onnxport": export_onnxport, "torch.onnx": export_torch_onnx}


def worker(exporter: str, name: str) -> dict:
    import torch

    speech_zoo = _setup()
    case = speech_zoo.build(name)
    sets = [("example", case.args)] + [(f"batch {a[0].shape[0]}, time {_time_of(case, a)}", a) for a in case.others]
    if name in LONG and case.make is not None:
        sets.append((f"batch 1, time {LONG_FRAMES}", case.make(1, LONG_FRAMES)))
    out: dict[str, Any] = {"name": name, "exporter": exporter}
    start = time.perf_counter()
    try:
        proto, info = EXPORT[exporter](case)
    except Exception as e:  # noqa: BLE001 - a refusal is the finding
        root = e if exporter == "onnxport" else _root_cause(e)
        out.update(verdict="refused", seconds=round(time.perf_counter() - start, 1),
                   error=f"{type(root).__name__}: {_first_line(root)}",
                   where=_short(getattr(e, "where", None) or _user_frame(e)))
        return out
    out.update(seconds=round(time.perf_counter() - start, 1), nodes=_count_nodes(proto), **info)
    try:
        session = _session(proto)
    except Exception as e:  # noqa: BLE001
        out.update(verdict="broken", error=f"onnxruntime cannot load it: {_first_line(e)}")
        return out
    fixed = _declared_fixed(session, case)
    worst = 0.0
    for i, (label, args) in enumerate(sets):
        with torch.no_grad():
            expected = _flat(case.model(*args))
        try:
            feed = _feed(session, args)
            got = session.run(None, feed)
        except Exception as e:  # noqa: BLE001
            verdict = "broken"
            out.update(verdict=verdict, error=f"at {label}: onnxruntime: {_first_line(e)}", fixed=fixed)
            return out
        ok, err, what = compare(got, expected)
        worst = max(worst, err) if err == err else worst
        if i == 0:
            out["latency_ms"] = _latency(session, feed)
        if not ok:
            verdict = "wrong" if i == 0 else "broken"
            if i > 0 and not fixed:
                what += "; right only at the example's length" if i < len(case.others) + 1 else ""
            out.update(verdict=verdict, error=f"at {label}: {what}", fixed=fixed, error_scaled=err)
            return out
    out.update(verdict="right", error_scaled=worst, sets=len(sets))
    return out


def _time_of(case, args: tuple) -> int:
    axes = next(iter(case.dynamic_shapes.values()))
    time_axis = max(axes)
    return int(args[0].shape[time_axis])


LONG = {"espnet_conformer", "espnet_e_branchformer", "espnet_transformer"}


# ============================================================================ parent side
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

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    cpu = "?"
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    names = ("torch", "onnxruntime", "onnxscript", "onnx", "torchaudio", "speechbrain", "espnet", "asteroid",
             "encodec")
    return {"versions": {n: version(n) for n in names}, "onnxport_commit": commit.strip(),
            "python": platform.python_version(), "machine": f"{cpu}, {os.cpu_count()} cores"}


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore", PYTHONPATH=str(ROOT))


def run_one(name: str, exporter: str, timeout: int) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", exporter, name]
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
    return result


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _cell(r: dict) -> str:
    verdict = r.get("verdict", "-")
    return f"**{verdict}**" if verdict in ("right",) else verdict


def write_report(data: dict, names: list[str], whats: dict[str, str]) -> str:
    meta, results = data["meta"], data["results"]
    counts = {e: {v: 0 for v in VERDICTS} for e in EXPORTERS}
    for n in names:
        for e in EXPORTERS:
            v = results.get(n, {}).get(e, {}).get("verdict")
            if v in counts[e]:
                counts[e][v] += 1
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    lines = [
        "# Speech models: onnxport and torch.onnx side by side",
        "",
        f"From one run of `{meta.get('command', 'python benchmarks/speech.py')}` ({meta.get('started')} to "
        f"{meta.get('finished')}; onnxport at {meta.get('onnxport_commit')}), on {meta.get('machine')}, "
        f"Python {meta.get('python')}; {versions}.",
        "",
        f"{len(names)} models built from the toolkits' own classes (`tests/speech_zoo.py`: small configs, seeded "
        "random weights), batch and time dynamic, lengths as inputs where the model takes them. Each export ran "
        "in its own process (timeout per export); its ONNX model ran in onnxruntime (one thread) against eager "
        "PyTorch at the example and at two other (batch, time) with unequal lengths, and the ESPnet encoders "
        f"also at {LONG_FRAMES:,} frames. A value is right when "
        f"`|onnx - eager| <= {ATOL:g} * max(1, max|eager|) + {RTOL:g} * |eager|` (integers: equal).",
        "",
        "**right**: right at every input set; **wrong**: wrong numbers at the example; **broken**: loads and is "
        "right at the example but not at another set (a dim declared dynamic came out fixed, or right only at the "
        "example's length, or onnxruntime fails there); **refused**: the export raised (its first line and the "
        "toolkit's line below).",
        "",
        "| | " + " | ".join(VERDICTS) + " |",
        "|---|" + "---|" * len(VERDICTS),
    ]
    for e in EXPORTERS:
        lines.append(f"| {e} | " + " | ".join(str(counts[e][v]) for v in VERDICTS) + " |")
    lines += [
        "",
        "## Per model",
        "",
        "Export seconds, node count and onnxruntime latency (ms, at the example, one thread, median after "
        "warm-up) as onnxport / torch.onnx.",
        "",
        "| model | onnxport | torch.onnx | export s | nodes | latency ms |",
        "|---|---|---|---|---|---|",
    ]
    for n in names:
        op, to = results.get(n, {}).get("onnxport", {}), results.get(n, {}).get("torch.onnx", {})
        lines.append(f"| `{n}` | {_cell(op)} | {_cell(to)} | {_fmt(op.get('seconds'))} / {_fmt(to.get('seconds'))} "
                     f"| {_fmt(op.get('nodes'))} / {_fmt(to.get('nodes'))} "
                     f"| {_fmt(op.get('latency_ms'), 2)} / {_fmt(to.get('latency_ms'), 2)} |")
    lines += ["", "## What each model is, and what went wrong", ""]
    for n in names:
        lines.append(f"- `{n}`: {whats.get(n, '')}")
        for e in EXPORTERS:
            r = results.get(n, {}).get(e, {})
            if r.get("verdict") not in (None, "right"):
                text = f"  - {e}, {r['verdict']}: {r.get('error', '')}"
                if r.get("fixed"):
                    text += f" (fixed in the ONNX inputs: {', '.join(r['fixed'])})"
                if r.get("where"):
                    text += f"; at `{r['where']}`"
                lines.append(text.replace("|", "\\|"))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        result = worker(argv[1], argv[2])
        sys.stdout.write(RESULT + json.dumps(result, default=str) + "\n")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated model names (default: every model of the zoo)")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--timeout", type=int, default=600, help="seconds per export process (default 600)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--markdown", type=Path, default=DEFAULT_MARKDOWN)
    parser.add_argument("--fresh", action="store_true", help="start from an empty cache")
    parser.add_argument("--report-only", action="store_true", help="write the report from the cache")
    args = parser.parse_args(argv)

    speech_zoo = _setup()
    names = list(speech_zoo.ZOO) if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    whats = {}
    for n in speech_zoo.ZOO:
        try:
            whats[n] = speech_zoo.build(n).what
        except Exception as e:  # noqa: BLE001
            whats[n] = f"(does not build: {_first_line(e)})"
    data = {"meta": {}, "results": {}}
    if args.cache.exists() and not args.fresh:
        data = json.loads(args.cache.read_text())
    if not args.report_only:
        data["meta"].update(_versions())
        data["meta"]["command"] = "python benchmarks/speech.py " + " ".join(argv)
        data["meta"]["started"] = _now()
        for n in names:
            for e in [x.strip() for x in args.exporters.split(",") if x.strip()]:
                if data["results"].get(n, {}).get(e):
                    continue
                r = run_one(n, e, args.timeout)
                data["results"].setdefault(n, {})[e] = r
                print(f"{time.strftime('%H:%M:%S')} {n} {e}: {r.get('verdict')} {r['wall']}s "
                      f"{(r.get('error') or '')[:150]}", flush=True)
                args.cache.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=args.cache.parent, prefix=".speech-")
                with os.fdopen(fd, "w") as f:
                    json.dump(data, f, indent=1, default=str)
                os.replace(tmp, args.cache)
        data["meta"]["finished"] = _now()
        args.cache.write_text(json.dumps(data, indent=1, default=str))
    text = write_report(data, list(speech_zoo.ZOO) if not args.only else names, whats)
    args.markdown.write_text(text)
    print(text.split("\n## ")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
