"""The sections of the HTML report of an export (``onnxport.show.report_html``), each a function
returning an HTML fragment, every text from the model or the user escaped (``html.escape``).

Each reads the fields of an ``ExportResult`` (taken as any object with them: ``show`` comes before
the result in the pipeline): the inputs and outputs with their dim names, the constraints adopted
with the user's line, the capture steps, the optimizer's node counts, the validation table, and
for a failed export, the error.
"""

from __future__ import annotations

import dataclasses
import html
import math
from typing import Any, Iterable

import onnx_ir as ir

from onnxport.verify.report import EXACT, FLOAT64


def esc(value: Any) -> str:
    """``str(value)`` escaped for HTML text and attributes."""
    return html.escape(str(value), quote=True)


def table(head: Iterable[str], rows: Iterable[Iterable[Any]], *, cls: str = "") -> str:
    """An HTML table of ``rows`` (cells escaped; a cell given as ``Raw`` is placed as it is)."""
    head_html = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "\n".join("<tr>" + "".join(f"<td>{c.html if isinstance(c, Raw) else esc(c)}</td>" for c in row) + "</tr>"
                     for row in rows)
    return f'<table class="{esc(cls)}"><thead><tr>{head_html}</tr></thead>\n<tbody>\n{body}\n</tbody></table>'


@dataclasses.dataclass(frozen=True)
class Raw:
    """A table cell already in HTML."""

    html: str


def code(text: Any) -> Raw:
    return Raw(f"<code>{esc(text)}</code>")


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


# ------------------------------------------------------------------------------ inputs and outputs
def signature_section(result: Any) -> str:
    """The model's inputs and outputs (dtype, shape with the dims as named), the dims declared
    dynamic with their ranges, and torch's symbols with the names they were given."""
    g = result.model.graph
    rows = [("input", v.name, _dtype(v), _shape(v)) for v in g.inputs]
    rows += [("output", v.name, _dtype(v), _shape(v)) for v in g.outputs]
    out = [table(("", "name", "dtype", "shape"), rows, cls="signature")]
    declared = list(getattr(result.captured, "declared", None) or [])
    if declared:
        out.append("<h3>dims declared dynamic</h3>")
        out.append(table(("dim", "input", "axis", "range"), [
            (d.name, d.input_name, d.axis, _range(d)) for d in declared]))
    relations = dict(getattr(result.captured, "relations", None) or {})
    if relations:
        out.append(table(("dim", "is"), [(name, str(expr)) for name, expr in relations.items()]))
    if result.dim_names:
        out.append('<details><summary>torch symbols and their dim names</summary>')
        out.append(table(("torch symbol", "dim name"), [(str(k), v) for k, v in result.dim_names.items()]))
        out.append("</details>")
    return "\n".join(out)


def _range(d: Any) -> str:
    """A declared dim's range as given (``2..64``, ``2..``), or that none was given; a derived dim's
    (``4*T``) with its root's (``8.. (T: 2..)``)."""
    own = _span(d.min, d.max) if getattr(d, "ranged", False) else "none given"
    if getattr(d, "root", None) is None:
        return own
    given = d.root_min != 0 or d.root_max is not None
    return f"{own} ({d.root}: {_span(d.root_min, d.root_max) if given else 'none given'})"


def _span(lo: int, hi: int | None) -> str:
    return f"{lo}..{'' if hi is None else hi}"


def _dtype(v: ir.Value) -> str:
    return v.dtype.name.lower() if v.dtype is not None else "?"


def _shape(v: ir.Value) -> Raw:
    if v.shape is None:
        return Raw("?")
    dims = []
    for d in v.shape:
        if isinstance(d, int):
            dims.append(esc(d))
        else:
            dims.append(f'<span class="dim">{esc(d.value if getattr(d, "value", None) is not None else "?")}</span>')
    return Raw("[" + ", ".join(dims) + "]")


# ------------------------------------------------------------------------------ constraints
def constraints_section(result: Any) -> str:
    """The conditions adopted as constraints (the user's line, why, the sizes they exclude), then,
    collapsed, every other guard the export relies on (kept or proved)."""
    guards = list(result.guards)
    adopted = [g for g in guards if getattr(g, "adopted", False)]
    out = []
    if adopted:
        out.append(table(("constraint", "your line", "why", "excludes"), [
            (code(g.text), code(g.where) if g.where else "-", "; ".join(p for p in (g.method, g.note) if p) or "-",
             _excluded(g)) for g in adopted], cls="constraints"))
    else:
        out.append(note("no constraint adopted: the model is exported for every declared size"))
    others = [g for g in guards if not getattr(g, "adopted", False)]
    if others:
        out.append(f"<details><summary>other guards ({len(others)}: kept or proved)</summary>")
        out.append(table(("guard", "decided", "how", "your line"), [
            (code(g.text), str(g.status), g.method or "-", code(g.where) if g.where else "-") for g in others]))
        out.append("</details>")
    return "\n".join(out)


