"""The streaming section of ``benchmarks/speech.py``: toolkits' streaming steps exported by onnxport and by
torch.onnx, each ONNX model judged over the chunk loop by ``onnxport.check_stream``.

The cases are ``tests/speech_streaming.py``'s: each toolkit's streaming call wrapped as ``forward(chunk,
*states) -> (*outputs, *new_states)``, exported with the same example, dynamic shapes and ONNX names by

* ``onnxport``: ``onnxport.to_onnx(model, example, dynamic_shapes=spec, input_names=..., output_names=...)``;
* ``torch.onnx``: ``torch.onnx.export(model, example, dynamic_shapes=spec, input_names=..., output_names=...,
  dynamo=True)``.

Each ONNX model then runs as a stream: ``onnxport.check_stream(onnx_model, model, states=..., initial=...,
make_step=..., steps=6, batches=..., chunk_lengths=...)``: six chunks from the toolkit's initial state, each
side feeding back its own states, at each pair of the case's batch sizes and chunk lengths (where the ONNX
model has those dims named), every output of every step judged against eager PyTorch by the check's rule.
Verdicts: ``right`` (every output of every step of every stream); ``wrong`` (a step's numbers differ:
silently, onnxruntime ran); ``broken`` (onnxruntime cannot load or run it at some step, its state outputs
cannot feed its state inputs, or a dim declared dynamic came out fixed: onnxruntime's error at the other
size); ``refused`` (the export raised); ``timeout``; ``crashed``.
"""

from __future__ import annotations

import math
import time
from typing import Any

STEPS = 6
VERDICTS = ("right", "wrong", "broken", "refused", "timeout", "crashed")


# ============================================================================ worker side
def _export(exporter: str, case):
    if exporter == "onnxport":
        import onnxport

        result = onnxport.to_onnx(case.model, case.example, dynamic_shapes=case.dynamic_shapes,
                                  input_names=case.input_names, output_names=case.output_names)
        return result.model_proto, {"constraints": [str(c) for c in result.constraints]} if result.constraints else {}
    import torch

    program = torch.onnx.export(case.model, case.example, dynamic_shapes=case.dynamic_shapes,
                                input_names=case.input_names, output_names=case.output_names, dynamo=True,
                                verbose=False)
    return program.model_proto, {}


def _dims(proto) -> dict[str, tuple]:
    """Input name -> its dims (int, or the dim_param's name, or None)."""
    out = {}
    for v in proto.graph.input:
        shape = v.type.tensor_type.shape
        out[v.name] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in shape.dim)
    return out


def _fixed(dims: dict[str, tuple], case) -> list[str]:
    """Dims declared dynamic that the ONNX model's inputs fix to a number."""
    return [f"{name}[{axis}] ({dim}) = {dims[name][axis]}" for name, axes in case.declared.items() if name in dims
            for axis, dim in axes.items() if axis < len(dims[name]) and isinstance(dims[name][axis], int)]


def _named(dims: dict[str, tuple], case, axis: int) -> str | None:
    """The dim_param of the first fresh input at ``axis`` where the case declares it dynamic."""
    first = case.input_names[0]
    declared = case.declared.get(first, {})
    value = dims.get(first, ())[axis] if axis < len(dims.get(first, ())) else None
    return value if axis in declared and isinstance(value, str) else None


def _other_size_error(session, case) -> str | None:
    """onnxruntime's error at the first step of a stream at each of the case's other (batch, chunk), run where
    a dim declared dynamic came out fixed (None where every one runs)."""
    for b in case.batches:
        for c in case.chunk_lengths:
            if (b, c) == (case.batches[0], case.chunk_lengths[0]):
                continue
            feeds = {**case.make_step(0, b, c), **case.initial(b)}
            try:
                session.run(None, {i.name: feeds[i.name].numpy() for i in session.get_inputs()})
            except Exception as e:  # noqa: BLE001 - the runtime's refusal is the finding
                return f"at batch {b}, chunk {c}: onnxruntime: {_line(e)}"
    return None


def _line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return (lines[0] if lines else type(e).__name__)[:240]


def _where(check) -> str:
    step = check.inputs.rpartition(" step ")[2]
    return f"{check.sizes or 'the example sizes'}, step {step}, {check.output}"


