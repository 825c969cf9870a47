"""Side by side: onnxport.to_onnx against torch.onnx.export(dynamo=True), measured in the same run.

For every model of ``benchmarks/models.py``: export seconds (onnxport's split into torch.export
capture seconds and its own seconds), node count, shape-related node count, onnxruntime latency
(one thread, median after warm-up) and max abs error against eager PyTorch at another size of the
dynamic dimensions, with ratios onnxport / torch.onnx and a geometric-mean row over the models both
exported and got right. The status column names the exporter that FAILED to export (the error's
innermost cause), that gave WRONG results at other sizes, or that specialized a dynamic dimension.
An exporter that raises never stops the run.

    OMP_NUM_THREADS=1 python benchmarks/compare.py [--models mlp,small_cnn] [--markdown RESULTS.md] [--runs 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import logging
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx_ir as ir  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from models import MODELS, Case  # noqa: E402

import onnxport  # noqa: E402
from onnxport import verify  # noqa: E402

torch.set_num_threads(1)
logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # torchvision-not-installed notices
_SHAPE_SOURCES = {"Shape", "Size"}
_FLOATS = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}


@dataclasses.dataclass
class Measure:
    """One exporter on one model."""

    ok: bool = False
    error: str = ""
    seconds: float = math.nan
    capture: float = math.nan
    own: float = math.nan
    nodes: int = 0  # operator nodes (calls of local functions not counted, their nodes are)
    shape_nodes: int = 0
    calls: int = 0  # calls of local functions
    latency_ms: float = math.nan
    max_abs: float = math.nan
    correct: bool = False
    specialized: list[str] = dataclasses.field(default_factory=list)
    decompose: float = math.nan
    guards: str = ""  # onnxport's decisions on the shape guards: "3 proved, 1 kept; adopted time >= 4"
    detail: str = ""  # the first lines of the exporter's own error message (what failed, where, what to do)
    timed_out: bool = False


# ------------------------------------------------------------------------------------ counting
def _graph_likes(model: ir.Model) -> list:
    out: list = [model.graph]
    out.extend(model.functions.values())
    return out


def count_nodes(model: ir.Model) -> tuple[int, int, int]:
    """(operator nodes, shape-related nodes, calls of local functions) over the main graph,
    subgraphs and local functions.

    Operator nodes: every node but a call of one of the model's local functions (the function's
    own nodes are counted; onnxruntime inlines the call when it loads the model). Shape-related:
    Shape/Size, and any node computing a non-float tensor of rank <= 1 from a shape-related value
    (Gather/Concat/Unsqueeze/Squeeze/Slice/arithmetic on sizes, Reshape's and Expand's shape inputs).
    """
    total = shape = calls = 0
    for g in _graph_likes(model):
        derived: set[ir.Value] = set()
        for node in ir.traversal.RecursiveGraphIterator(g):
            if (node.domain, node.op_type, node.overload) in model.functions:
                calls += 1
                continue
            total += 1
            small = all(o.dtype not in _FLOATS and (o.shape is None or len(o.shape) <= 1) for o in node.outputs)
            if node.op_type in _SHAPE_SOURCES or (small and any(v in derived for v in node.inputs if v is not None)):
                shape += 1
                derived.update(node.outputs)
    return total, shape, calls


# ------------------------------------------------------------------------------------ running
def _dims_for_torch(spec: Any, made: dict) -> Any:
    if isinstance(spec, str):
        if spec not in made:
            made[spec] = torch.export.Dim(spec)
        return made[spec]
    if isinstance(spec, dict):
        return {k: _dims_for_torch(v, made) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_dims_for_torch(v, made) for v in spec)
    return spec


def other_size_inputs(args: tuple, dyn: Any, grow: int = 3) -> tuple:
    """``args`` with every dynamic dimension ``grow`` larger (one new size per dimension name)."""
    sizes: dict[str, int] = {}
    specs = list(dyn.values()) if isinstance(dyn, dict) else list(dyn or [None] * len(args))
    out = []
    for a, spec in zip(args, specs):
        if not isinstance(a, torch.Tensor) or not spec:
            out.append(a)
            continue
        shape = list(a.shape)
        for axis, d in (spec.items() if isinstance(spec, dict) else enumerate(spec)):
            if d is None:
                continue
            key = d if isinstance(d, str) else getattr(d, "__name__", str(d))
            shape[axis] = sizes.setdefault(key, shape[axis] + grow)
        gen = torch.Generator().manual_seed(1)
        if a.dtype.is_floating_point:
            out.append(torch.randn(shape, generator=gen).to(a.dtype))
        elif int(a.min()) >= 0 and int(a.max()) <= 1:  # masks: keep them all ones
            out.append(torch.ones(shape, dtype=a.dtype))
        else:
            out.append(torch.randint(0, int(a.max()) + 1, shape, generator=gen, dtype=a.dtype))
    return tuple(out)


def _latency_ms(sessions: list, runs: int) -> list[float]:
    """Median milliseconds per run of each ``(session, feeds)``, runs interleaved so that both
    exporters' models see the same machine load."""
    for session, feeds in sessions:
        for _ in range(3):
            session.run(None, feeds)
    times: list[list[float]] = [[] for _ in sessions]
    deadline = time.perf_counter() + 10.0
    for _ in range(runs):
        for i, (session, feeds) in enumerate(sessions):
            t0 = time.perf_counter()
            session.run(None, feeds)
            times[i].append(time.perf_counter() - t0)
        if time.perf_counter() > deadline:
            break
    return [1000.0 * statistics.median(t) for t in times]


