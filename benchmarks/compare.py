"""Side by side: onnxport.to_onnx against torch.onnx.export(dynamo=True), measured in the same run.

For every model of ``benchmarks/models.py``: export seconds (onnxport's split into torch.export
capture seconds and its own seconds), node count, shape-related node count, onnxruntime latency
(one thread, median after warm-up) and max abs error against eager PyTorch at another size of the
dynamic dimensions, with ratios onnxport / torch.onnx and a geometric-mean row.

    python benchmarks/compare.py [--models mlp,small_cnn] [--markdown results.md] [--runs 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
import os
import statistics
import sys
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

from models import MODELS  # noqa: E402

import onnxport  # noqa: E402
from onnxport import verify  # noqa: E402

torch.set_num_threads(1)
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
    nodes: int = 0
    shape_nodes: int = 0
    latency_ms: float = math.nan
    max_abs: float = math.nan
    correct: bool = False


# ------------------------------------------------------------------------------------ counting
def _graph_likes(model: ir.Model) -> list:
    out: list = [model.graph]
    out.extend(model.functions.values())
    return out


def count_nodes(model: ir.Model) -> tuple[int, int]:
    """(all nodes, shape-related nodes) over the main graph, subgraphs and local functions.

    Shape-related: Shape/Size, and any node computing a non-float tensor of rank <= 1 from a
    shape-related value (Gather/Concat/Unsqueeze/Squeeze/Slice/arithmetic on sizes, Reshape's and
    Expand's shape inputs).
    """
    total = shape = 0
    for g in _graph_likes(model):
        derived: set[ir.Value] = set()
        for node in ir.traversal.RecursiveGraphIterator(g):
            total += 1
            small = all(o.dtype not in _FLOATS and (o.shape is None or len(o.shape) <= 1) for o in node.outputs)
            if node.op_type in _SHAPE_SOURCES or (small and any(v in derived for v in node.inputs if v is not None)):
                shape += 1
                derived.update(node.outputs)
    return total, shape


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
    deadline = time.perf_counter() + 20.0
    for _ in range(runs):
        for i, (session, feeds) in enumerate(sessions):
            t0 = time.perf_counter()
            session.run(None, feeds)
            times[i].append(time.perf_counter() - t0)
        if time.perf_counter() > deadline:
            break
    return [1000.0 * statistics.median(t) for t in times]


def _evaluate(proto, measure: Measure, other_inputs: list[torch.Tensor], expected: list[np.ndarray]) -> tuple:
    """Run ``proto`` at the other size, record its max abs error; return (session, feeds) for timing."""
    runner = verify.OrtRunner(proto, threads=1)
    if len(runner.input_names) != len(other_inputs):
        raise RuntimeError(f"model takes {len(runner.input_names)} inputs, eager takes {len(other_inputs)}")
    feeds = {n: verify.to_numpy(t) for n, t in zip(runner.input_names, other_inputs)}
    got = runner.session.run(None, feeds)
    if len(got) != len(expected):
        raise RuntimeError(f"{len(got)} outputs, eager has {len(expected)}")
    worst, ok = 0.0, True
    for e, g in zip(expected, got):
        if e.shape != g.shape:
            raise RuntimeError(f"output shape {g.shape} != eager {e.shape} at another size")
        diff = float(np.max(np.abs(e.astype(np.float64) - g.astype(np.float64)))) if e.size else 0.0
        worst = max(worst, diff)
        ok = ok and bool(np.allclose(g, e, atol=1e-4, rtol=1e-3, equal_nan=True))
    measure.max_abs, measure.correct = worst, ok
    return runner.session, feeds


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def bench_model(name: str, runs: int) -> tuple[Measure, Measure]:
    """Export ``name`` with both exporters and measure both; failures are recorded, not raised."""
    model, args, dyn = MODELS[name]()
    ours, theirs = Measure(), Measure()
    timed: list = []
    new_args = other_size_inputs(args, dyn)
    other_inputs = [t for t in new_args if isinstance(t, torch.Tensor)]
    with torch.no_grad():
        expected = [verify.to_numpy(t) for t in verify._tensor_leaves(model(*new_args))]  # noqa: SLF001
    try:
        t0 = time.perf_counter()
        result = onnxport.to_onnx(model, args, dynamic_shapes=dyn)
        ours.seconds = time.perf_counter() - t0
        ours.capture = result.timings.get("capture", math.nan)
        ours.own = ours.seconds - ours.capture
        ours.nodes, ours.shape_nodes = count_nodes(result.model)
        timed.append((ours, _evaluate(result.model_proto, ours, other_inputs, expected)))
        ours.ok = True
    except Exception as e:  # noqa: BLE001 - reported in the table
        ours.error = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    try:
        t0 = time.perf_counter()
        program = _quiet(torch.onnx.export, model, args, dynamic_shapes=_dims_for_torch(dyn, {}), dynamo=True,
                         verbose=False)
        theirs.seconds = time.perf_counter() - t0
        theirs.nodes, theirs.shape_nodes = count_nodes(program.model)
        timed.append((theirs, _evaluate(ir.serde.serialize_model(program.model), theirs, other_inputs, expected)))
        theirs.ok = True
    except Exception as e:  # noqa: BLE001 - reported in the table
        theirs.error = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    for (m, _), ms in zip(timed, _latency_ms([t for _, t in timed], runs)):
        m.latency_ms = ms
    return ours, theirs


# ------------------------------------------------------------------------------------ table
_COLUMNS = ["model", "export s (ours: capture+own)", "torch.onnx s", "ratio", "nodes", "torch nodes", "ratio",
            "shape nodes", "torch shape", "ORT ms", "torch ORT ms", "ratio", "max abs", "torch max abs", "status"]


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def _f(x: float, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _status(ours: Measure, theirs: Measure) -> str:
    parts = []
    for who, m in (("onnxport", ours), ("torch.onnx", theirs)):
        if not m.ok:
            parts.append(f"{who} failed ({m.error})")
        elif not m.correct:
            parts.append(f"{who} wrong at another size")
    return "; ".join(parts) or "ok"


def build_rows(results: dict[str, tuple[Measure, Measure]]) -> list[list[str]]:
    """Table rows (strings) per model, ratios onnxport / torch.onnx, and the geometric-mean row
    (ratios over the models both exporters got right; own/capture over onnxport's successes)."""
    rows, logs = [], {"time": [], "nodes": [], "lat": [], "own": []}
    for name, (o, t) in results.items():
        both = o.ok and t.ok
        r_time = _ratio(o.seconds, t.seconds) if both else math.nan
        r_nodes = _ratio(o.nodes, t.nodes) if both else math.nan
        r_lat = _ratio(o.latency_ms, t.latency_ms) if both else math.nan
        if both:
            logs["time"].append(r_time)
            logs["nodes"].append(r_nodes)
            logs["lat"].append(r_lat)
        if o.ok:
            logs["own"].append(_ratio(o.own, o.capture))
        rows.append([name, f"{_f(o.seconds)} ({_f(o.capture)}+{_f(o.own)})", _f(t.seconds), _f(r_time),
                     str(o.nodes or "-"), str(t.nodes or "-"), _f(r_nodes), str(o.shape_nodes if o.ok else "-"),
                     str(t.shape_nodes if t.ok else "-"), _f(o.latency_ms, 3), _f(t.latency_ms, 3), _f(r_lat),
                     _f(o.max_abs, 6) if o.ok else "-", _f(t.max_abs, 6) if t.ok else "-", _status(o, t)])

    def geo(xs):
        xs = [x for x in xs if x and not math.isnan(x)]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan

    rows.append(["geomean", f"own/capture {_f(geo(logs['own']))}", "", _f(geo(logs["time"])), "", "",
                 _f(geo(logs["nodes"])), "", "", "", "", _f(geo(logs["lat"])), "", "", ""])
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
    return head + "".join("| " + " | ".join(r) + " |\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    """Command line entry: benchmark the selected models, print the table, write markdown on request."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names from benchmarks/models.py")
    parser.add_argument("--markdown", default=None, help="also write the table as markdown to this path")
    parser.add_argument("--runs", type=int, default=200, help="onnxruntime runs per model after warm-up")
    ns = parser.parse_args(argv)
    names = [n for n in ns.models.split(",") if n] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    # warm both exporters up once so that one-time imports are not charged to the first model
    warm = torch.nn.Linear(2, 2).eval()
    _quiet(onnxport.to_onnx, warm, (torch.randn(1, 2),))
    _quiet(torch.onnx.export, warm, (torch.randn(1, 2),), dynamo=True, verbose=False)
    results = {}
    for name in names:
        print(f"[compare] {name}...", file=sys.stderr, flush=True)
        results[name] = bench_model(name, ns.runs)
    rows = build_rows(results)
    print(render_text(rows))
    if ns.markdown:
        Path(ns.markdown).write_text("# onnxport vs torch.onnx.export (dynamo=True)\n\n"
                                     "Ratios are onnxport / torch.onnx; lower is better.\n\n" + render_markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
