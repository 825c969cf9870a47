"""Speech models from the toolkits' own classes, exported by onnxport and by torch.onnx side by side.

The models are ``tests/speech_zoo.py``'s: torchaudio, SpeechBrain, ESPnet, asteroid and EnCodec classes at
small configs with seeded random weights, batch and time dynamic, lengths as inputs where the model takes
them. For each model and exporter, in a fresh process with a timeout (one hang does not stop the run):

* ``onnxport``: ``onnxport.to_onnx(model, args, dynamic_shapes=spec)``;
* ``torch.onnx``: ``torch.onnx.export(model, args, dynamic_shapes=spec, dynamo=True)``.

The ONNX model runs in onnxruntime (one thread) at the example and at two other (batch, time) with unequal
lengths, and, for the ESPnet encoders, at batch 1 and 20,010 frames (past the 20,006 their positional table
covers; run only when the export is right at the other sets and states no bound below it), each output
compared with eager PyTorch (``|onnx - eager| <= 1e-4 * max(1, max|eager|) + 1e-3 * |eager|``, integers
exactly). Verdicts: ``right`` (every set); ``right (bound stated)`` (right at every set within an upper
bound the export states on a dim declared unbounded: onnxport's ``result.constraints``, torch.onnx's
``exported_program.range_constraints``); ``wrong`` (the numbers differ at the example); ``broken``
(exported, but onnxruntime cannot load or run it at some set, or right at the example and not at another
set: a dim declared dynamic came out fixed, or the numbers are right only at the example's sizes);
``refused`` (the export raised: its first line and the user's line); ``timeout``; ``crashed``. Also the
export's seconds, its node count (local functions inlined, subgraphs counted) and onnxruntime's latency at
the example (one thread, warmed up, the median of the runs; kept in the cache, not in the report: the two
exporters' models run in separate processes, not alternated).

Results go to ``out/speech.json`` as they come (``--fresh`` starts it anew); ``benchmarks/SPEECH.md`` is
written from it at the end, with the machine, the date and the versions of the run.

Then the streaming section (``benchmarks/speech_stream.py``): the streaming steps of
``tests/speech_streaming.py`` exported by both and judged over the chunk loop by ``onnxport.check_stream``,
their results under ``"streaming"`` in the same cache, their section at the end of SPEECH.md with its own
command and dates. ``--streaming-only`` runs that section alone (the other results kept from the cache);
``--no-streaming`` the models of the zoo alone.

    python benchmarks/speech.py [--fresh] [--only torchaudio_conformer,espnet_conformer] [--timeout 300]
                                [--streaming-only | --no-streaming] [--report-only]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agreement import ATOL, RTOL, compare
from speech_common import (EXPORTERS, HERE, RESULT, ROOT, _count_nodes, _first_line, _now, _root_cause, _session,
                           _setup, _short, _user_frame, _versions, _commits, _fmt, run_one)

DEFAULT_CACHE = ROOT / "out" / "speech.json"
DEFAULT_MARKDOWN = HERE / "SPEECH.md"
LONG_FRAMES = 20_010
VERDICTS = ("right", "right (bound stated)", "wrong", "broken", "refused", "timeout", "crashed")


# ============================================================================ worker side
def _flat(value: Any) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat(v)]
    return []  # None and plain values are not outputs of the ONNX model


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


def _dim_names(case) -> dict[tuple[int, int], str]:
    """(argument position, axis) -> the name of the Dim the case declares there."""
    import inspect

    names = list(inspect.signature(case.model.forward).parameters)
    return {(names.index(arg), axis): getattr(dim, "__name__", str(dim))
            for arg, axes in case.dynamic_shapes.items() if arg in names for axis, dim in axes.items()}


def _sizes(case, args: tuple) -> dict[str, int]:
    """Dim name -> its size in ``args``."""
    return {name: int(args[position].shape[axis]) for (position, axis), name in _dim_names(case).items()}


UPPER = re.compile(r"\b([A-Za-z_]\w*)\s*(<=|<)\s*(\d+)\b")


def _upper_bounds(texts: list[str]) -> dict[str, int]:
    """Dim name -> the largest size the conditions ``texts`` allow (``time <= 20006``, ``time < 20007``)."""
    bounds: dict[str, int] = {}
    for text in texts:
        for name, op, number in UPPER.findall(text):
            top = int(number) - (op == "<")
            bounds[name] = min(top, bounds.get(name, top))
    return bounds


def export_onnxport(case):
    """onnxport's ``ExportResult``."""
    import onnxport

    return onnxport.to_onnx(case.model, case.args, dynamic_shapes=case.dynamic_shapes)