def _evaluate(proto, measure: Measure, others: list[list[torch.Tensor]], expected: list[list[np.ndarray]]) -> tuple:
    """Run ``proto`` on every other input set, record the max abs error over them and whether all
    match eager (atol 1e-4, rtol 1e-3); return (session, feeds of the first set) for timing.

    Raises:
        RuntimeError: the model's inputs/outputs do not line up with eager's, or an output shape differs.
    """
    runner = verify.OrtRunner(proto, threads=1)  # a model proto or the path of a saved model
    worst, ok, timed = 0.0, True, None
    for inputs, wanted in zip(others, expected):
        if len(runner.input_names) != len(inputs):
            raise RuntimeError(f"model takes {len(runner.input_names)} inputs, eager takes {len(inputs)}")
        feeds = {n: verify.to_numpy(t) for n, t in zip(runner.input_names, inputs)}
        timed = timed or (runner.session, feeds)
        got = runner.session.run(None, feeds)
        if len(got) != len(wanted):
            raise RuntimeError(f"{len(got)} outputs, eager has {len(wanted)}")
        for e, g in zip(wanted, got):
            if e.shape != g.shape:
                raise RuntimeError(f"output shape {g.shape} != eager {e.shape} at another size")
            diff = float(np.max(np.abs(e.astype(np.float64) - g.astype(np.float64)))) if e.size else 0.0
            worst = max(worst, diff)
            ok = ok and bool(np.allclose(g, e, atol=1e-4, rtol=1e-3, equal_nan=True))
    measure.max_abs, measure.correct = worst, ok
    return timed


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _first_line(e: BaseException) -> str:
    """``Type: first line`` of the innermost cause of ``e`` (torch.onnx wraps torch.export's error)."""
    while e.__cause__ is not None:
        e = e.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:120] if text else ''}"


def _first_lines(e: BaseException, lines: int = 4) -> str:
    """``Type: `` and the first ``lines`` non-empty lines of ``e``'s own message (not its cause's)."""
    text = [t.rstrip() for t in re.sub(r"\x1b\[[0-9;]*m", "", str(e)).splitlines() if t.strip()]
    return f"{type(e).__name__}: " + "\n".join(t[:200] for t in text[:lines])


def specialized_dims(model: ir.Model, case: Case) -> list[str]:
    """``input[axis]=size`` for every dimension ``case.dynamic_shapes`` names dynamic that the ONNX
    model's inputs fix to a number (the exporter specialized it to the example's size)."""
    out = []
    specs = list(case.dynamic_shapes.values()) if isinstance(case.dynamic_shapes, dict) else []
    tensors = [i for i, a in enumerate(case.args) if isinstance(a, torch.Tensor)]
    for position, value in enumerate(model.graph.inputs):
        spec = specs[tensors[position]] if position < len(tensors) and tensors[position] < len(specs) else None
        if not isinstance(spec, dict):
            continue
        for axis, d in spec.items():
            if d is not None and value.shape is not None and isinstance(value.shape[axis], int):
                out.append(f"{value.name}[{axis}]={value.shape[axis]}")
    return out


