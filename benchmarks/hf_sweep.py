"""Every architecture transformers ships, exported by onnxport, torch.onnx and transformers' own exporter.

For each model type of ``CONFIG_MAPPING``: a tiny config derived generically from the config class
and a base model with seeded random weights (``hf_tiny.py``: the first of its attempts that builds
and runs in eager on generic inputs; which dims stay dynamic is what eager runs at another size).
Then, each in a fresh process with a timeout:

* ``onnxport``: ``onnxport.to_onnx(model, kwargs=inputs, dynamic_shapes={input: {axis: name}})``;
* ``torch.onnx``: ``torch.onnx.export(model, (), kwargs=inputs, dynamic_shapes=<the same names>,
  dynamo=True)``;
* ``transformers``: ``transformers.exporters.exporter_onnx.OnnxExporter().export(model, inputs,
  config=OnnxConfig(dynamic=True))`` (every dim ``Dim.AUTO``), run through its own runner.

Each exported model runs in onnxruntime at the example sizes and at other sizes of every dynamic
dim, compared output by output with eager PyTorch (``|onnx - eager| <= 1e-4 * max(1, max|eager|) +
1e-3 * |eager|``). Verdicts: ``ok``; ``refused`` (the export raised; its error); ``wrong`` (an output
differs); ``specialized`` (a dim declared dynamic came out fixed: onnxruntime refuses the other
size); ``invalid`` (onnxruntime cannot run the model at the example); ``timeout``; ``crashed``;
``stochastic`` (exported and run at both sizes, not compared: eager differs from itself on the same
inputs, a model drawing random numbers in its forward; one that takes its random draw as an
argument, ViTMAE's ``noise``, is given a seeded one as an input and compared).

Results go to a JSON cache (``out/hf_sweep.json``) as they come, so a run can stop and resume, and
be split (``--only``) or spread over processes (``--jobs``); ``benchmarks/HF_SWEEP.md`` is written
from the cache at the end of every run (``--report-only`` writes it alone). A cache resumes only at the
commit and package versions that began it, and its hours add up over the runs, so a run longer than one
sitting goes on in a checkout of that commit (``meta.onnxport_commit``) from the kept cache
(``benchmarks/hf_sweep_run.json``: ``--cache`` it there, or copy it to ``out/hf_sweep.json``).

    python benchmarks/hf_sweep.py [--only llama,bert] [--jobs 1] [--fresh] [--timeout 600]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from agreement import compare

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXPORTERS = ("onnxport", "torch.onnx", "transformers")
DEFAULT_CACHE = ROOT / "out" / "hf_sweep.json"
DEFAULT_MARKDOWN = HERE / "HF_SWEEP.md"
PROBE_CHUNK = 20
RESULT = "RESULT "


# ============================================================================ worker side
def _quiet() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _setup() -> None:
    _quiet()
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))  # the onnxport of this checkout, the commit the report names
    from third_party import import_timm, import_torchvision

    import_torchvision()  # before transformers imports it
    import_timm()
    import torch

    torch.set_num_threads(1)
    import transformers

    transformers.logging.set_verbosity_error()


def _emit(payload: dict) -> None:
    sys.stdout.write(RESULT + json.dumps(payload, default=str) + "\n")
    sys.stdout.flush()


class _Alarm(Exception):
    pass


def worker_probe(types: list[str], seconds: int) -> None:
    """Probe each model type (``hf_tiny.probe``) under a time limit; one RESULT line each."""
    import hf_tiny

    def on_alarm(signum, frame):
        raise _Alarm()

    signal.signal(signal.SIGALRM, on_alarm)
    for model_type in types:
        start = time.perf_counter()
        signal.alarm(seconds)
        try:
            record = hf_tiny.probe(model_type)
        except _Alarm:
            record = {"status": "no-build", "errors": [f"probe took over {seconds}s"]}
        except Exception as e:  # noqa: BLE001
            record = {"status": "no-build", "errors": [f"probe: {type(e).__name__}: {_first_line(e)}"]}
        finally:
            signal.alarm(0)
        record.update(type=model_type, seconds=round(time.perf_counter() - start, 1))
        _emit(record)


def _first_line(e: BaseException) -> str:
    summary = getattr(e, "summary", None)
    text = summary or str(e).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:300]


def _ort(proto: Any):
    """A function running the ONNX model on a dict of tensors (a list of tensors as one input each; other
    values, constants of the export, left out), returning its outputs as arrays."""
    import onnxruntime as ort
    import torch

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(inputs: dict) -> list:
        missing = [n for n in names if n not in inputs]
        if missing:
            raise KeyError(f"the ONNX model takes inputs {missing} the model's call has not")
        return session.run(None, {n: inputs[n].numpy() for n in names})

    def feed(inputs: dict) -> list:
        return run({part: v for name, value in inputs.items() for part, v in _parts(name, value)
                    if isinstance(v, torch.Tensor)})

    return feed, session


def _declared_fixed(session: Any, inputs: Any) -> list[str]:
    """Dims declared dynamic that the ONNX model's inputs fix to a number."""
    out = []
    shapes = {i.name: i.shape for i in session.get_inputs()}
    for name, axes in inputs.dynamic_shapes().items():
        for part, part_axes in _parts(name, axes):
            for axis, dim in (part_axes or {}).items():
                shape = shapes.get(part)
                if shape is not None and axis < len(shape) and isinstance(shape[axis], int):
                    out.append(f"{part}[{axis}] ({dim}) = {shape[axis]}")
    return out