def judge(report, fixed: list[str], other_error: str | None) -> dict:
    """The verdict of a ``StreamReport`` and what to say of it."""
    floats = [e for row in report.per_step.values() for e in row if not math.isnan(e)]
    out: dict[str, Any] = {"streams": [s for _, s, _ in report.streams], "compared": len(report.checks),
                           "worst": max(floats) if floats else None}
    bad = report.first_failure
    if bad is None and not fixed:
        out["verdict"] = "right"
        return out
    if bad is not None:
        note = bad.note or ""
        runtime = note.startswith("onnxruntime failed") or "ONNX outputs for" in note
        if note.startswith("eager PyTorch failed"):
            out.update(verdict="crashed", error=f"at {_where(bad)}: {note}")
        else:
            what = note if note else f"error {bad.max_rel:.1e} of its scale (limit {bad.limit:.1e})"
            first = min(int(c.inputs.rpartition(" step ")[2]) for c in report.checks if not c.ok)
            right_before = f"; right at steps 0 to {first - 1}" if first > 0 else ""
            out.update(verdict="broken" if runtime else "wrong", error=f"at {_where(bad)}: {what}{right_before}")
        if fixed:
            out["fixed"] = fixed
        return out
    out.update(verdict="broken", fixed=fixed,
               error=other_error or "a dim declared dynamic is fixed in the ONNX inputs")
    return out


def worker(exporter: str, name: str) -> dict:
    """Export the streaming case ``name`` with ``exporter`` and judge its ONNX model over the chunk loop."""
    import onnxport
    from onnxport.errors import ValidationError

    import speech_common as speech
    speech._setup()
    import speech_streaming

    case = speech_streaming.build(name)
    out: dict[str, Any] = {"name": name, "exporter": exporter, "toolkit": case.toolkit}
    start = time.perf_counter()
    try:
        proto, info = _export(exporter, case)
    except Exception as e:  # noqa: BLE001 - a refusal is the finding
        root = e if exporter == "onnxport" else speech._root_cause(e)
        out.update(verdict="refused", seconds=round(time.perf_counter() - start, 1),
                   error=f"{type(root).__name__}: {speech._first_line(root)}",
                   where=speech._short(getattr(e, "where", None) or speech._user_frame(e)))
        return out
    out.update(seconds=round(time.perf_counter() - start, 1), nodes=speech._count_nodes(proto), **info)
    try:
        session = speech._session(proto)
    except Exception as e:  # noqa: BLE001
        out.update(verdict="broken", error=f"onnxruntime cannot load it: {speech._first_line(e)}")
        return out
    dims = _dims(proto)
    fixed = _fixed(dims, case)
    batch_dim, chunk_dim = _named(dims, case, 0), _named(dims, case, 1)
    start = time.perf_counter()
    try:
        report = onnxport.check_stream(proto, case.model, states=case.states, initial=case.initial,
                                       make_step=case.make_step, steps=STEPS,
                                       batches=case.batches if batch_dim else None,
                                       chunk_lengths=case.chunk_lengths if chunk_dim else None,
                                       batch_dim=batch_dim, chunk_dim=chunk_dim)
    except ValidationError as e:
        out.update(verdict="broken", error=f"the stream cannot run: {speech._first_line(e)}", fixed=fixed)
        return out
    out["check_seconds"] = round(time.perf_counter() - start, 1)
    out.update(judge(report, fixed, _other_size_error(session, case) if fixed else None))
    if out["verdict"] != "right":
        out["table"] = str(report)
    return out


# ============================================================================ parent side
def run(names: list[str], exporters: list[str], timeout: int, data: dict, save, argv: list[str]) -> None:
    """Run each case with each exporter in its own process (``speech.py --stream-worker``), its result
    in ``data["streaming"]`` as it comes (``save()`` writes the cache)."""
    import speech_common as speech

    section = data.setdefault("streaming", {"meta": {}, "results": {}})
    section["meta"].update(speech._versions())
    section["meta"]["command"] = "python benchmarks/speech.py " + " ".join(argv)
    section["meta"]["started"] = speech._now()
    section["meta"]["timeout"] = timeout
    for n in names:
        for e in exporters:
            if section["results"].get(n, {}).get(e):
                continue
            r = speech.run_one(n, e, timeout, flag="--stream-worker")
            section["results"].setdefault(n, {})[e] = r
            print(f"{time.strftime('%H:%M:%S')} stream {n} {e}: {r.get('verdict')} {r['wall']}s "
                  f"{(r.get('error') or '')[:150]}", flush=True)
            save()
    section["meta"]["finished"] = speech._now()
    save()