def _excluded(guard: Any) -> str:
    sizes = [", ".join(f"{k}={v}" for k, v in s.items()) if isinstance(s, dict) else str(s) for s in guard.excluded]
    return "; ".join(sizes[:6]) + (" ..." if len(sizes) > 6 else "") or "-"


# ------------------------------------------------------------------------------ capture steps
def steps_section(attempts: Iterable[Any], strategy: str | None = None) -> str:
    """The capture steps as they ran: each applied (what it did) or skipped (why), in order."""
    attempts = list(attempts)
    out = [note(f"captured {strategy}")] if strategy else []
    if not attempts:
        out.append(note("no capture step recorded"))
        return "\n".join(out)
    out.append(table(("#", "step", "", "what it did, or why it did not apply"), [
        (i, a.step, Raw('<span class="ok">applied</span>') if a.applied else Raw('<span class="skip">skipped</span>'),
         a.why or "-") for i, a in enumerate(attempts, 1)], cls="steps"))
    return "\n".join(out)


# ------------------------------------------------------------------------------ optimizer
def optimization_section(result: Any) -> str:
    """The optimizer's node counts, before and after; of each piece for a model exported in pieces."""
    rows = []
    for label, r in [("model", result)] + [(f"piece {iv}", r) for iv, r in getattr(result, "pieces", ())]:
        counts = getattr(r, "optimization", None) or {}
        if counts:
            before, after = counts["nodes_before"], counts["nodes_after"]
            change = f"{(after - before) / before:+.0%}" if before else "-"
            rows.append((label, before, after, change))
    if not rows:
        return note("no node counts recorded: the optimizer did not run (optimize=False), or the model was "
                    "loaded from a file")
    return table(("", "nodes before", "nodes after", "change"), rows, cls="optimization")


def timings_section(result: Any) -> str:
    timings = dict(getattr(result, "timings", None) or {})
    if not timings:
        return ""
    return table(("step", "seconds"), [(k, f"{v:.2f}") for k, v in timings.items()], cls="timings")


# ------------------------------------------------------------------------------ validation
_CHECK_HEAD = ("set", "sizes", "output", "shape", "scale", "ONNX-eager", "eager-f64", "ONNX-f64", "limit", "pass",
               "note")


def validation_section(report: Any) -> str:
    """The validation table, one row per output and input set (its sizes and why they were
    chosen; the errors relative to the output's scale, as ``ValidationReport`` prints them); a
    report of another kind (accuracy of a quantized model) as its text. None: a note."""
    if report is None:
        return note("validation was not run: call result.validate() first, or result.report(path, validate=True); "
                    "onnxport export validates unless --no-validate")
    checks = list(getattr(report, "checks", ()) or ())
    verdict = '<p class="ok">every comparison passed</p>' if report.ok else '<p class="fail">MISMATCH</p>'
    if not checks or not all(hasattr(c, "max_rel") and hasattr(c, "why") for c in checks):
        return verdict + f"<pre>{esc(report)}</pre>"
    rows = [_check_row(c) for c in checks]
    return verdict + table(_CHECK_HEAD, rows, cls="validation")


def _check_row(c: Any) -> tuple:
    def num(x: float) -> str:
        return "-" if x is None or math.isnan(x) else f"{x:.1e}"

    exact = c.basis == EXACT
    scale = "-" if exact or math.isnan(c.scale) else f"{c.scale:.2e}"
    error = "-" if math.isnan(c.max_abs) else (f"{c.max_abs:g}" if exact or math.isnan(c.scale) else num(c.max_rel))
    limit = num(c.limit) if c.basis == FLOAT64 else EXACT if exact else "dtype" if c.basis else "-"
    notes = [c.note] if c.note else []
    if c.basis not in ("", FLOAT64, EXACT):
        notes.append(c.basis)
    verdict = Raw('<span class="skip">skip</span>' if c.rejected else '<span class="ok">ok</span>' if c.ok
                  else '<span class="fail">FAIL</span>')
    sizes = f"{c.sizes} ({c.why})" if c.sizes and c.why else c.sizes or c.why
    return (c.inputs, sizes, c.output, "x".join(map(str, c.shape)) or "()", scale, error, num(c.eager_vs_float64),
            num(c.onnx_vs_float64), limit, verdict, "; ".join(notes))


# ------------------------------------------------------------------------------ a failed export
def error_section(error: BaseException) -> str:
    """What failed, the user's line, the fix, the capture steps tried, and the detail (collapsed)."""
    summary = getattr(error, "summary", None) or str(error).splitlines()[0]
    out = [f'<p class="fail">{esc(type(error).__name__)}: {esc(summary)}</p>']
    rows = []
    if getattr(error, "where", None):
        rows.append(("your line", code(error.where)))
    if getattr(error, "hint", None):
        rows.append(("fix", error.hint))
    if rows:
        out.append(table(("", ""), rows, cls="error"))
    out.append("<h3>capture steps tried</h3>")
    out.append(steps_section(getattr(error, "attempts", ())))
    detail = getattr(error, "detail", None)
    if detail:
        out.append(f"<details><summary>detail</summary><pre>{esc(detail)}</pre></details>")
    return "\n".join(out)
