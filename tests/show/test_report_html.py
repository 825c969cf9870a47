"""``ExportResult.report(path)`` and ``--report-html``: one self-contained HTML page with the graph as
inline SVG (subgraphs and local functions in collapsible sections), the dims as named, the adopted
constraints with the user's line, the capture steps, the optimizer's node counts and the validation
table; on a failed export, the error with the user's line, the fix and the steps tried. Nothing in
either page is loaded from the network; a headless Chromium renders it where one is installed."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import onnxport
from onnxport.cli import main
from onnxport.errors import DataDependentError
from onnxport.show import report_sections
from onnxport.show.report_html import failure_html

NETWORK = ('src="http', "src='http", 'href="http', "href='http", "@import", "url(http", "url('http", 'url("http')


class PairSums(torch.nn.Module):
    """Rows of ``x: [batch, time, 4]`` taken in pairs (``time`` even: an adopted constraint) and
    summed cumulatively with ``scan`` (a Scan body and a local function)."""

    def forward(self, x):
        pairs = x.reshape(x.shape[0], -1, 8)

        def step(acc, row):
            nxt = acc + row
            return [nxt, nxt.clone()]

        _, cum = torch.ops.higher_order.scan(step, [torch.zeros_like(pairs[:, 0])], [pairs.transpose(0, 1)],
                                             additional_inputs=[])
        return cum.transpose(0, 1)


RESHAPE_LINE = next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1)
                    if "pairs = x.reshape(" in line)


@pytest.fixture(scope="module")
def exported():
    """The export of ``PairSums`` and its validation (onnxruntime against eager at other sizes)."""
    with pytest.warns(UserWarning):
        result = onnxport.to_onnx(PairSums(), (torch.randn(2, 6, 4),),
                                  dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("time")}})
    return result.replace(validation=result.validate())


def assert_self_contained(text: str) -> None:
    for pattern in NETWORK:
        assert pattern not in text, pattern
    assert "<script" not in text and "<link" not in text


def svg_elements(text: str) -> list[ET.Element]:
    """Every inline ``<svg>`` element, parsed as XML (each must be well-formed)."""
    return [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", text, flags=re.S)]


def section(text: str, name: str) -> str:
    """The HTML between the ``<h2>name</h2>`` heading and the next ``<h2>``."""
    start = text.index(f"<h2>{name}</h2>")
    end = text.find("<h2>", start + 1)
    return text[start:end if end >= 0 else len(text)]


def test_report_of_an_export(exported, tmp_path):
    assert exported.validation.ok, exported.validation
    path = tmp_path / "r.html"
    written = exported.report(path)
    assert written == str(path.resolve())
    text = path.read_text()
    assert_self_contained(text)
    assert text.startswith("<!DOCTYPE html>")

    # the graph: the main graph, the Scan body and the local function, each an SVG of its own
    svgs = svg_elements(text)
    assert len(svgs) == 1 + 1 + len(exported.model.functions) == 3
    drawn = section(text, "graph")
    assert "<summary>subgraph g1: Scan" in drawn and "<summary>function onnxport.scan_body" in drawn

    # the inputs and outputs with their dims as named in the model
    signature = section(text, "inputs and outputs")
    for v in [*exported.model.graph.inputs, *exported.model.graph.outputs]:
        named = [html.escape(str(d.value)) for d in v.shape if not isinstance(d, int)]
        assert named and all(f'<span class="dim">{n}</span>' in signature for n in named), v
    assert '<span class="dim">batch</span>' in signature and '<span class="dim">time</span>' in signature

    # the adopted constraints with the user's line
    constraints = section(text, "constraints")
    assert exported.constraints
    for guard in exported.constraints:
        assert html.escape(guard.text) in constraints
    assert f"{Path(__file__).name}:{RESHAPE_LINE} in forward" in constraints

    # the capture steps as they ran
    steps = section(text, "capture steps")
    assert steps.count("<tr><td>") == len(exported.captured.attempts) > 0
    assert "decide the shape guards" in steps

    # the optimizer's counts, as recorded by the optimize stage
    counts = exported.optimization
    assert counts["nodes_before"] > counts["nodes_after"] > 0
    assert f"<td>{counts['nodes_before']}</td><td>{counts['nodes_after']}</td>" in section(text, "optimizer")

    # the validation table: one row per check, each check's set and verdict
    table = section(text, "validation")
    rows = re.findall(r"<tr><td>(.*?)</td>.*?<span class=\"(ok|fail|skip)\">", table)
    assert [r[0] for r in rows] == [c.inputs for c in exported.validation.checks]
    assert all(verdict == ("skip" if c.rejected else "ok" if c.ok else "fail")
               for (_, verdict), c in zip(rows, exported.validation.checks))


def test_report_says_when_validation_did_not_run_and_runs_it_when_asked(exported, tmp_path):
    unvalidated = exported.replace(validation=None)
    text = Path(unvalidated.report(tmp_path / "a.html")).read_text()
    assert "validation was not run" in section(text, "validation")
    assert 'class="validation"' not in text
    text = Path(unvalidated.report(tmp_path / "b.html", validate=True)).read_text()
    assert 'class="validation"' in text and "validation was not run" not in text


def test_report_without_graphviz(exported, tmp_path, monkeypatch):
    """Without ``dot`` the page is still written: it says why the graph is not drawn and holds its DOT text."""
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    text = Path(exported.report(tmp_path / "r.html")).read_text()
    assert "<svg" not in text
    assert "`dot` is not installed" in text and "digraph onnx {" in text


def test_report_of_a_graph_too_large_to_draw(exported, tmp_path, monkeypatch):
    """A graph over ``MAX_DRAWN_NODES`` nodes is not drawn: the page says so and holds its DOT text."""
    from onnxport.show import html_graph

    monkeypatch.setattr(html_graph, "MAX_DRAWN_NODES", len(exported.model.graph) - 1)
    text = Path(exported.report(tmp_path / "r.html")).read_text()
    assert f"{len(exported.model.graph)} nodes: not drawn" in text and "digraph onnx {" in text
    assert len(svg_elements(text)) == 2  # the Scan body and the local function, smaller, still drawn


def test_failure_page_escapes_what_it_shows():
    error = DataDependentError("size from <script>alert(1)</script>", where="m.py:3 in forward: y = x[:n] & 1",
                               hint="use <b>tensors</b>")
    text = failure_html(error)
    assert "<script>" not in text and "<b>" not in text
    assert "&lt;script&gt;" in text and "m.py:3 in forward: y = x[:n] &amp; 1" in text
    assert "no capture step recorded" in report_sections.error_section(error)


GOOD = textwrap.dedent('''
    import torch


    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 1) * 2


    def build():
        return Net()


    def example_inputs():
        return (torch.randn(2, 5),), {"x": {0: "batch", 1: "time"}}
''')

BAD = textwrap.dedent('''
    import torch


    class Net(torch.nn.Module):
        def forward(self, x):
            n = int(x.sum())
            if n > 3:
                return x[:n] * 2
            return x[:n]


    def build():
        return Net()


    def example_inputs():
        return (torch.ones(6, 3),), {"x": {0: "rows"}}
''')


def test_cli_export_writes_the_report(tmp_path):
    (tmp_path / "good.py").write_text(GOOD)
    out = tmp_path / "good.html"
    code = main(["export", str(tmp_path / "good.py") + ":build", "-o", str(tmp_path / "good.onnx"), "--quiet",
                 "--report-html", str(out)])
    assert code == 0
    text = out.read_text()
    assert_self_contained(text)
    assert svg_elements(text)
    assert '<span class="dim">batch</span>' in text and '<span class="dim">time</span>' in text
    assert 'class="validation"' in text and '<span class="fail">' not in text


def test_cli_export_failure_writes_the_error(tmp_path, capsys):
    (tmp_path / "bad.py").write_text(BAD)
    out = tmp_path / "bad.html"
    code = main(["export", str(tmp_path / "bad.py") + ":build", "-o", str(tmp_path / "bad.onnx"), "--quiet",
                 "--report-html", str(out)])
    assert code == 2
    assert "onnxport: error:" in capsys.readouterr().err
    assert not (tmp_path / "bad.onnx").exists()
    text = out.read_text()
    assert_self_contained(text)
    line = BAD.splitlines().index("        n = int(x.sum())") + 1
    assert f"bad.py:{line} in forward: n = int(x.sum())" in text
    assert "<td>fix</td>" in text
    steps = text[text.index("capture steps tried"):]
    assert '<span class="skip">skipped</span>' in steps and '<span class="ok">applied</span>' in steps
    assert "<td>trace</td>" in steps


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.mark.skipif(_chromium() is None, reason="no Chromium or Chrome executable on PATH to render the page with")
def test_chromium_renders_the_report(exported, tmp_path):
    """Headless Chromium opens the page with the network off (a proxy nothing answers): no console
    message, a screenshot not blank."""
    page = Path(exported.report(tmp_path / "r.html"))
    shot = tmp_path / "shot.png"
    proc = subprocess.run([_chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
                           "--v=0", "--proxy-server=127.0.0.1:9", "--window-size=1200,1600",
                           f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line]  # no script runs: any is an error
    assert not console, console
    from PIL import Image

    image = Image.open(shot).convert("L")
    low, high = image.getextrema()
    assert high - low > 64, "the screenshot is blank"


def test_cli_failure_page_not_written_is_said_on_the_terminal(tmp_path, capsys, monkeypatch):
    import onnxport.saving
    from onnxport.errors import SaveError

    def refuse(path, write):
        raise SaveError(f"cannot write {path}")

    monkeypatch.setattr(onnxport.saving, "write_file", refuse)
    (tmp_path / "bad.py").write_text(BAD)
    out = tmp_path / "bad.html"
    code = main(["export", str(tmp_path / "bad.py") + ":build", "-o", str(tmp_path / "bad.onnx"), "--quiet",
                 "--report-html", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert f"onnxport: --report-html {out} not written: cannot write" in err, err
    assert "onnxport: error:" in err