def _cell(r: dict) -> str:
    verdict = r.get("verdict", "-")
    return f"**{verdict}**" if verdict == "right" else verdict


def _reason(r: dict) -> str:
    if r.get("verdict") == "right":
        text = ""
    else:
        text = r.get("error", "")
        if r.get("fixed"):
            text += f" (fixed in the ONNX inputs: {', '.join(r['fixed'])})"
        where = r.get("where") or ""
        if where and where.split(" in ")[0].rpartition("/")[2] not in text:  # the line, unless the error names it
            text += f"; at `{where}`"
    if r.get("constraints"):
        text += ("; " if text else "") + "constraints " + ", ".join(f"`{c}`" for c in r["constraints"])
    return text.replace("|", "\\|").replace("\n", " ")


def report(data: dict, names: list[str], whats: dict[str, str]) -> list[str]:
    """The streaming section of SPEECH.md, from ``data["streaming"]``."""
    import speech_common as speech

    section = data.get("streaming")
    if not section or not section.get("results"):
        return []
    meta, results = section["meta"], section["results"]
    names = [n for n in names if n in results]
    exporters = speech.EXPORTERS
    counts = {e: {v: 0 for v in VERDICTS} for e in exporters}
    for n in names:
        for e in exporters:
            v = results[n].get(e, {}).get("verdict")
            if v in counts[e]:
                counts[e][v] += 1
    runs = [r for n in names for r in results[n].values()]
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    lines = [
        "## Streaming: over the chunk loop",
        "",
        f"From one run of `{meta.get('command')}` ({meta.get('started')} to {meta.get('finished')}; "
        f"{speech._commits(meta, runs)}), on {meta.get('machine')}, Python {meta.get('python')}; {versions}.",
        "",
        *([meta["note"], ""] if meta.get("note") else []),
        f"{len(names)} streaming steps from the toolkits' own classes (`tests/speech_streaming.py`, the wrappers "
        "the streaming tests export: tiny configs, seeded random weights), each wrapped as `forward(chunk, "
        "*states) -> (*outputs, *new_states)` and exported by onnxport and by torch.onnx (`dynamo=True`) with the "
        "same example, dynamic shapes and ONNX names, each export in its own process (timeout "
        f"{meta.get('timeout', '?')} s). Each ONNX model then ran as a stream, `onnxport.check_stream(onnx_model, "
        f"model, states=..., initial=..., make_step=..., steps={STEPS}, ...)`: {STEPS} chunks from the toolkit's "
        "initial state, onnxruntime feeding back its own states and eager PyTorch its own, at each pair of the "
        "case's batch sizes and chunk lengths (two of each where the ONNX model has the dim named), every output "
        "of every step judged by the check's rule (float32 against eager PyTorch streaming in float64 from its own "
        "float64 states, within the bound the float32 run's own rounding sets; integers exactly).",
        "",
        "**right**: every output of every step of every stream. **wrong**: some step's numbers differ while "
        "onnxruntime runs (silently; the first such step, and the steps right before it). **broken**: onnxruntime "
        "cannot load or run it at some step, its state outputs cannot feed its state inputs, or a dim declared "
        "dynamic came out fixed (onnxruntime's error at the other size). **refused**: the export raised. "
        "**timeout**, **crashed**.",
        "",
        "| exporter | " + " | ".join(VERDICTS) + " |",
        "|---|" + "---|" * len(VERDICTS),
    ]
    for e in exporters:
        lines.append(f"| {e} | " + " | ".join(str(counts[e][v]) for v in VERDICTS) + " |")
    lines += ["", "Export seconds and node count (local functions inlined, subgraphs counted) of this run; streams: "
              "the (batch, chunk) each stream ran at; worst: the largest error over every output and step "
              "(relative to the output's scale; integers absolute).", "",
              "| model | exporter | verdict | export s | nodes | streams | worst | reason |",
              "|---|---|---|---|---|---|---|---|"]
    for n in names:
        for e in exporters:
            r = results[n].get(e, {})
            streams = "; ".join(s or "fixed" for s in r.get("streams", [])) or "-"
            worst = f"{r['worst']:.1e}" if r.get("worst") is not None else "-"
            lines.append(f"| `{n}` | {e} | {_cell(r)} | {speech._fmt(r.get('seconds'))} | "
                         f"{speech._fmt(r.get('nodes'))} | {streams} | {worst} | {_reason(r)} |")
    lines.append("")
    lines += [f"- `{n}`: {whats.get(n, '')}" for n in names]
    return lines
