"""``plot_dot``: a graphviz DOT picture of an ONNX model, optionally rendered by the ``dot`` program.

Drawing conventions:

- graph inputs: blue ``invhouse``; graph outputs: green ``house``; initializers: grey ``note``
  (small ones with their first values); operators: yellow boxes labelled with the op type and its
  key attributes (a ``Constant`` shows its value); local function calls: ``box3d``.
- edges carry the dtype and shape of the value (ONNX shape inference runs first).
- each subgraph (``If`` branches, ``Loop``/``Scan`` bodies) is a cluster nested in the cluster of
  the graph holding it, reached from its node by a dashed edge; each local function is a cluster.
- a value a subgraph reads from an enclosing scope arrives on a dotted edge.

DOT syntax: https://graphviz.org/doc/info/lang.html
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import onnx_ir as ir

from onnxport.errors import RenderError
from onnxport.show import summary as S
from onnxport.show.load import load

FORMATS = ("png", "svg", "pdf")
#: at most this many attributes are written in an operator's label
MAX_LABEL_ATTRS = 4
#: an attribute longer than this is cut in a label
MAX_LABEL_ATTR_CHARS = 36
#: leading values of constants and small initializers written in labels
LABEL_VALUES = 4

_STYLE = {
    "input": 'shape=invhouse, style=filled, fillcolor="#cfe8fc"',
    "output": 'shape=house, style=filled, fillcolor="#d5f5d5"',
    "init": 'shape=note, style=filled, fillcolor="#eeeeee"',
    "op": 'shape=box, style="rounded,filled", fillcolor="#fff2cc"',
    "call": 'shape=box3d, style=filled, fillcolor="#fde2d0"',
    "anchor": 'shape=plaintext, fontcolor="#555555"',
    "outer": 'shape=ellipse, style=dashed',
}

INSTALL_HINT = ("install graphviz so that `dot` is on PATH: `apt-get install graphviz` (Debian/Ubuntu), "
                "`brew install graphviz` (macOS), `conda install graphviz`, or https://graphviz.org/download/; "
                "the DOT text returned without `path` needs no graphviz")


def plot_dot(model: Any, *, path: str | os.PathLike | None = None, format: str = "png",
             shapes: bool = True) -> str:
    """Describe ``model`` as graphviz DOT text; with ``path``, also render it to a picture.

    Args:
        model: ``onnx.ModelProto``, ``onnx_ir.Model``, ``onnxport.ExportResult``,
            ``onnx.FunctionProto``, ``onnx_ir.Function``, a graph, or the path of an ``.onnx`` file.
        path: where to write the picture; nothing is rendered when None.
        format: ``png``, ``svg`` or ``pdf``. When ``path`` ends in another of these suffixes and
            ``format`` is left at ``png``, the suffix decides (``model.svg`` gives SVG).
        shapes: run ONNX shape inference (on a copy) so edges show dtype and shape.

    Returns:
        The DOT text (``digraph onnx { ... }``).

    Raises:
        RenderError: ``path`` was given and ``dot`` is not installed, the format is unknown, or
            ``dot`` failed. The DOT text itself never needs graphviz.
        onnxport.show.load.ShowInputError: ``model`` is of no accepted type or the file is unreadable.
    """
    loaded = load(model, infer_shapes=shapes)
    text = _DotWriter().write(loaded)
    if path is not None:
        render(text, path, format=_format_for(os.fspath(path), format))
    return text


def render(dot_text: str, path: str | os.PathLike, *, format: str = "png", timeout: float = 120.0) -> str:
    """Run ``dot -T<format> -o <path>`` on ``dot_text``; return ``path``.

    Raises:
        RenderError: ``dot`` is not on PATH (the message says how to install graphviz), the format
            is not one of ``FORMATS``, or ``dot`` exited with an error.
    """
    path = os.fspath(path)
    if format not in FORMATS:
        raise RenderError(f"cannot render to format {format!r}", hint=f"use one of {', '.join(FORMATS)}")
    _run_dot(dot_text, [f"-T{format}", "-o", path], f"render {path}", timeout,
             failed_hint="check the destination is writable and graphviz works (`dot -V`)")
    return path


def svg_text(dot_text: str, *, timeout: float = 120.0) -> str:
    """``dot -Tsvg`` of ``dot_text``: the SVG document as text.

    Raises:
        RenderError: ``dot`` is not on PATH (the message says how to install graphviz), or it
            failed or took longer than ``timeout`` seconds.
    """
    out = _run_dot(dot_text, ["-Tsvg"], "draw the graph", timeout, failed_hint="check graphviz works (`dot -V`)")
    return out.decode("utf-8", "replace")


def _run_dot(dot_text: str, options: list[str], what: str, timeout: float, *, failed_hint: str) -> bytes:
    """Run graphviz ``dot`` with ``options`` on ``dot_text``; its stdout. ``what`` ("render PATH", "draw
    the graph") is said in the ``RenderError`` raised when ``dot`` is missing, fails or times out."""
    exe = shutil.which("dot")
    if exe is None:
        raise RenderError(f"cannot {what}: the graphviz program `dot` is not installed", hint=INSTALL_HINT)
    try:
        proc = subprocess.run([exe, *options], input=dot_text.encode("utf-8"), capture_output=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RenderError(f"graphviz `dot` could not {what}: {e}",
                          hint="check graphviz works (`dot -V`) and the graph is not huge") from e
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise RenderError(f"graphviz `dot` failed to {what}: {err}", hint=failed_hint)
    return proc.stdout


def graph_dot(graph: Any, *, calls: frozenset = frozenset(), names: dict | None = None) -> str:
    """DOT text of one graph or function body alone (``ir.Graph`` or ``ir.Function``): its
    subgraphs are not drawn inside it, each node holding some says their names instead (``names``:
    ``id(subgraph)`` -> the name it is shown under); values read from an enclosing scope come from
    dashed ellipses named after them; calls of the local functions in ``calls`` (``(domain, name,
    overload)``) are drawn as ``box3d``. Needs no graphviz."""
    writer = _DotWriter(nested=False, calls=calls, names=names or {})
    out = writer.lines
    out.append("digraph onnx {")
    out.append('  graph [rankdir=TB, fontname="Helvetica", fontsize=11, newrank=true];')
    out.append('  node [fontname="Helvetica", fontsize=10];')
    out.append('  edge [fontname="Helvetica", fontsize=8, color="#555555"];')
    writer._graph(graph, scopes=[], indent="  ")
    out.append("}")
    return "\n".join(out) + "\n"


def _format_for(path: str, format: str) -> str:
    suffix = os.path.splitext(path)[1].lower().lstrip(".")
    if format == "png" and suffix in FORMATS:
        return suffix
    return format


def quote(text: str) -> str:
    """A DOT double-quoted string; ``\\n`` in ``text`` stays a label line break."""
    lines = text.split("\n")
    return '"' + "\\n".join(line.replace("\\", "\\\\").replace('"', '\\"') for line in lines) + '"'


class _DotWriter:
    """``nested``: subgraphs drawn as clusters inside their graph (else each node holding some names
    them, from ``names``); ``calls``: the local functions drawn as calls when not ``nested``."""

    def __init__(self, nested: bool = True, calls: frozenset = frozenset(), names: dict | None = None):
        self.nested = nested
        self.calls = calls
        self.names = names or {}
        self.lines: list[str] = []
        self._ids = 0
        self._function_anchor: dict[tuple[str, str, str], str] = {}  # (domain, name, overload) -> id
        # edges between clusters are written at the top level: graphviz puts a node in every
        # subgraph that mentions it, so an edge written inside a cluster would pull its ends in
        self.cross: list[str] = []

    def _new(self, kind: str) -> str:
        self._ids += 1
        return f"{kind}{self._ids}"

    def write(self, loaded) -> str:
        out = self.lines
        out.append("digraph onnx {")
        out.append('  graph [rankdir=TB, fontname="Helvetica", fontsize=11, compound=true, newrank=true];')
        out.append('  node [fontname="Helvetica", fontsize=10];')
        out.append('  edge [fontname="Helvetica", fontsize=8, color="#555555"];')
        root = loaded.root
        for f in loaded.functions:
            self._function_anchor[f.identifier()] = self._new("fn")
        if isinstance(root, ir.Model):
            self._graph(root.graph, scopes=[], indent="  ")
        for f in loaded.functions:
            cid = self._new("cluster_f")
            out.append(f"  subgraph {cid} {{")
            out.append(f'    label={quote(f"function {f.domain}.{f.name}")}; style="rounded,dashed"; color="#aa5500";')
            anchor = self._function_anchor[f.identifier()]
            params = ", ".join(f.attributes) if f.attributes else ""
            out.append(f'    {anchor} [label={quote(f.name + (f"({params})" if params else ""))}, {_STYLE["anchor"]}];')
            self._graph(f, scopes=[], indent="    ")
            out.append("  }")
        out.extend("  " + e for e in self.cross)
        out.append("}")
        return "\n".join(out) + "\n"

    # ------------------------------------------------------------------ one graph (or function body)
    def _graph(self, graph: Any, scopes: list[dict], indent: str) -> list[str]:
        """Emit the nodes of ``graph``; ``scopes`` maps values of enclosing graphs to DOT ids.
        Returns the DOT ids of its inputs and of its nodes reading no value made in the graph."""
        out = self.lines
        here: dict[ir.Value, str] = {}
        sources: list[str] = []
        chain = scopes + [here]
        for v in graph.inputs:
            nid = self._new("in")
            here[v] = nid
            sources.append(nid)
            out.append(f"{indent}{nid} [label={quote(_value_label(v))}, {_STYLE['input']}];")
        if isinstance(graph, ir.Graph):
            for v in graph.initializers.values():
                if v in here:
                    continue
                nid = self._new("init")
                here[v] = nid
                out.append(f"{indent}{nid} [label={quote(_init_label(v))}, {_STYLE['init']}];")
        for node in graph:
            nid = self._new("n")
            key = (node.domain, node.op_type, node.overload or "")
            callee = self._function_anchor.get(key)
            label = _node_label(node) if self.nested else _node_label(node, self.names)
            drawn_as = "call" if callee or key in self.calls else "op"
            out.append(f"{indent}{nid} [label={quote(label)}, {_STYLE[drawn_as]}];")
            if not any(v is not None and v in here for v in node.inputs):
                sources.append(nid)
            for v in node.inputs:
                if v is not None:
                    self._edge(v, nid, chain, indent)
            for v in node.outputs:
                here[v] = nid
            if callee:
                self.cross.append(f'{nid} -> {callee} '
                                  f'[style=dashed, color="#aa5500", constraint=false, arrowhead=empty];')
            if self.nested:
                self._subgraphs(node, nid, chain, indent)
        for v in graph.outputs:
            oid = self._new("out")
            out.append(f"{indent}{oid} [label={quote(_value_label(v))}, {_STYLE['output']}];")
            self._edge(v, oid, chain, indent)
        return sources

    def _subgraphs(self, node: ir.Node, nid: str, chain: list[dict], indent: str) -> None:
        out = self.lines
        for attr in node.attributes.values():
            if attr.is_ref() or attr.type not in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
                continue
            graphs = [attr.value] if attr.type == ir.AttributeType.GRAPH else list(attr.value)
            for i, sub in enumerate(graphs):
                where = attr.name if attr.type == ir.AttributeType.GRAPH else f"{attr.name}[{i}]"
                cid = self._new("cluster_g")
                anchor = self._new("a")
                level = len(chain)
                out.append(f"{indent}subgraph {cid} {{")
                title = f"{node.op_type} {node.name or ''} .{where} (level {level})".replace("  ", " ")
                out.append(f'{indent}  label={quote(title)}; style="rounded,dashed"; color="#3366aa";')
                out.append(f"{indent}  {anchor} [label={quote(where)}, {_STYLE['anchor']}];")
                for first in self._graph(sub, chain, indent + "  ")[:3]:
                    out.append(f"{indent}  {anchor} -> {first} [style=invis];")
                out.append(f"{indent}}}")
                self.cross.append(f'{nid} -> {anchor} [style=dashed, color="#3366aa", arrowhead=odot];')

    def _edge(self, v: ir.Value, dst: str, chain: list[dict], indent: str) -> None:
        """An edge from the node making ``v`` (looked up innermost scope first) to ``dst``; dotted
        when ``v`` comes from an enclosing scope; from a dashed ellipse named after ``v`` when no
        scope makes it (a malformed model)."""
        label = S.type_text(v)
        attrs = [f"label={quote(label)}"] if label else []
        src = chain[-1].get(v)
        cross = False
        if src is None:
            for scope in reversed(chain[:-1]):
                if v in scope:
                    src = scope[v]
                    attrs.append('style=dotted, color="#3366aa"')
                    cross = True
                    break
        if src is None:
            src = self._new("outer")
            chain[0][v] = src
            self.lines.append(f"{indent}{src} [label={quote(S.value_name(v))}, {_STYLE['outer']}];")
            attrs.append("style=dotted")
        edge = f"{src} -> {dst}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";"
        if cross:
            self.cross.append(edge)
        else:
            self.lines.append(indent + edge)


def _value_label(v: ir.Value) -> str:
    t = S.type_text(v)
    return f"{S.value_name(v)}\n{t}" if t else S.value_name(v)


def _init_label(v: ir.Value) -> str:
    t = v.const_value
    if t is None:
        return _value_label(v)
    return S.value_name(v) + "\n" + S.tensor_text(t, LABEL_VALUES)


def _node_label(node: ir.Node, names: dict | None = None) -> str:
    """The op, its key attributes; with ``names`` (``id(subgraph)`` -> name), a line per subgraph
    attribute naming the subgraphs drawn elsewhere."""
    lines = [S.op_text(node)]
    for attr in (node.attributes.values() if names is not None else ()):
        if not attr.is_ref() and attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
            graphs = [attr.value] if attr.type == ir.AttributeType.GRAPH else list(attr.value)
            lines.append(f"{attr.name}: " + ", ".join(names.get(id(g), "?") for g in graphs))
    attrs = [a for a in node.attributes.values()
             if a.is_ref() or a.type not in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)]
    for a in attrs[:MAX_LABEL_ATTRS]:
        text = S.attr_text(a, LABEL_VALUES)
        if node.op_type == "Constant" and not a.is_ref():
            text = text.split("=", 1)[1]
        if len(text) > MAX_LABEL_ATTR_CHARS:
            text = text[:MAX_LABEL_ATTR_CHARS - 3] + "..."
        lines.append(text)
    if len(attrs) > MAX_LABEL_ATTRS:
        lines.append(f"(+{len(attrs) - MAX_LABEL_ATTRS} attributes)")
    return "\n".join(lines)
