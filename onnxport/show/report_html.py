"""The HTML report of an export: one self-contained page (inline CSS and SVG; no script, font,
stylesheet or picture loaded from anywhere) saying what the export decided.

``result_html(result)``: the graph (``show.html_graph``), the inputs and outputs with their dim
names, the constraints adopted with the user's line, the capture steps (applied, or skipped and
why), the optimizer's node counts, the step timings and the validation table (``show.report_sections``);
a result of several models (``parts``) has these once per model. ``failure_html(error)``: an
``ExportError``, the user's line, the fix and the capture steps tried.

Writing the page is the caller's (``ExportResult.report``, the CLI's ``--report-html``): this
module returns text.
"""

from __future__ import annotations

import datetime
import html
from typing import Any

from onnxport.show import report_sections as R
from onnxport.show.html_graph import graphs_html
from onnxport.show.load import load

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em 2em;
       color: #1d1d1f; background: #ffffff; line-height: 1.4; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em;
     border-bottom: 1px solid #ddd; } h3 { font-size: 1.0em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.9em; }
pre { background: #f7f7f7; padding: 0.6em; overflow: auto; max-height: 40em; }
details { margin: 0.4em 0; } summary { cursor: pointer; font-weight: 600; }
.graph { overflow: auto; max-height: 60em; border: 1px solid #eee; }
.graph svg { max-width: none; height: auto; }
.dim { color: #0b5cad; font-weight: 600; }
.ok { color: #1a7f37; font-weight: 600; } .fail { color: #c62828; font-weight: 600; }
.skip { color: #8a6d00; } .note { color: #555; font-style: italic; }
.meta { color: #555; font-size: 0.9em; }
"""


def page(title: str, body: str) -> str:
    """A whole HTML document: ``title`` (escaped) and ``body`` (HTML), the style inline."""
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"<h1>{html.escape(title)}</h1>\n<p class=\"meta\">written by onnxport, {made}</p>\n"
            f"{body}\n</body>\n</html>\n")


def result_html(result: Any, *, title: str = "onnxport export report") -> str:
    """The report page of ``result`` (an ``onnxport.ExportResult``; of each of its ``parts``).

    The graph needs graphviz's ``dot`` to be drawn; without it the page says so and holds the DOT
    text. Raises nothing of its own (``ShowInputError`` only for a result without a model)."""
    if result.model is None:
        body = []
        if getattr(result, "task", None):
            body.append(R.note(f"{result.task} from {result.source}"))
        for name, part in result.parts.items():
            body.append(f"<h2>{html.escape(name)}.onnx</h2>\n<div class=\"part\">{_model_sections(part, 3)}</div>")
        for label, report in getattr(result, "generation", ()):
            body.append(f"<h2>greedy decoding, {html.escape(str(label))}</h2>\n<pre>{html.escape(str(report))}</pre>")
        return page(title, "\n".join(body))
    return page(title, _model_sections(result, 2))


def _model_sections(result: Any, level: int) -> str:
    h = f"h{level}"
    loaded = load(result, infer_shapes=True)
    captured = getattr(result, "captured", None)
    sections = [
        ("inputs and outputs", R.signature_section(result)),
        ("constraints", R.constraints_section(result)),
        ("capture steps", R.steps_section(getattr(captured, "attempts", ()), getattr(captured, "strategy", None))
         if captured is not None else R.note("no capture recorded: a model loaded from a file")),
        ("optimizer", R.optimization_section(result)),
        ("validation", R.validation_section(getattr(result, "validation", None))),
        ("graph", "\n".join([R.note(n) for n in loaded.notes] + [graphs_html(loaded.root)])),
        ("timings", R.timings_section(result)),
    ]
    return "\n".join(f"<{h}>{html.escape(name)}</{h}>\n{body}" for name, body in sections if body)


def failure_html(error: BaseException, *, title: str = "onnxport export failed") -> str:
    """The report page of a failed export: the error (an ``ExportError``: its summary, the user's
    line, the fix, the detail) and the capture steps tried (``ExportError.attempts``)."""
    return page(title, "<h2>error</h2>\n" + R.error_section(error))