def export_torch_onnx(case):
    """torch.onnx's ``ONNXProgram`` (torch.export's program, translated by onnxscript)."""
    import torch

    return torch.onnx.export(case.model, case.args, dynamic_shapes=case.dynamic_shapes, dynamo=True, verbose=False)


def about_onnxport(case, result) -> tuple[Any, dict, dict[str, int]]:
    """The ONNX model, what to report of the export, and the upper bounds below ``LONG_FRAMES`` it states on
    dims (``result.constraints``, each said in a warning and in the model's metadata)."""
    info: dict[str, Any] = {}
    strategy = getattr(result.captured, "strategy", None)
    if strategy and strategy != "non-strict":
        info["how"] = f"captured by the {strategy} strategy"
    constraints = [str(c) for c in result.constraints]
    if constraints:
        info["constraints"] = constraints
    bounds = {k: v for k, v in _upper_bounds(constraints).items() if v < LONG_FRAMES}
    if bounds:
        info["bound_where"] = "result.constraints, a warning, the ONNX model's metadata"
    return result.model_proto, info, bounds


def about_torch_onnx(case, program) -> tuple[Any, dict, dict[str, int]]:
    """The ONNX model, what to report, and the upper bounds below ``LONG_FRAMES`` that torch.export put on the
    input dims (the program's ``range_constraints``; the ONNX model does not carry them)."""
    import torch

    bounds: dict[str, int] = {}
    exported = getattr(program, "exported_program", None)
    if exported is not None:
        names = _dim_names(case)
        ranges = {str(k): v for k, v in exported.range_constraints.items()}
        placeholders = {n.name: n for n in exported.graph.nodes if n.op == "placeholder"}
        for position, input_name in enumerate(exported.graph_signature.user_inputs):
            value = placeholders[input_name].meta.get("val") if input_name in placeholders else None
            for axis, size in enumerate(getattr(value, "shape", ())):
                name = names.get((position, axis))
                found = ranges.get(str(size)) if isinstance(size, torch.SymInt) else None
                upper = _finite(found.upper) if found is not None else None
                if name and upper is not None and upper < LONG_FRAMES:
                    bounds[name] = min(upper, bounds.get(name, upper))
    info = {"bound_where": "the exported program's range_constraints only (not in the ONNX model)"} if bounds else {}
    return program.model_proto, info, bounds


