"""A model's graphs as inline SVG for an HTML page (``onnxport.show.report_html``).

The main graph is drawn by graphviz (``show.dot.graph_dot``, ``dot -Tsvg``) with its subgraphs
(``If`` branches, ``Loop``/``Scan`` bodies) named on the nodes holding them; each subgraph and each
local function follows in a collapsible ``<details>`` section of its own, drawn the same way. The
SVG is graphviz's, its XML prologue and DOCTYPE removed so that it sits inline in HTML (the page
loads nothing). Without graphviz, or for a graph over ``MAX_DRAWN_NODES`` nodes, a section says why
it is not drawn and holds the DOT text.
"""

from __future__ import annotations

import html
from typing import Any, Iterator

import onnx_ir as ir

from onnxport.errors import RenderError
from onnxport.show.dot import graph_dot, svg_text

#: a graph with more nodes than this is not drawn (graphviz takes over 10 s beyond); its DOT text is given instead
MAX_DRAWN_NODES = 1000


def graphs_html(model: ir.Model) -> str:
    """The HTML of ``model``'s graphs: the main graph's SVG, then one ``<details>`` per subgraph
    (named ``g1``, ``g2``... in the order met, as the nodes holding them say) and per local function.

    ``model``: an ``onnx_ir.Model`` (drawn as it is; pass one with inferred shapes to see them on
    the edges, ``onnxport.show.load``). Never raises for a missing graphviz: the page says so."""
    calls = frozenset(f.identifier() for f in model.functions.values())
    found = list(_subgraphs(model))
    names = {id(g): name for name, _, g in found}
    parts = [_drawing(model.graph, calls, names)]
    for name, title, graph in found:
        parts.append(_details(f"subgraph {name}: {title}", _drawing(graph, calls, names), open_=False))
    for f in model.functions.values():
        title = f"function {f.domain}.{f.name}" + (f"({', '.join(f.attributes)})" if f.attributes else "")
        parts.append(_details(title, _drawing(f, calls, names), open_=False))
    return "\n".join(parts)


def _subgraphs(model: ir.Model) -> Iterator[tuple[str, str, ir.Graph]]:
    """``(name, title, graph)`` of every subgraph of the main graph and the local functions, depth
    first: ``title`` says the node and attribute holding it and its nesting level."""
    count = 0

    def walk(graph: Any, where: str, level: int) -> Iterator[tuple[str, str, ir.Graph]]:
        nonlocal count
        for node in graph:
            for attr in node.attributes.values():
                if attr.is_ref() or attr.type not in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
                    continue
                graphs = [attr.value] if attr.type == ir.AttributeType.GRAPH else list(attr.value)
                for i, sub in enumerate(graphs):
                    count += 1
                    at = attr.name if attr.type == ir.AttributeType.GRAPH else f"{attr.name}[{i}]"
                    title = f"{node.op_type} {node.name or ''} .{at} in {where} (level {level})".replace("  ", " ")
                    yield f"g{count}", title, sub
                    yield from walk(sub, f"g{count}", level + 1)

    yield from walk(model.graph, "the main graph", 1)
    for f in model.functions.values():
        yield from walk(f, f"function {f.name}", 1)


def _drawing(graph: Any, calls: frozenset, names: dict) -> str:
    """One graph as inline SVG, or a note saying why not with its DOT text."""
    dot = graph_dot(graph, calls=calls, names=names)
    nodes = sum(1 for _ in graph)
    if nodes > MAX_DRAWN_NODES:
        return _undrawn(f"{nodes} nodes: not drawn (over {MAX_DRAWN_NODES}); `onnxport plot` draws it to a file", dot)
    try:
        svg = svg_text(dot)
    except RenderError as e:
        return _undrawn(f"{e.summary}" + (f" ({e.hint})" if e.hint else ""), dot)
    return f'<div class="graph">{inline_svg(svg)}</div>'


def inline_svg(svg: str) -> str:
    """graphviz's SVG document as an element to place in HTML: from ``<svg`` on (no XML prologue,
    DOCTYPE or comments before it)."""
    start = svg.find("<svg")
    return svg[start:].strip() if start >= 0 else svg


def _undrawn(why: str, dot: str) -> str:
    return (f'<p class="note">{html.escape(why)}</p>'
            + _details("DOT text", f"<pre>{html.escape(dot)}</pre>", open_=False))


def _details(summary: str, body: str, *, open_: bool) -> str:
    return (f"<details{' open' if open_ else ''}><summary>{html.escape(summary)}</summary>\n"
            f"{body}\n</details>")