def _export_ours(case: Case, measure: Measure, path: str) -> None:
    torch._dynamo.reset()  # nested higher-order ops leave tracer state behind between captures
    t0 = time.perf_counter()
    result = _quiet(onnxport.to_onnx, case.model, case.args, dynamic_shapes=case.dynamic_shapes,
                    **case.onnxport_kwargs)
    measure.seconds = time.perf_counter() - t0
    measure.capture = result.timings.get("capture", math.nan)
    measure.decompose = result.timings.get("decompose", math.nan)
    measure.own = measure.seconds - measure.capture - measure.decompose
    measure.nodes, measure.shape_nodes, measure.calls = count_nodes(result.model)
    measure.specialized = specialized_dims(result.model, case)
    measure.guards = guard_summary(result.guards)
    result.save(path)


def guard_summary(guards: list) -> str:
    """``3 proved, 1 kept; adopted time >= 4``: how many shape guards were dropped (proved over the
    declared sizes) or kept (0/1 specializations, validated), and the constraints adopted."""
    counts = [f"{sum(g.status == s for g in guards)} {s}" for s in ("proved", "kept")
              if any(g.status == s for g in guards)]
    adopted = [str(g) for g in guards if g.status == "adopted"]
    return ", ".join(counts or ["none"]) + (f"; adopted {', '.join(adopted)}" if adopted else "")


def _export_torch(case: Case, measure: Measure, path: str) -> None:
    torch._dynamo.reset()
    t0 = time.perf_counter()
    program = _quiet(torch.onnx.export, case.model, case.args, dynamic_shapes=_dims_for_torch(case.dynamic_shapes, {}),
                     dynamo=True, verbose=False)
    measure.seconds = time.perf_counter() - t0
    measure.nodes, measure.shape_nodes, measure.calls = count_nodes(program.model)
    measure.specialized = specialized_dims(program.model, case)
    ir.save(program.model, path)


EXPORTERS = {"onnxport": _export_ours, "torch.onnx": _export_torch}


def export_one(name: str, exporter: str, path: str) -> Measure:
    """In this (fresh) process: warm the exporter up on a tiny model, then export model ``name``
    to ``path`` and measure it; a failure is recorded in the measure, not raised."""
    warm = torch.nn.Linear(2, 2).eval()
    if exporter == "onnxport":
        _quiet(onnxport.to_onnx, warm, (torch.randn(1, 2),))
    else:
        _quiet(torch.onnx.export, warm, (torch.randn(1, 2),), dynamo=True, verbose=False)
    measure = Measure()
    try:
        EXPORTERS[exporter](MODELS[name](), measure, path)
        measure.ok = True
    except Exception as e:  # noqa: BLE001 - reported in the table
        measure.error = _first_line(e)
        measure.detail = _first_lines(e)
    return measure


def _export_in_fresh_process(name: str, exporter: str, directory: str, timeout: int = 1800) -> tuple[Measure, str]:
    path = os.path.join(directory, f"{name}.{exporter}.onnx")
    out = os.path.join(directory, f"{name}.{exporter}.json")
    cmd = [sys.executable, __file__, "--export-one", name, "--exporter", exporter, "--out", path]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
    except subprocess.TimeoutExpired:
        return Measure(error=f"export took over {timeout / 60:g} minutes", timed_out=True), path
    if proc.returncode != 0 or not os.path.exists(out):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return Measure(error=f"export process failed: {tail[0][:120]}"), path
    with open(out) as f:
        return Measure(**json.load(f)), path


def bench_model(name: str, runs: int, timeout: int = 1800) -> tuple[Measure, Measure]:
    """Export ``name`` with each exporter in a fresh process, then, in this one, run both models in
    onnxruntime against eager PyTorch on other sizes and time them interleaved; failures are
    recorded, not raised; an export process running over ``timeout`` seconds is stopped (``timed_out``).

    An exporter that raises is marked failed (``ok`` False); one whose model raises in onnxruntime or
    differs from eager on the other input sets is marked wrong (``correct`` False).
    """
    case = MODELS[name]()
    sets = case.others or [other_size_inputs(case.args, case.dynamic_shapes)]
    others = [verify.tensor_leaves(inputs) for inputs in sets]
    with torch.no_grad():
        expected = [[verify.to_numpy(t) for t in verify.tensor_leaves(case.model(*inputs))] for inputs in sets]
    timed: list = []
    measures = []
    with tempfile.TemporaryDirectory(prefix="onnxport-compare-") as directory:
        for exporter in EXPORTERS:
            measure, path = _export_in_fresh_process(name, exporter, directory, timeout)
            measures.append(measure)
            if not measure.ok:
                continue
            try:
                timed.append((measure, _evaluate(path, measure, others, expected)))
            except Exception as e:  # noqa: BLE001 - a model that cannot run at another size is wrong there
                measure.error = _first_line(e)
        for (m, _), ms in zip(timed, _latency_ms([t for _, t in timed], runs)):
            m.latency_ms = ms
    return measures[0], measures[1]


