"""plot_dot: DOT text parsed by graphviz (through its JSON layout), one DOT node per ONNX node,
clusters for subgraphs and functions, dotted edges for captured values, PNG/SVG rendering, and the
error raised when graphviz is not installed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import graphviz
import onnx
import pytest

import onnxport
from onnxport.show.dot import RenderError, quote
from show_models import ALL

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _layout(dot_text: str) -> dict:
    """graphviz's own parse of the DOT text: objects (clusters and nodes) and edges, by _gvid."""
    return json.loads(graphviz.Source(dot_text).pipe(format="json0"))


def _count_nodes(model: onnx.ModelProto) -> tuple[int, int]:
    """(ONNX nodes in all graphs and functions, subgraphs)."""
    nodes = subgraphs = 0

    def walk(ns):
        nonlocal nodes, subgraphs
        for n in ns:
            nodes += 1
            for a in n.attribute:
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    subgraphs += 1
                    walk(g.node)

    walk(model.graph.node)
    for f in model.functions:
        walk(f.node)
    return nodes, subgraphs


@pytest.mark.parametrize("name", sorted(ALL))
def test_structure(name):
    model = ALL[name]()
    layout = _layout(onnxport.plot_dot(model))
    objects = layout["objects"]
    op_nodes = [o for o in objects if "nodes" not in o and o["name"].startswith("n")]
    clusters = [o for o in objects if o["name"].startswith("cluster_g")]
    functions = [o for o in objects if o["name"].startswith("cluster_f")]
    n_nodes, n_subgraphs = _count_nodes(model)
    assert len(op_nodes) == n_nodes
    assert len(clusters) == n_subgraphs
    assert len(functions) == len(model.functions)
    assert {o["label"] for o in functions} == {f"function {f.domain}.{f.name}" for f in model.functions}
    shapes = {o["name"].rstrip("0123456789"): o["shape"] for o in objects if "nodes" not in o}
    assert shapes["in"] == "invhouse" and shapes["out"] == "house"
    if model.graph.initializer:
        assert shapes["init"] == "note"


def test_captured_values_dotted_and_nested_clusters():
    layout = _layout(onnxport.plot_dot(ALL["loop"]()))
    objects = {o["_gvid"]: o for o in layout["objects"]}
    by_label = {o.get("label"): o["_gvid"] for o in objects.values()}
    body = next(o for o in objects.values() if o["name"].startswith("cluster_g") and ".body" in o["label"])
    inner = [objects[i]["label"] for i in body.get("subgraphs", [])]
    assert sorted(inner) == ["If if_parity .else_branch (level 2)", "If if_parity .then_branch (level 2)"]
    x_in = by_label["x\\nfloat32[batch]"]
    acc_in = by_label["acc_in\\nfloat32[batch]"]
    add = by_label["Add"]
    into_add = {e["tail"]: e for e in layout["edges"] if e["head"] == add and e.get("style") != "invis"}
    assert set(into_add) == {x_in, acc_in}
    assert all(e.get("style") == "dotted" and e["label"] == "float32[batch]" for e in into_add.values())
    mod = by_label["Mod"]
    two = by_label["two\\nint64 2"]  # small initializer with its value
    styles = {e["tail"]: e.get("style") for e in layout["edges"] if e["head"] == mod}
    assert styles[two] == "dotted" and styles[by_label["i\\nint64[]"]] is None
    # graph inputs stay in the main graph: no cluster holds them
    assert all(x_in not in o.get("nodes", []) for o in objects.values())


def test_labels_attributes_constants_and_edge_types():
    text = onnxport.plot_dot(ALL["scan"]())
    layout = _layout(text)
    labels = {o["label"] for o in layout["objects"] if "nodes" not in o}
    assert "Scan\\nnum_scan_inputs=1" in labels
    assert "Constant\\nfloat32 2" in labels
    assert "init\\nfloat32[4] [0, 0, 0, 0]" in labels
    edge_labels = {e["label"] for e in layout["edges"]}
    assert {"float32[n, 4]", "float32[4]", "float32[]"} <= edge_labels
    plain = _layout(onnxport.plot_dot(ALL["scan"](), shapes=False))
    assert "float32[]" not in {e["label"] for e in plain["edges"]}  # Constant output: inferred only