def _parts(name: str, value: Any) -> list:
    """``(ONNX input name, value)`` of an input, a list of tensors as one ONNX input each (``name_0``, ...)."""
    if isinstance(value, (list, tuple)):
        return [(f"{name}_{i}", v) for i, v in enumerate(value)]
    return [(name, value)]


def export_onnxport(model, example, inputs):
    import onnxport

    from onnxport.capture.guards import GuardStatus
    from onnxport.remainder_sides import JOINED, SAME

    result = onnxport.to_onnx(model, kwargs=example, dynamic_shapes=inputs.dynamic_shapes())
    run, session = _ort(result.model_proto)
    # what the export states it holds for, the remainder conditions its residue classes' traces settled, and the
    # conditions an installed package's ``if`` branched on that it keeps as torch's kind of condition (``!=``),
    # whose other side no trace looked at
    kept = [g for g in result.guards if g.status is GuardStatus.KEPT and g.branched and g.method not in (SAME, JOINED)]
    return run, session, {"nodes": result.count_nodes(), "constraints": [str(g) for g in result.constraints],
                          "residue_classes": [g.text for g in result.guards if g.method in (SAME, JOINED)],
                          "package_branches": [f"{g.text} ({_short(g.where)})" for g in kept]}


def _short(where: str | None) -> str:
    """A guard's source line, its path from the package's directory on (``transformers/models/...``)."""
    where = where or ""
    return where.split("site-packages/")[-1]


def export_torch_onnx(model, example, inputs):
    import torch

    program = torch.onnx.export(model, (), kwargs=example, dynamic_shapes=inputs.dynamic_shapes(), dynamo=True,
                                verbose=False)
    proto = program.model_proto
    run, session = _ort(proto)
    return run, session, {"nodes": len(proto.graph.node)}


def export_transformers(model, example, inputs):
    import hf_tiny
    from transformers.exporters.exporter_onnx import OnnxConfig, OnnxExporter

    exported = OnnxExporter().export(model, dict(example), config=OnnxConfig(dynamic=True))
    graph = exported.program.graph

    def run(feed: dict) -> list:
        return [t.detach().numpy() for t in hf_tiny.flat(exported(**feed))]

    return run, None, {"nodes": sum(1 for _ in graph)}


EXPORT = {"onnxport": export_onnxport, "torch.onnx": export_torch_onnx, "transformers": export_transformers}


def worker_export(exporter: str, record: dict) -> None:
    """Export one architecture with one exporter and compare with eager at both sizes."""
    import hf_tiny

    out = {"type": record["type"], "exporter": exporter}
    model, inputs = hf_tiny.restore(record)
    example, other = inputs.make(model, 0), inputs.make(model, 1)
    traced = hf_tiny.as_traced if record.get("eager_paths_differ") else contextlib.nullcontext
    with traced():  # the reference is the path every exporter traces
        eager = [hf_tiny.outputs(model, example), hf_tiny.outputs(model, other)]
    expected = [hf_tiny.flat(o) for o in eager]
    with_numbers = [hf_tiny.flat(o, numbers=True) for o in eager]  # an exporter may return the sizes too
    start = time.perf_counter()
    try:
        run, session, info = EXPORT[exporter](model, example, inputs)
    except Exception as e:  # noqa: BLE001 - a refusal is the finding
        out.update(status="refused", error=f"{type(e).__name__}: {_first_line(e)}",
                   seconds=round(time.perf_counter() - start, 1), where=getattr(e, "where", None) or _user_frame(e))
        _emit(out)
        return
    out.update(seconds=round(time.perf_counter() - start, 1), **info)
    fixed = _declared_fixed(session, inputs) if session is not None else []
    worst = 0.0
    for which, (feed, reference, numbers) in enumerate(zip((example, other), expected, with_numbers)):
        try:
            got = run(feed)
        except Exception as e:  # noqa: BLE001
            if which == 0:
                out.update(status="invalid", error=f"onnxruntime: {type(e).__name__}: {_first_line(e)}")
            else:
                out.update(status="specialized", error=f"at another size: {type(e).__name__}: {_first_line(e)}"
                           + (f"; fixed: {', '.join(fixed)}" if fixed else ""))
            _emit(out)
            return
        if record.get("stochastic"):  # eager differs from itself: it runs, it is not judged
            continue
        if len(got) != len(reference) and len(got) == len(numbers):
            reference = numbers
        ok, err, what = compare(got, reference)
        worst = max(worst, err) if err == err else worst
        if not ok:
            out.update(status="wrong", error=f"{'example' if which == 0 else 'other'} size: {what}", error_scaled=err)
            _emit(out)
            return
    if fixed and len(inputs.dims) > 0:
        out.update(status="specialized", error=f"fixed: {', '.join(fixed)}")
    elif record.get("stochastic"):
        out.update(status="stochastic", error="eager PyTorch differs from itself on the same inputs: not compared")
    else:
        out.update(status="ok", error_scaled=worst)
    _emit(out)


