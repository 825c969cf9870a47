"""Popular third-party packages' models: onnxport.to_onnx against torch.onnx.export(dynamo=True).

The models are those of ``benchmarks/models_third_party.py`` (the packages' own classes, small configs, seeded
random weights, nothing downloaded), grouped by task: detection (torchvision's detectors where its compiled ops
load, transformers' RT-DETR and DETR), segmentation (segmentation-models-pytorch), image classification
(torchvision, timm), CLIP (transformers), speech (transformers, torchaudio, SpeechBrain, ESPnet) and image
generation (diffusers), with the dimensions a deployment varies dynamic. Each model is measured by
``benchmarks/compare.py``'s ``bench_model``: each exporter in a fresh process with a timeout, then both ONNX
models run in onnxruntime against eager PyTorch at other sizes of the dynamic dimensions.

Per exporter the verdict is ``ok``; ``refused`` (the export raised; its error's first line below the table);
``wrong`` (an output differs from eager, atol 1e-4 and rtol 1e-3, or the model does not run at another size);
``specialized`` (a dimension declared dynamic is a number in the ONNX model's inputs); ``timeout``;
``crashed`` (the export process died). Export seconds, node counts and their ratios (onnxport / torch.onnx)
beside them, and the ten slowest onnxport exports against the 60 s goal.

    OMP_NUM_THREADS=1 python benchmarks/popular_libraries.py [--models smp_unet,clip]
                                                             [--markdown benchmarks/THIRD_PARTY.md]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare  # noqa: E402  (models.py's table, which holds models_third_party's)
from compare import Measure  # noqa: E402

SUITE = {
    "detection": ["rt_detr", "rt_detr_v2", "detr_post_processing", "ssdlite320_mobilenet_v3_large",
                  "fasterrcnn_mobilenet_v3_large_320_fpn"],
    "segmentation": ["smp_unet", "smp_fpn"],
    "image classification": ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "timm_convnext_atto",
                             "timm_efficientvit_b0", "timm_vit_tiny"],
    "CLIP": ["clip"],
    "speech": ["wav2vec2", "torchaudio_wav2vec2", "torchaudio_conformer", "speechbrain_ecapa_tdnn",
               "espnet_conformer"],
    "image generation": ["diffusers_unet", "diffusers_vae_decoder"],
}
GOAL_SECONDS = 60.0
PACKAGES = ("torch", "onnxruntime", "onnx", "onnxscript", "transformers", "torchvision", "timm",
            "segmentation_models_pytorch", "diffusers", "torchaudio", "speechbrain", "espnet")


def verdict(m: Measure) -> str:
    """``ok``, ``refused``, ``wrong``, ``specialized``, ``timeout`` or ``crashed`` for one exporter's measure."""
    if m.timed_out:
        return "timeout"
    if not m.ok:
        return "crashed" if m.error.startswith("export process failed") else "refused"
    if not m.correct:
        return "wrong" + (" (specialized)" if m.specialized else "")
    return "specialized" if m.specialized else "ok"


def _f(x: float, digits: int = 1) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _ratio(a: float, b: float) -> str:
    return "-" if not b or math.isnan(a) or math.isnan(b) else f"{a / b:.2f}"


