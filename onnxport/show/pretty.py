"""``pretty_onnx``: a compact text rendering of an ONNX model, one line per node.

Layout::

    model: ir_version=10, producer=onnxport 0.1.0
    opsets: ''=20, local=1
    constraints: time % 4 == 0          (the export's adopted constraints, when it has some)
    == graph 'main_graph' ==
    input   x: float32[batch, 16]
    init    w: float32[16, 16] [0.1, -0.2, 0.3, ...]
    output  y: float32[batch, 16]
     0 | MatMul(x, w) -> mm: float32[batch, 16]
     1 |  Relu(mm) -> y: float32[batch, 16]
        == g1, level 1: Loop 'loop_0' .body (in 'main_graph') ==
        ...
    == function local.body_0 ==

Nodes are in topological order, indented by their depth from the graph's inputs (the number
before ``|``; indentation stops growing at ``MAX_INDENT``); a ``# file.py:LINE in func: code`` line
precedes the nodes whose recorded user source line (``metadata_props["source"]``) changes.
Subgraphs (``If`` branches, ``Loop``/``Scan`` bodies) follow the graph holding them, indented by
nesting level; local functions come last.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from onnxport.metadata import CONSTRAINTS_KEY, SOURCE_KEY
from onnxport.show import summary as S
from onnxport.show.load import Loaded, load

#: nodes deeper than this are drawn at this indentation (their depth number stays exact)
MAX_INDENT = 12


def pretty_onnx(model: Any, *, shapes: bool = True, max_values: int = 5) -> str:
    """Render ``model`` as compact text.

    Args:
        model: ``onnx.ModelProto``, ``onnx_ir.Model``, ``onnxport.ExportResult``,
            ``onnx.FunctionProto``, ``onnx_ir.Function``, a graph, or the path of an ``.onnx`` file.
        shapes: annotate node outputs with dtype and shape, after running ONNX shape inference
            (``onnx.shape_inference.infer_shapes``) on a copy of the model.
        max_values: how many leading values of small initializers and constant tensors to print
            (0: none).

    Returns:
        The text, lines joined by ``\\n``: opsets, then the main graph (inputs, initializers,
        outputs, one ``Op(inputs, attr=value) -> outputs`` line per node), each subgraph under a
        header naming its node, attribute and nesting level, then each local function under a
        header naming its domain and name.

    Raises:
        onnxport.show.load.ShowInputError: ``model`` is of no accepted type or the file is unreadable.
    """
    loaded = load(model, infer_shapes=shapes)
    return "\n".join(_Renderer(shapes, max_values).render(loaded)) + "\n"


class _Renderer:
    def __init__(self, shapes: bool, max_values: int):
        self.shapes = shapes
        self.max_values = max_values
        self.lines: list[str] = []
        self._graph_ids = 0

    def render(self, loaded: Loaded) -> list[str]:
        root = loaded.root
        if isinstance(root, ir.Model):
            head = [f"ir_version={root.ir_version}"]
            if root.producer_name:
                head.append(f"producer={root.producer_name} {root.producer_version or ''}".rstrip())
            self.lines.append("model: " + ", ".join(head))
            self.lines.append("opsets: " + _opsets(root.opset_imports))
            constraints = root.metadata_props.get(CONSTRAINTS_KEY)
            if constraints:
                self.lines.append("constraints: " + constraints)
        for note in loaded.notes:
            self.lines.append(f"# note: {note}")
        if isinstance(root, ir.Model):
            self._graph(root.graph, f"== graph '{root.graph.name or 'main'}' ==", 0)
        for function in loaded.functions:
            self._function(function)
        return self.lines

    # ------------------------------------------------------------------ sections
    def _function(self, f: ir.Function) -> None:
        self.lines.append(f"== function {f.domain}.{f.name}"
                          + (f" (overload {f.overload!r})" if f.overload else "")
                          + f" [opsets: {_opsets(f.opset_imports)}] ==")
        if f.attributes:
            self.lines.append("attrs   " + ", ".join(_param_text(a) for a in f.attributes.values()))
        self._graph(f, None, 0)

    def _graph(self, graph: Any, header: str | None, level: int) -> None:
        pad = "    " * level
        out = self.lines
        if header:
            out.append(pad + header)
        for v in graph.inputs:
            out.append(pad + "input   " + self._sig(v, always=True))
        for v in (graph.initializers.values() if isinstance(graph, ir.Graph) else ()):
            if v in graph.inputs:
                continue
            out.append(pad + "init    " + self._init(v))
        outer = S.outer_values(graph)
        if outer and level > 0:
            out.append(pad + "outer   " + ", ".join(S.value_name(v) for v in outer))
        for v in graph.outputs:
            out.append(pad + "output  " + self._sig(v, always=True))
        depths = S.node_depths(graph)
        width = len(str(max(depths.values(), default=0)))
        pending: list[tuple[str, Any]] = []
        source = None
        for node in graph:
            src = node.metadata_props.get(SOURCE_KEY)
            if src and src != source:
                out.append(pad + f"# {src}")
            source = src or source
            labels = {}
            for attr in node.attributes.values():
                graphs = [attr.value] if attr.type == ir.AttributeType.GRAPH else (
                    list(attr.value) if attr.type == ir.AttributeType.GRAPHS and not attr.is_ref() else [])
                for i, sub in enumerate(graphs):
                    self._graph_ids += 1
                    gid = f"g{self._graph_ids}"
                    labels[(attr.name, i)] = "{" + gid + "}"
                    where = f"{attr.name}[{i}]" if attr.type == ir.AttributeType.GRAPHS else attr.name
                    pending.append((f"== {gid}, level {level + 1}: {node.op_type} {_node_id(node)!r} .{where}"
                                    f" (in {_graph_title(graph)}) ==", sub))
            d = depths[node]
            line = f"{d:>{width}} | " + " " * min(d, MAX_INDENT) + self._node(node, labels)
            out.append(pad + line)
        for header, sub in pending:
            self._graph(sub, header, level + 1)

    # ------------------------------------------------------------------ lines
    def _node(self, node: ir.Node, labels: dict) -> str:
        args = [S.value_name(v) for v in node.inputs]
        args += [S.attr_text(a, self.max_values, lambda n, i: labels[(n, i)])
                 for a in node.attributes.values()]
        outs = ", ".join(self._sig(v) for v in node.outputs)
        return f"{S.op_text(node)}({', '.join(args)})" + (f" -> {outs}" if outs else "")

    def _sig(self, v: ir.Value, always: bool = False) -> str:
        text = S.type_text(v) if (self.shapes or always) else ""
        return f"{S.value_name(v)}: {text}" if text else S.value_name(v)

    def _init(self, v: ir.Value) -> str:
        t = v.const_value
        if t is None:
            return self._sig(v, always=True)
        vals = S.tensor_values(t, self.max_values)
        text = f"{S.value_name(v)}: {S.dtype_name(t.dtype)}{S.shape_text(t.shape)}"
        return text if vals is None else f"{text} {vals}"


def _opsets(opsets: dict) -> str:
    return ", ".join(f"{d!r}={v}" if d == "" else f"{d}={v}" for d, v in sorted(opsets.items())) or "none"


def _param_text(attr: Any) -> str:
    if attr.value is None:
        return attr.name
    return S.attr_text(attr, 5)


def _node_id(node: ir.Node) -> str:
    if node.name:
        return node.name
    return "-> " + ", ".join(S.value_name(v) for v in node.outputs)


def _graph_title(graph: Any) -> str:
    if isinstance(graph, ir.Function):
        return f"function {graph.domain}.{graph.name}"
    return f"'{graph.name}'" if graph.name else "graph"