def _user_frame(e: BaseException) -> str | None:
    """The innermost frame of the traceback inside transformers' model code."""
    frames = traceback.extract_tb(e.__traceback__)
    for f in reversed(frames):
        if "/transformers/models/" in f.filename:
            return f"{f.filename.split('/transformers/')[-1]}:{f.lineno} in {f.name}: {(f.line or '').strip()[:120]}"
    return None


def worker_main(argv: list[str]) -> int:
    _setup()
    kind = argv[0]
    if kind == "probe":
        worker_probe(argv[2:], int(argv[1]))
    else:
        worker_export(kind, json.loads(Path(argv[1]).read_text()))
    return 0


# ============================================================================ parent side
class Cache:
    """The results by model type, written to ``path`` (through a temporary file) after each change."""

    def __init__(self, path: Path, fresh: bool, reading: bool = False):
        """``reading``: the cache is only reported on (``--report-only``), so it may be of another commit
        or set-up: the report names the cache's own."""
        self.path = path
        self.lock = threading.Lock()
        self.data = {"meta": {}, "results": {}}
        if path.exists() and not fresh:
            self.data = json.loads(path.read_text())
        if reading:
            return
        versions = _versions()
        differ = {k: (self.data["meta"][k], v) for k, v in versions.items()
                  if k in self.data["meta"] and self.data["meta"][k] != v}
        if differ:  # a report names one commit and one set of versions
            said = ", ".join(f"{k} {was} -> {now}" for k, (was, now) in differ.items())
            commit = self.data["meta"].get("onnxport_commit")
            raise SystemExit(f"{path} was written by another set-up ({said}): resume it at its own commit and "
                             f"versions (git checkout {commit}), or start with --fresh")
        self.data["meta"].update(versions)
        self.data["meta"].setdefault("started", _now())
        self.hours_before, self.run_started = 0.0, None

    def start_run(self) -> None:
        """Count this run's time from now on top of the time of the runs it resumes (``meta.hours``, kept
        up to date with each result, so a run stopped and resumed reports its whole time)."""
        self.hours_before = float(self.data["meta"].get("hours", 0))
        self.run_started = time.perf_counter()

    def get(self, model_type: str, key: str) -> dict | None:
        return self.data["results"].get(model_type, {}).get(key)

    def put(self, model_type: str, key: str, value: dict) -> None:
        with self.lock:
            self.data["results"].setdefault(model_type, {})[key] = value
            if self.run_started is not None:
                spent = self.hours_before + (time.perf_counter() - self.run_started) / 3600
                self.data["meta"]["hours"] = round(spent, 2)
            self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".hf_sweep-")
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(tmp, self.path)


def _now() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M")


def _versions() -> dict:
    import importlib.metadata as md

    def version(name: str) -> str:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return "-"

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    return {"transformers": version("transformers"), "torch": version("torch"), "onnxruntime": version("onnxruntime"),
            "onnxscript": version("onnxscript"), "onnxport_commit": commit.strip(), "python": platform.python_version()}


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
                PYTHONWARNINGS="ignore", PYTHONPATH=str(ROOT))


def _results(stdout: str) -> list[dict]:
    return [json.loads(line[len(RESULT):]) for line in stdout.splitlines() if line.startswith(RESULT)]


