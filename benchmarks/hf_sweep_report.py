"""``HF_SWEEP.md`` from the results cache of ``hf_sweep.py``: totals, failure categories per exporter
with their architectures, and one row per model type."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

FAILED = ("refused", "wrong", "specialized", "invalid", "timeout", "crashed")
STATUSES = ("ok",) + FAILED + ("stochastic",)
GOAL_SECONDS = 60  # per export on two cores


def category(result: dict) -> str:
    """A failure's kind: its status and its error with names of the model's own values taken out
    (numbers, symbols like ``s72``/``u0``, shapes), so that one cause across models is one row."""
    status = result.get("status", "?")
    error = (result.get("error") or "").strip()
    if status in ("timeout",):
        return "timeout"
    if status == "wrong":
        return "wrong: " + re.sub(r"output \d+: ", "", re.sub(r"[\d.e+-]{3,}", "N", error.split(": ", 1)[-1]))[:90]
    m = re.search(r"no ONNX translation for ([\w.]+)", error)
    if m:
        return f"{status}: no ONNX translation for {m.group(1)}"
    m = re.search(r"(GuardOnDataDependentSymNode|DataDependentOutputException|Could not guard on data-dependent"
                  r"|data-dependent)", error)
    if m:
        return f"{status}: data-dependent expression ({m.group(1)})"
    text = re.sub(r"\b[su]\d+\b", "s", error)  # torch's symbols
    text = re.sub(r"\d+", "N", text)
    text = re.sub(r"'[^']{40,}'", "'...'", text)
    text = re.sub(r"\s+", " ", text)
    return f"{status}: {text[:110]}"


def _cell(result: dict | None) -> str:
    if not result:
        return "-"
    status = result["status"]
    if status == "ok":
        return "OK"
    error = (result.get("error") or "").replace("|", "\\|").replace("\n", " ")
    return f"{status}: {error[:100]}"


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "-"


def write_report(data: dict, types: list[str], exporters: list[str]) -> str:
    """The markdown report of ``data`` (the cache) over ``types``."""
    meta, results = data["meta"], data["results"]
    probes = {t: results.get(t, {}).get("probe") for t in types}
    built = [t for t in types if (probes[t] or {}).get("status") == "built"]
    probe_status = Counter((p or {}).get("status", "not run") for p in probes.values())
    lines = [
        "# Every architecture transformers ships, exported three ways",
        "",
        f"transformers {meta.get('transformers')}, torch {meta.get('torch')}, onnxruntime {meta.get('onnxruntime')}, "
        f"onnxscript {meta.get('onnxscript')}; onnxport at {meta.get('onnxport_commit')}; Python {meta.get('python')}. "
        f"Run {meta.get('started')} to {meta.get('finished', '?')} ({meta.get('hours', '?')} h), "
        f"`{meta.get('command', 'python benchmarks/hf_sweep.py')}`.",
        "",
        "Each model type of `CONFIG_MAPPING` gets a tiny config derived from its config class by generic rules "
        "and its base model (`AutoModel`'s class) with seeded random weights (`benchmarks/hf_tiny.py`); dims are "
        "dynamic where eager PyTorch runs at another size (batch always tried; text length, decoder length, "
        "image size, audio length). Every exporter runs in a fresh process; each model is compared with eager at "
        "the example sizes and at other sizes of its dynamic dims (`|onnx - eager| <= 1e-4 * max(1, max|eager|) "
        "+ 1e-3 * |eager|`; an exporter that returns the Python numbers of the output too, such as MaskFormer-Swin's "
        "feature map sizes, has them compared exactly). Verdicts: OK; refused (the export raised); wrong (an "
        "output differs); specialized "
        "(a dim declared dynamic came out fixed); invalid (onnxruntime cannot run it); timeout; crashed; "
        "stochastic (exported and run at both sizes, not compared: eager PyTorch differs from itself on the same "
        "inputs, a model drawing random numbers in its forward; left out of the judged count). A model whose forward "
        "takes its random draw as an argument (ViTMAE's `noise`, one value per patch) is given a seeded one as an "
        "input, and compared like any other.",
        "",
        "Weight matrices a model's own initialization leaves all zero (mixture-of-experts routers) are drawn "
        "from N(0, 0.02): with a zero router every expert scores alike and which experts eager PyTorch picks is "
        "its choice among ties. Where transformers' eager code takes another path when not traced "
        "(`torch.compiler.is_compiling()` false) and its outputs differ (marked *eager paths differ* in the "
        "config column; Aimv2's text model skips its causal mask under SDPA for a full attention mask), the "
        "reference is eager PyTorch run as traced, the program every exporter captures.",
        "",
        "## Totals",
        "",
        f"- model types: {len(types)}; built with a tiny config and run in eager on generic inputs: "
        f"**{len(built)}**; " + ", ".join(f"{k}: {v}" for k, v in sorted(probe_status.items()) if k != "built"),
        "",
        "| exporter | " + " | ".join(STATUSES) + " | OK of built | OK of judged |",
        "|---|" + "---|" * (len(STATUSES) + 2),
    ]
    counts = {}
    judged = sum(1 for t in built if not probes[t].get("stochastic"))
    for e in exporters:
        c = Counter((results.get(t, {}).get(e) or {}).get("status", "not run") for t in built)
        counts[e] = c
        lines.append(f"| {e} | " + " | ".join(str(c.get(s, 0)) for s in STATUSES) +
                     f" | {c.get('ok', 0)} / {len(built)} ({_pct(c.get('ok', 0), len(built))})"
                     f" | **{c.get('ok', 0)} / {judged} ({_pct(c.get('ok', 0), judged)})** |")
    if "onnxport" in exporters:
        ours = {t for t in built if (results[t].get("onnxport") or {}).get("status") == "ok"}
        for e in exporters:
            if e == "onnxport":
                continue
            theirs = {t for t in built if (results[t].get(e) or {}).get("status") == "ok"}
            lines.append("")
            lines.append(f"- OK with onnxport and not with {e}: {len(ours - theirs)}; OK with {e} and not with "
                         f"onnxport: {len(theirs - ours)} ({', '.join(sorted(theirs - ours)[:40]) or 'none'})")
    for e in exporters:
        groups = defaultdict(list)
        for t in built:
            r = results.get(t, {}).get(e)
            if r and r["status"] not in ("ok", "stochastic"):
                groups[category(r)].append(t)
        lines += ["", f"## Failures of {e}: {sum(len(v) for v in groups.values())}", ""]
        if not groups:
            lines.append("none")
            continue
        lines += ["| count | category | architectures |", "|---|---|---|"]
        for cat, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            shown = ", ".join(members[:12]) + (f" and {len(members) - 12} more" if len(members) > 12 else "")
            lines.append(f"| {len(members)} | {cat.replace('|', '/')} | {shown} |")
    if "onnxport" in exporters:
        stated = [(t, r) for t in built if (r := results.get(t, {}).get("onnxport")) and r.get("constraints")]
        settled = [(t, r) for t in built if (r := results.get(t, {}).get("onnxport")) and r.get("residue_classes")]
        lines += ["", f"## Constraints onnxport's exports state: {len(stated)}", "",
                  "Each is in the ONNX model's metadata and the export's warning; the comparison above is at sizes "
                  "the sweep picks, which may lie outside them.", ""]
        lines += [f"- {t} ({r['status']}): {'; '.join(r['constraints'])[:300]}" for t, r in stated] or ["none"]
        lines += ["", f"## Remainder conditions settled on every residue class: {len(settled)}", "",
                  "A branch on a remainder of sizes whose other residue classes were exported too: the same graph, "
                  "or the graphs joined under ONNX If on the sizes' remainders (`onnxport/remainder_sides.py`).", ""]
        lines += [f"- {t} ({r['status']}): {'; '.join(r['residue_classes'])[:300]}" for t, r in settled] or ["none"]
        branched = [(t, r) for t in built if (r := results.get(t, {}).get("onnxport")) and r.get("package_branches")]
        lines += ["", f"## Size branches of installed packages kept as torch's kind of condition: {len(branched)}", "",
                  "An `if` in transformers (or another installed package) on a size, traced where torch records it "
                  "as `!=` (`if seq == 1:` at seq 7 leaves `seq != 1`): the export keeps it, as torch keeps its own "
                  "\"these sizes differ\" assumptions, and no trace looks at the other side. The comparison above "
                  "is at sizes the sweep picks, which may not reach it.", ""]
        recorded = any("package_branches" in (results.get(t, {}).get("onnxport") or {}) for t in built)
        lines += [f"- {t} ({r['status']}): {'; '.join(r['package_branches'])[:300]}" for t, r in branched] or \
            [("none" if recorded else "not recorded: the run's commit did not record them")]
    for e in exporters:
        timed = sorted(((r["seconds"], t, r["status"]) for t in built if (r := results.get(t, {}).get(e))
                        and isinstance(r.get("seconds"), (int, float))), reverse=True)
        if not timed:
            continue
        over = sum(1 for sec, _, _ in timed if sec > GOAL_SECONDS)
        lines += ["", f"## Slowest ten exports of {e}", "",
                  f"Seconds from the export call to an onnxruntime session of its model (refusals: to the error), "
                  f"in a process of its own, the sweep's other job beside it; {len(timed)} timed, {over} over "
                  f"the goal of {GOAL_SECONDS} s. A timeout is not timed (see the failures above).", "",
                  "| model type | seconds | verdict |", "|---|---|---|"]
        lines += [f"| {t} | {sec:.1f} | {status} |" for sec, t, status in timed[:10]]
    lines += ["", "## Per architecture", "",
              "| model type | class | config | parameters | dynamic dims | " + " | ".join(exporters) + " |",
              "|---|---|---|---|---|" + "---|" * len(exporters)]
    for t in built:
        p = probes[t]
        dims = ", ".join(p.get("dims", {})) or "none"
        attempt = p.get("attempt", "") + (", *eager paths differ*" if p.get("eager_paths_differ") else "")
        row = [t, p.get("class", ""), attempt, f"{p.get('parameters', 0) / 1e6:.2f}M", dims]
        row += [_cell(results.get(t, {}).get(e)) for e in exporters]
        lines.append("| " + " | ".join(row) + " |")
    others = [t for t in types if (probes[t] or {}).get("status") != "built"]
    lines += ["", f"## Not built with a tiny config or generic inputs: {len(others)}", "",
              "| model type | status | why (each attempt) |", "|---|---|---|"]
    for t in others:
        p = probes[t] or {"status": "not run", "errors": []}
        why = "; ".join(dict.fromkeys(p.get("errors") or [""])).replace("|", "\\|")[:240]
        lines.append(f"| {t} | {p['status']} | {why} |")
    return "\n".join(lines) + "\n"