def test_function_calls_point_to_their_function():
    layout = _layout(onnxport.plot_dot(ALL["function"]()))
    objects = {o["_gvid"]: o for o in layout["objects"]}
    calls = [i for i, o in objects.items() if o.get("shape") == "box3d"]
    assert len(calls) == 3  # two calls of ScaledTanh, one of Square inside it
    anchors = {i: o["label"] for i, o in objects.items() if o.get("shape") == "plaintext"}
    targets = sorted(anchors[e["head"]] for e in layout["edges"] if e["tail"] in calls and e["head"] in anchors)
    assert targets == ["ScaledTanh(alpha)", "ScaledTanh(alpha)", "Square"]
    assert any(o.get("label") == "Constant\\nvalue_float=@alpha" for o in objects.values())


@pytest.mark.parametrize("name", sorted(ALL))
def test_renders_png_and_svg(name, tmp_path):
    model = ALL[name]()
    png, svg = tmp_path / "m.png", tmp_path / "m.svg"
    text = onnxport.plot_dot(model, path=png)
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > 1000
    assert onnxport.plot_dot(model, path=svg) == text  # format from the suffix
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    svg_text = svg.read_text()
    for node in model.graph.node:
        assert f">{node.domain + '.' if node.domain else ''}{node.op_type}<" in svg_text
    piped = graphviz.Source(text).pipe(format="svg")
    assert ET.fromstring(piped).tag.endswith("svg")


def test_explicit_format_and_pdf(tmp_path):
    out = tmp_path / "picture.bin"
    onnxport.plot_dot(ALL["if"](), path=out, format="svg")
    assert ET.parse(out).getroot().tag.endswith("svg")
    pdf = tmp_path / "m.pdf"
    onnxport.plot_dot(ALL["if"](), path=pdf)
    assert pdf.read_bytes().startswith(b"%PDF")
    with pytest.raises(RenderError, match="format 'gif'"):
        onnxport.plot_dot(ALL["if"](), path=tmp_path / "m.gif", format="gif")


def test_without_graphviz(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    model = ALL["if"]()
    text = onnxport.plot_dot(model)  # the DOT text needs no graphviz
    assert text.startswith("digraph onnx {")
    with pytest.raises(RenderError) as e:
        onnxport.plot_dot(model, path=tmp_path / "m.png")
    assert isinstance(e.value, onnxport.ExportError)
    assert "`dot` is not installed" in str(e.value) and "apt-get install graphviz" in str(e.value)
    assert not (tmp_path / "m.png").exists()


def test_export_result_plot(tmp_path):
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    result = onnxport.to_onnx(M(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "batch"}})
    path = tmp_path / "r.svg"
    assert result.plot(str(path)) == onnxport.plot_dot(result)
    assert ET.parse(path).getroot().tag.endswith("svg")
    labels = {e["label"] for e in _layout(result.plot())["edges"]}
    assert "float32[batch, 3]" in labels


def test_quote_escapes():
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    layout = _layout("digraph g { x [label=" + quote('say "hi"\\ there') + "]; }")
    assert layout["objects"][0]["label"] == 'say "hi"\\\\ there'  # graphviz keeps the escaped backslash


def test_function_alone(tmp_path):
    square, scaled = ALL["function"]().functions
    layout = _layout(onnxport.plot_dot(scaled))
    clusters = [o for o in layout["objects"] if o["name"].startswith("cluster_f")]
    assert [c["label"] for c in clusters] == ["function custom.ScaledTanh"]
    ops = sorted(o["label"].split("\\n")[0] for o in layout["objects"]
                 if o["name"].startswith("n") and "nodes" not in o)
    assert ops == sorted(n.op_type if not n.domain else f"{n.domain}.{n.op_type}" for n in scaled.node)
    out = tmp_path / "f.svg"
    onnxport.plot_dot(square, path=out)
    assert ET.parse(out).getroot().tag.endswith("svg")