# ------------------------------------------------------------------------------------ table
_COLUMNS = ["model", "export s (ours: capture+decompose+rest)", "torch.onnx s", "ratio", "nodes", "torch nodes",
            "ratio", "shape nodes", "torch shape", "ORT ms", "torch ORT ms", "ratio", "max abs", "torch max abs",
            "onnxport guards", "status"]


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def _f(x: float, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _nodes_cell(m: Measure) -> str:
    """``10`` or ``10 (+3 calls)``: operator nodes, and the calls of local functions beside them."""
    if not m.ok:
        return "-"
    return f"{m.nodes} (+{m.calls} calls)" if m.calls else str(m.nodes)


def _status(ours: Measure, theirs: Measure) -> str:
    parts = []
    for who, m in (("onnxport", ours), ("torch.onnx", theirs)):
        if not m.ok:
            parts.append(f"{who} FAILED to export ({m.error})")
        elif not m.correct:
            parts.append(f"{who} WRONG at other sizes" + (f" ({m.error})" if m.error else ""))
        if m.ok and m.specialized:
            parts.append(f"{who} specialized {', '.join(m.specialized)}")
    return "; ".join(parts) or "ok"


def build_rows(results: dict[str, tuple[Measure, Measure]]) -> list[list[str]]:
    """Table rows (strings) per model, ratios onnxport / torch.onnx, and the geometric-mean row
    (ratios over the models both exporters got right; own/capture over onnxport's successes)."""
    rows, logs = [], {"time": [], "nodes": [], "lat": [], "own": []}
    for name, (o, t) in results.items():
        exported = o.ok and t.ok
        r_time = _ratio(o.seconds, t.seconds) if exported else math.nan
        r_nodes = _ratio(o.nodes, t.nodes) if exported else math.nan
        r_lat = _ratio(o.latency_ms, t.latency_ms) if exported else math.nan
        if exported and o.correct and t.correct:
            logs["time"].append(r_time)
            logs["nodes"].append(r_nodes)
            logs["lat"].append(r_lat)
        if o.ok:
            logs["own"].append(_ratio(o.own, o.capture))
        rows.append([name, f"{_f(o.seconds)} ({_f(o.capture)}+{_f(o.decompose)}+{_f(o.own)})", _f(t.seconds),
                     _f(r_time),
                     _nodes_cell(o), _nodes_cell(t), _f(r_nodes), str(o.shape_nodes if o.ok else "-"),
                     str(t.shape_nodes if t.ok else "-"), _f(o.latency_ms, 3), _f(t.latency_ms, 3), _f(r_lat),
                     _f(o.max_abs, 6) if o.ok else "-", _f(t.max_abs, 6) if t.ok else "-", o.guards or "-",
                     _status(o, t)])

    def geo(xs):
        xs = [x for x in xs if x and not math.isnan(x)]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan

    rows.append([f"geomean ({len(logs['time'])} both right)", f"own/capture {_f(geo(logs['own']))}", "",
                 _f(geo(logs["time"])), "", "",
                 _f(geo(logs["nodes"])), "", "", "", "", _f(geo(logs["lat"])), "", "", "", ""])
    return rows


def render_text(rows: list[list[str]]) -> str:
    """Aligned plain-text table."""
    widths = [max(len(r[i]) for r in [_COLUMNS] + rows) for i in range(len(_COLUMNS) - 1)]
    lines = []
    for r in [_COLUMNS] + rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    return "\n".join(lines)


def render_markdown(rows: list[list[str]]) -> str:
    """GitHub-flavoured markdown table."""
    head = "| " + " | ".join(_COLUMNS) + " |\n|" + "---|" * len(_COLUMNS) + "\n"
    return head + "".join("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |\n" for r in rows)


def summarize(results: dict[str, tuple[Measure, Measure]]) -> str:
    """Markdown bullet list: models where onnxport's graph is larger than torch.onnx's, and the
    models each exporter failed or got wrong."""
    lines = []
    larger = [f"{n} ({o.nodes} vs {t.nodes})" for n, (o, t) in results.items() if o.ok and t.ok and o.nodes > t.nodes]
    lines.append("- onnxport has more nodes than torch.onnx on: " + (", ".join(larger) or "none"))
    for who, index in (("onnxport", 0), ("torch.onnx", 1)):
        failed = [n for n, pair in results.items() if not pair[index].ok]
        wrong = [n for n, pair in results.items() if pair[index].ok and not pair[index].correct]
        lines.append(f"- {who} failed to export: {', '.join(failed) or 'none'}; "
                     f"wrong at other sizes: {', '.join(wrong) or 'none'}")
    return "\n".join(lines) + "\n"


def describe_run(runs: int, seconds: float) -> str:
    """One paragraph: when, on what and with which versions the table was measured."""
    import onnxruntime

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in one run of "
            f"`OMP_NUM_THREADS=1 python benchmarks/compare.py` ({seconds / 60:.1f} min) on a machine with "
            f"{os.cpu_count()} cores (load average at the end: {load}); torch {torch.__version__}, "
            f"onnxruntime {onnxruntime.__version__}, both exporters at their default settings (onnxport: "
            f"opset 20, optimize=True, control-flow bodies as local functions; torch.onnx.export: dynamo=True). "
            f"Nodes: operator nodes of the main graph, its subgraphs and its local functions; a call of a "
            f"local function is not one (onnxruntime inlines it when it loads the model) and is shown "
            f"beside the count as \"+N calls\". Latency: one onnxruntime thread, median of up to {runs} runs "
            f"after 3 warm-up runs, both exporters' models interleaved, on the first other-size input set. "
            f"Max abs error: over the other-size input sets (dynamic dimensions at sizes other than the "
            f"example's) against eager PyTorch; WRONG means an output differs (atol 1e-4, rtol 1e-3) or the "
            f"model does not run there.")