def _finite(value) -> int | None:
    """A range's end as an int, or None where it is infinite."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number == number and abs(number) != float("inf") else None


EXPORT = {"onnxport": (export_onnxport, about_onnxport), "torch.onnx": (export_torch_onnx, about_torch_onnx)}


def _run(session, args) -> list:
    return session.run(None, _feed(session, args))


def worker(exporter: str, name: str) -> dict:
    """Export ``name`` with ``exporter`` and judge it: the example, the two other sets, then (the ESPnet
    encoders, only when right so far and no bound excludes it) batch 1 at ``LONG_FRAMES`` frames."""
    import torch

    speech_zoo = _setup()
    case = speech_zoo.build(name)
    sets = [("example", case.args)] + [(f"batch {a[0].shape[0]}, time {_time_of(case, a)}", a) for a in case.others]
    out: dict[str, Any] = {"name": name, "exporter": exporter, "toolkit": case.toolkit}
    export, about = EXPORT[exporter]
    start = time.perf_counter()
    try:
        exported = export(case)
    except Exception as e:  # noqa: BLE001 - a refusal is the finding
        root = e if exporter == "onnxport" else _root_cause(e)
        out.update(verdict="refused", seconds=round(time.perf_counter() - start, 1),
                   error=f"{type(root).__name__}: {_first_line(root)}",
                   where=_short(getattr(e, "where", None) or _user_frame(e)))
        return out
    seconds = round(time.perf_counter() - start, 1)
    proto, info, bounds = about(case, exported)
    out.update(seconds=seconds, nodes=_count_nodes(proto), **info)
    if bounds:
        out["bound"] = ", ".join(f"{k} <= {v}" for k, v in sorted(bounds.items()))
    try:
        session = _session(proto)
    except Exception as e:  # noqa: BLE001
        out.update(verdict="broken", error=f"onnxruntime cannot load it: {_first_line(e)}")
        return out
    fixed = _declared_fixed(session, case)
    if name in LONG and case.make is not None:
        long_args = case.make(1, LONG_FRAMES)
        over = {k: v for k, v in _sizes(case, long_args).items() if k in bounds and v > bounds[k]}
        if over:
            out["not_run"] = f"batch 1, time {LONG_FRAMES}: past the bound"
        else:
            sets.append((f"batch 1, time {LONG_FRAMES}", long_args))
    worst = 0.0
    for i, (label, args) in enumerate(sets):
        with torch.no_grad():  # eager first: its memory is freed before onnxruntime's arena grows
            expected = _flat(case.model(*args))
        try:
            got = _run(session, args)
        except Exception as e:  # noqa: BLE001
            out.update(verdict="broken", error=f"at {label}: onnxruntime: {_first_line(e)}", fixed=fixed)
            return out
        ok, err, what = compare(got, expected)
        del expected
        worst = max(worst, err) if err == err else worst
        if i == 0:
            out["latency_ms"] = _latency(session, _feed(session, args))
        if not ok:
            if i > 0 and not fixed and i <= len(case.others):
                what += "; right only at the example's sizes"
            out.update(verdict="wrong" if i == 0 else "broken", error=f"at {label}: {what}", fixed=fixed,
                       error_scaled=err)
            return out
    out.update(verdict="right (bound stated)" if bounds else "right", error_scaled=worst, sets=len(sets))
    return out


def _time_of(case, args: tuple) -> int:
    axes = next(iter(case.dynamic_shapes.values()))
    time_axis = max(axes)
    return int(args[0].shape[time_axis])


LONG = {"espnet_conformer", "espnet_e_branchformer", "espnet_transformer"}


# ============================================================================ parent side
def _cell(r: dict) -> str:
    verdict = r.get("verdict", "-")
    return f"**{verdict}**" if verdict.startswith("right") else verdict


def _toolkit(name: str) -> str:
    return name.split("_", 1)[0]


def _notes(r: dict) -> str:
    """What to say of one export beyond its verdict: the failure and its line, the bound and where it is
    stated, the constraints, the capture strategy, a set not run."""
    parts = []
    if r.get("verdict") not in (None, "right", "right (bound stated)"):
        text = r.get("error", "")
        if r.get("fixed"):
            text += f" (fixed in the ONNX inputs: {', '.join(r['fixed'])})"
        if r.get("where"):
            text += f"; at `{r['where']}`"
        parts.append(text)
    if r.get("bound"):
        parts.append(f"bound {r['bound']}, in {r.get('bound_where', '?')}")
    others = [c for c in r.get("constraints", []) if not (r.get("bound") and UPPER.search(c))]
    if others:
        parts.append("constraints " + ", ".join(f"`{c}`" for c in others))
    if r.get("not_run"):
        parts.append(f"not run at {r['not_run']}")
    if r.get("how"):
        parts.append(r["how"])
    return "; ".join(parts)


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
        f"{meta.get('finished')}; {_commits(meta, [r for n in names for r in results.get(n, {}).values()])}), "
        f"on {meta.get('machine')}, Python {meta.get('python')}; {versions}."
        + (" The streaming section at the end comes from a run of its own, named under its heading."
           if data.get("streaming", {}).get("results") else ""),
        "",
        *([meta["note"], ""] if meta.get("note") else []),
        f"{len(names)} models built from the toolkits' own classes (`tests/speech_zoo.py`: small configs, seeded "
        "random weights), batch and time dynamic, lengths as inputs where the model takes them, exported by "
        "`onnxport.to_onnx(model, args, dynamic_shapes=spec)` and by "
        "`torch.onnx.export(model, args, dynamic_shapes=spec, dynamo=True)`. Each export ran in its own process "
        f"(timeout {meta.get('timeout', '?')} s); its ONNX model ran in onnxruntime (one thread) against eager "
        "PyTorch at the example (batch 3) and at two other (batch, time) (batch 2 and 4, other lengths, unequal "
        f"within the batch), and the ESPnet encoders also at batch 1, {LONG_FRAMES:,} frames (past the 20,006 "
        "their positional table covers, where eager extends the table) unless the export states a bound below "
        f"that. A value is right when `|onnx - eager| <= {ATOL:g} * max(1, max|eager|) + {RTOL:g} * |eager|` "
        "(integers: equal).",
        "",
        "**right**: right at every input set. **right (bound stated)**: right at every set within a bound on a "
        "dim declared unbounded that the export states (onnxport: `result.constraints`, a warning and the ONNX "
        "model's metadata; torch.onnx: the range constraints of `onnx_program.exported_program`, which the ONNX "
        "model does not carry); the sets past it are not run. **wrong**: wrong numbers at the example. "
        "**broken**: exported, but onnxruntime cannot load or run it at some set, or it is right at the example "
        "and wrong at another set (a dim declared dynamic came out fixed, or right only at the example's "
        "sizes). **refused**: the export raised (its first line, and the toolkit's line where it is known). "
        "**timeout**, **crashed**: the process ran out of time, or died.",
        "",
        "| exporter | " + " | ".join(VERDICTS) + " |",
        "|---|" + "---|" * len(VERDICTS),
    ]
    for e in EXPORTERS:
        lines.append(f"| {e} | " + " | ".join(str(counts[e][v]) for v in VERDICTS) + " |")
    lines += ["", "Per model: export seconds (one export each, in its own process: a figure of this run, not a "
              "speed comparison) and node count (local functions inlined, subgraphs counted), as onnxport / "
              "torch.onnx. onnxruntime's latency, measured in each export's process, is kept in the run's cache "
              "and not shown: the two models did not run alternated in one process, so their times are not a "
              "fair comparison."]
    toolkits = list(dict.fromkeys(_toolkit(n) for n in names))
    for toolkit in toolkits:
        members = [n for n in names if _toolkit(n) == toolkit]
        lines += ["", f"## {toolkit}", "",
                  "| model | onnxport | torch.onnx | export s | nodes |",
                  "|---|---|---|---|---|"]
        for n in members:
            op, to = results.get(n, {}).get("onnxport", {}), results.get(n, {}).get("torch.onnx", {})
            lines.append(f"| `{n}` | {_cell(op)} | {_cell(to)} "
                         f"| {_fmt(op.get('seconds'))} / {_fmt(to.get('seconds'))} "
                         f"| {_fmt(op.get('nodes'))} / {_fmt(to.get('nodes'))} |")
        lines.append("")
        for n in members:
            lines.append(f"- `{n}`: {whats.get(n, '')}")
            for e in EXPORTERS:
                r = results.get(n, {}).get(e, {})
                note = _notes(r)
                if note:
                    lines.append(f"  - {e}, {r.get('verdict')}: {note}".replace("|", "\\|"))
    return "\n".join(lines) + "\n"


def _save(data: dict, cache: Path) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=".speech-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, default=str)
    os.replace(tmp, cache)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("--worker", "--stream-worker"):
        import speech_stream

        result = (worker if argv[0] == "--worker" else speech_stream.worker)(argv[1], argv[2])
        sys.stdout.write(RESULT + json.dumps(result, default=str) + "\n")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated model names (default: every model of the zoo and every "
                                       "streaming case)")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--timeout", type=int, default=300, help="seconds per export process (default 300)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--markdown", type=Path, default=DEFAULT_MARKDOWN)
    parser.add_argument("--fresh", action="store_true", help="start the sections run from an empty cache")
    parser.add_argument("--report-only", action="store_true", help="write the report from the cache")
    parser.add_argument("--streaming-only", action="store_true",
                        help="run the streaming section only, the other results kept from the cache")
    parser.add_argument("--no-streaming", action="store_true", help="run the models of the zoo only")
    parser.add_argument("--note", help="a paragraph the report prints under its first (kept in the cache)")
    parser.add_argument("--streaming-note", help="a paragraph the streaming section prints under its first")
    args = parser.parse_args(argv)

    import speech_stream

    speech_zoo = _setup()
    import speech_streaming

    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    names = list(speech_zoo.ZOO) if only is None else [n for n in only if n in speech_zoo.ZOO]
    stream_names = list(speech_streaming.CASES) if only is None else [n for n in only if n in speech_streaming.CASES]
    whats = {}
    for n in speech_zoo.ZOO:
        try:
            whats[n] = speech_zoo.build(n).what
        except Exception as e:  # noqa: BLE001
            whats[n] = f"(does not build: {_first_line(e)})"
    stream_whats = {}
    for n in speech_streaming.CASES:
        try:
            stream_whats[n] = speech_streaming.build(n).what
        except Exception as e:  # noqa: BLE001
            stream_whats[n] = f"(does not build: {_first_line(e)})"
    data = {"meta": {}, "results": {}}
    if args.cache.exists():
        data = json.loads(args.cache.read_text())
    if args.fresh and not args.report_only:
        if not args.streaming_only:
            data["meta"], data["results"] = {}, {}
        if not args.no_streaming:
            data.pop("streaming", None)
    if args.note is not None:
        data["meta"]["note"] = args.note
    if args.streaming_note is not None:
        data.setdefault("streaming", {"meta": {}, "results": {}})["meta"]["note"] = args.streaming_note
    if args.report_only and (args.note is not None or args.streaming_note is not None):
        _save(data, args.cache)
    exporters = [x.strip() for x in args.exporters.split(",") if x.strip()]
    if not args.report_only and not args.streaming_only and names:
        data["meta"].update(_versions())
        data["meta"]["command"] = "python benchmarks/speech.py " + " ".join(argv)
        data["meta"]["started"] = _now()
        data["meta"]["timeout"] = args.timeout
        for n in names:
            for e in exporters:
                if data["results"].get(n, {}).get(e):
                    continue
                r = run_one(n, e, args.timeout)
                data["results"].setdefault(n, {})[e] = r
                print(f"{time.strftime('%H:%M:%S')} {n} {e}: {r.get('verdict')} {r['wall']}s "
                      f"{(r.get('error') or '')[:150]}", flush=True)
                _save(data, args.cache)
        data["meta"]["finished"] = _now()
        _save(data, args.cache)
    if not args.report_only and not args.no_streaming:
        speech_stream.run(stream_names, exporters, args.timeout, data, lambda: _save(data, args.cache), argv)
    text = write_report(data, list(speech_zoo.ZOO) if only is None else names, whats)
    streaming = speech_stream.report(data, list(speech_streaming.CASES), stream_whats)
    if streaming:
        text += "\n" + "\n".join(streaming) + "\n"
    args.markdown.write_text(text)
    print(text.split("\n## ")[0])
    if streaming:
        print("\n".join(ln for ln in streaming if not ln.startswith("- `")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