def _md(cells: list[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |\n"


def _table(head: list[str], rows: list[list[str]]) -> str:
    return _md(head) + "|" + "---|" * len(head) + "\n" + "".join(_md(r) for r in rows)


def verdict_table(results: dict[str, tuple[str, Measure, Measure]]) -> str:
    """One row per model: task, verdicts, export seconds, nodes, ratios, max abs errors, onnxport's guards."""
    head = ["task", "model", "onnxport", "torch.onnx", "export s", "torch.onnx s", "ratio", "nodes",
            "torch.onnx nodes", "ratio", "max abs", "torch.onnx max abs", "onnxport guards"]
    rows = []
    for name, (task, o, t) in results.items():
        rows.append([task, f"`{name}`", f"**{verdict(o)}**", f"**{verdict(t)}**", _f(o.seconds), _f(t.seconds),
                     _ratio(o.seconds, t.seconds), compare._nodes_cell(o), compare._nodes_cell(t),
                     _ratio(o.nodes, t.nodes) if o.ok and t.ok else "-",
                     f"{o.max_abs:.1e}" if o.ok and not math.isnan(o.max_abs) else "-",
                     f"{t.max_abs:.1e}" if t.ok and not math.isnan(t.max_abs) else "-", o.guards or "-"])
    return _table(head, rows)


def totals(results: dict[str, tuple[str, Measure, Measure]]) -> str:
    """Counts of each verdict per exporter, and the geometric means of the ratios over the models both got right."""
    lines = []
    for who, index in (("onnxport", 1), ("torch.onnx", 2)):
        counts: dict[str, int] = {}
        for entry in results.values():
            v = verdict(entry[index]).split(" ")[0]
            counts[v] = counts.get(v, 0) + 1
        lines.append(f"- {who}: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: -kv[1])))
    both = [(o, t) for _, o, t in results.values() if verdict(o) == "ok" and verdict(t) == "ok"]

    def geo(xs):
        xs = [x for x in xs if x > 0 and not math.isnan(x)]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan

    lines.append(f"- over the {len(both)} models both exporters got right, geometric mean of onnxport / torch.onnx: "
                 f"export seconds {_f(geo([o.seconds / t.seconds for o, t in both]), 2)}, "
                 f"nodes {_f(geo([o.nodes / t.nodes for o, t in both]), 2)}")
    return "\n".join(lines) + "\n"


def slowest(results: dict[str, tuple[str, Measure, Measure]], count: int = 10) -> str:
    """The ``count`` slowest onnxport exports, torch.onnx's seconds beside them, against the goal."""
    done = sorted(((n, o, t) for n, (_, o, t) in results.items() if o.ok), key=lambda r: -r[1].seconds)[:count]
    rows = [[f"`{n}`", _f(o.seconds), _f(o.capture), _f(t.seconds) if t.ok else f"- ({verdict(t)})",
             _ratio(o.seconds, t.seconds) if t.ok else "-", "yes" if o.seconds <= GOAL_SECONDS else "**no**"]
            for n, o, t in done]
    return _table(["model", "onnxport s", "of which torch.export capture s", "torch.onnx s", "ratio",
                   f"within {GOAL_SECONDS:.0f} s"], rows)


def failures(results: dict[str, tuple[str, Measure, Measure]]) -> str:
    """Each refusal, wrong result or timeout, with its error's first lines, onnxport's first."""
    out = []
    for who, index in (("onnxport", 1), ("torch.onnx", 2)):
        for name, entry in results.items():
            m, other = entry[index], entry[3 - index]
            v = verdict(m)
            if v == "ok":
                continue
            mark = " (the other exporter: " + verdict(other) + ")"
            text = m.error or "no message"  # the innermost cause; then the exporter's own message, if another
            if m.detail and m.detail.splitlines()[0] != m.error:
                text += "\n" + "\n".join(m.detail.splitlines()[:3])
            if v.startswith("wrong"):
                text = (m.error or f"max abs error {m.max_abs:.2e} at other sizes") + (
                    f"; inputs fixed: {', '.join(m.specialized)}" if m.specialized else "")
            if v == "specialized":
                text = "inputs fixed: " + ", ".join(m.specialized)
            out.append(f"- **{who}** {v} on `{name}`{mark}:\n\n  ```\n  "
                       + "\n  ".join(line[:240] for line in text.splitlines()[:4]) + "\n  ```\n")
    return "".join(out) or "None.\n"


def _versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name.replace('_', '-'))}")
        except importlib.metadata.PackageNotFoundError:
            module = sys.modules.get(name)
            if module is not None and getattr(module, "__version__", None):
                found.append(f"{name} {module.__version__}")
    return ", ".join(found)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def report(results, skipped, command: str, seconds: float, timeout: int) -> str:
    """The markdown page: how it was measured, the verdicts, totals, failures and the slowest exports."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    intro = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in one run of `{command}` "
        f"({seconds / 60:.1f} min) at commit {_commit()}, on a machine with {os.cpu_count()} cores and "
        f"24 GiB, **machine shared with other work during this run** (load average at the end: {load}): the "
        f"export seconds are inflated, more for the longer exports. Versions: {_versions()}. Both exporters at "
        f"their default settings (onnxport: opset 20, optimize=True; torch.onnx.export: dynamo=True), each export "
        f"in a fresh process after one warm-up export of a tiny model, {timeout} s timeout. The models are "
        f"`benchmarks/models_third_party.py`'s (the packages' own classes, small configs, seeded random weights, "
        f"nothing downloaded), measured by `benchmarks/compare.py`'s `bench_model`.\n\n"
        "Verdicts: **ok** (right at the other input sets: other sizes of every dynamic dimension, atol 1e-4, "
        "rtol 1e-3 against eager PyTorch, in onnxruntime); **refused** (the export raised); **wrong** (an output "
        "differs or the model does not run at another size); **specialized** (a dimension declared dynamic is a "
        "number in the model's inputs); **timeout**; **crashed**. Export seconds: the export call's wall time. "
        "Nodes: operator nodes of the main graph, subgraphs and local functions (a call of a local function is "
        "shown as \"+N calls\"). Ratios are onnxport / torch.onnx (lower is better). onnxport guards: the "
        "conditions on sizes the trace relies on, proved over the declared sizes, kept (torch's 0/1 "
        "specializations) or adopted as constraints.\n")
    return ("# Popular third-party models: onnxport vs torch.onnx.export (dynamo=True)\n\n" + intro + "\n"
            + verdict_table(results) + "\n" + totals(results)
            + "".join(f"- `{n}` not measured: {why}\n" for n, why in skipped.items())
            + ("- torchvision's detectors need its compiled ops (nms, roi_align), which load beside torch >= 2.14 "
               "(`bash setup.sh --torch 2.15`); `--models` measures them there.\n"
               if any("compiled ops" in why for why in skipped.values()) else "")
            + "\n## Refusals and wrong results\n\n" + failures(results)
            + "\n## Slowest ten exports\n\nonnxport's export seconds (with its torch.export capture), torch.onnx's "
            f"beside them, against the goal of {GOAL_SECONDS:.0f} s per export.\n\n" + slowest(results))


def main(argv: list[str] | None = None) -> int:
    """Command line entry: measure the suite (or ``--models``), print the verdicts, write markdown on request."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: the whole suite)")
    parser.add_argument("--markdown", default=None, help="write the report to this path")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per export process (default 300)")
    parser.add_argument("--runs", type=int, default=20, help="onnxruntime runs per model for compare's latency")
    ns = parser.parse_args(argv)
    tasks = {name: task for task, names in SUITE.items() for name in names}
    names = [n for n in ns.models.split(",") if n] or list(tasks)
    unknown = [n for n in names if n not in compare.MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}")
    results, skipped, start = {}, {}, time.perf_counter()
    for name in names:
        print(f"[popular_libraries] {name}...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            ours, theirs = compare.bench_model(name, ns.runs, ns.timeout)
        except ImportError as e:  # the package, or its compiled ops, absent here
            skipped[name] = str(e)
            continue
        results[name] = (tasks.get(name, "other"), ours, theirs)
        print(f"[popular] {name}: onnxport {verdict(ours)} {_f(ours.seconds)} s, torch.onnx {verdict(theirs)} "
              f"{_f(theirs.seconds)} s ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    command = "OMP_NUM_THREADS=1 python benchmarks/popular_libraries.py" \
        + (f" --models {ns.models}" if ns.models else "") + (f" --markdown {ns.markdown}" if ns.markdown else "")
    text = report(results, skipped, command, time.perf_counter() - start, ns.timeout)
    print(text)
    if ns.markdown:
        Path(ns.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