def main(argv: list[str] | None = None) -> int:
    """Command line entry: benchmark the selected models, print the table, write markdown on request."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names from benchmarks/models.py")
    parser.add_argument("--markdown", default=None, help="also write the table as markdown to this path")
    parser.add_argument("--runs", type=int, default=100, help="onnxruntime runs per model after warm-up")
    parser.add_argument("--note", default="", help="text added after the measurement paragraph of the markdown")
    parser.add_argument("--export-one", metavar="MODEL", help=argparse.SUPPRESS)  # the fresh export process
    parser.add_argument("--exporter", choices=list(EXPORTERS), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.export_one:
        measure = export_one(ns.export_one, ns.exporter, ns.out)
        Path(ns.out[:-len(".onnx")] + ".json").write_text(json.dumps(dataclasses.asdict(measure)))
        return 0
    names = [n for n in ns.models.split(",") if n] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    results, skipped, start = {}, {}, time.perf_counter()
    for name in names:
        print(f"[compare] {name}...", file=sys.stderr, flush=True)
        try:
            results[name] = bench_model(name, ns.runs)
        except ImportError as e:  # a third-party package is absent
            skipped[name] = str(e)
    rows = build_rows(results)
    print(render_text(rows))
    if ns.markdown:
        intro = describe_run(ns.runs, time.perf_counter() - start) + (f" {ns.note}" if ns.note else "")
        Path(ns.markdown).write_text(
            "# onnxport vs torch.onnx.export (dynamo=True)\n\n" + intro + "\n\n"
            "Export seconds: wall time of the export call, each exporter in a fresh process after one warm-up "
            "export of a tiny model; onnxport's split into capture (torch.export and the guard decisions), "
            "decompose (ops without a translation) and the rest (translation, optimization, finalization). "
            "Shape nodes: Shape/Size and the integer tensors of rank "
            "<= 1 computed from them. onnxport guards: the conditions on sizes torch.export's trace relies on, "
            "proved over the declared sizes (dropped), kept (torch's 0/1 specializations, checked by validation) "
            "or adopted as constraints. Ratios are onnxport / torch.onnx, lower is better; the geometric-mean "
            "row covers the models both exporters exported and got right at other sizes.\n\n"
            + render_markdown(rows) + "\n" + summarize(results)
            + "".join(f"- {n} skipped: {why}\n" for n, why in skipped.items()))
    for name, why in skipped.items():
        print(f"{name} skipped: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