def _tail(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def run_probes(types: list[str], cache: Cache, timeout: int, jobs: int, log) -> None:
    """Probe the types not yet probed, ``PROBE_CHUNK`` per process; a process that dies loses only the
    type it was on (recorded as crashed), the rest of its chunk runs again."""
    todo = [t for t in types if cache.get(t, "probe") is None]
    chunks = [todo[i:i + PROBE_CHUNK] for i in range(0, len(todo), PROBE_CHUNK)]

    def work(chunk: list[str]) -> None:
        while chunk:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "probe", str(timeout), *chunk]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT,
                                      timeout=timeout * len(chunk) + 120)
                stdout, stderr = proc.stdout, proc.stderr
            except subprocess.TimeoutExpired as e:
                stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                stderr = "timeout"
            done = _results(stdout)
            for record in done:
                cache.put(record["type"], "probe", record)
                log(f"probe {record['type']}: {record['status']} ({record.get('attempt', '')}) {record['seconds']}s")
            finished = {r["type"] for r in done}
            rest = [t for t in chunk if t not in finished]
            if rest:  # the first unfinished one killed the process
                cache.put(rest[0], "probe", {"type": rest[0], "status": "no-build",
                                             "errors": [f"probe process died: {_tail(stderr)}"]})
                log(f"probe {rest[0]}: process died: {_tail(stderr)}")
                rest = rest[1:]
            chunk = rest

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(work, chunks))


def run_exports(types: list[str], exporters: list[str], cache: Cache, timeout: int, jobs: int, log) -> None:
    """Each (type, exporter) not yet in the cache, for types that built, one process each."""
    tasks = [(t, e) for t in types for e in exporters
             if (cache.get(t, "probe") or {}).get("status") == "built" and cache.get(t, e) is None]
    total = len(tasks)
    counter = iter(range(1, total + 1))
    lock = threading.Lock()

    def work(task: tuple[str, str]) -> None:
        model_type, exporter = task
        record = dict(cache.get(model_type, "probe"))
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(record, f)
            path = f.name
        start = time.perf_counter()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", exporter, path]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=timeout)
            found = _results(proc.stdout)
            result = found[-1] if found else {"status": "crashed", "error": f"exit {proc.returncode}: "
                                                                             f"{_tail(proc.stderr)}"}
        except subprocess.TimeoutExpired:
            result = {"status": "timeout", "error": f"over {timeout}s"}
        finally:
            os.remove(path)
        result["wall"] = round(time.perf_counter() - start, 1)
        cache.put(model_type, exporter, result)
        with lock:
            n = next(counter)
        log(f"[{n}/{total}] {model_type} {exporter}: {result['status']} {result['wall']}s "
            f"{(result.get('error') or '')[:120]}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(work, tasks))


def all_types() -> list[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return list(CONFIG_MAPPING_NAMES)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        return worker_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated model types (default: every type of CONFIG_MAPPING)")
    parser.add_argument("--exporters", default=",".join(EXPORTERS), help="comma-separated, of " + ", ".join(EXPORTERS))
    parser.add_argument("--jobs", type=int, default=1, help="processes at once (default 1)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per export process (default 300)")
    parser.add_argument("--probe-timeout", type=int, default=120, help="seconds per model type's probe (default 120)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"results cache (default {DEFAULT_CACHE})")
    parser.add_argument("--markdown", type=Path, default=DEFAULT_MARKDOWN, help="report to write")
    parser.add_argument("--fresh", action="store_true", help="start from an empty cache")
    parser.add_argument("--redo", help="comma-separated exporters (or 'probe') whose cached results to run again")
    parser.add_argument("--report-only", action="store_true", help="write the report from the cache, run nothing")
    parser.add_argument("--probe-only", action="store_true", help="build the tiny models only, export nothing")
    args = parser.parse_args(argv)

    _quiet()
    cache = Cache(args.cache, args.fresh, reading=args.report_only)
    types = all_types() if not args.only else [t.strip() for t in args.only.split(",") if t.strip()]
    exporters = [e.strip() for e in args.exporters.split(",") if e.strip()]
    unknown = sorted(set(exporters) - set(EXPORTERS))
    if unknown:
        parser.error(f"unknown exporters {unknown}")
    for key in (args.redo or "").split(","):
        if key.strip():
            for t in types:
                cache.data["results"].get(t, {}).pop(key.strip(), None)

    def log(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)

    if not args.report_only:
        cache.data["meta"]["command"] = "python benchmarks/hf_sweep.py " + " ".join(argv)
        cache.start_run()
        run_probes(types, cache, args.probe_timeout, args.jobs, log)
        if not args.probe_only:
            run_exports(types, exporters, cache, args.timeout, args.jobs, log)
        cache.data["meta"]["finished"] = _now()
        cache.save()
    from hf_sweep_report import write_report

    text = write_report(cache.data, all_types() if not args.only else types, exporters)
    args.markdown.write_text(text)
    print(text.split("\n## ")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
