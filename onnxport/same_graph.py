"""Whether two ONNX models compute alike: the same graph up to the names of its values.

Two exports of one model traced at other sizes (each side of a branch on a remainder,
``onnxport.remainder_sides``) hold each on the sizes its trace covers; where their graphs are the
same, the one graph holds on both. ``same_graph(a, b)`` compares them structurally:

* the graph inputs and outputs: names, element types and ranks, in order (dim names are not compared:
  a trace at other sizes names them alike or not, the graph reads sizes from its inputs);
* the nodes, in order: op type, domain, attributes (a tensor by its dtype, dims and values; a
  subgraph compared the same way, within its outer scope), and which values each reads, a value
  known by what makes it (a graph input by its position, an initializer by its dtype, dims and
  values, a node output by the node and its place), not by its name;
* the local functions, by domain, name and overload, each compared the same way;
* the opsets imported.

Doc strings, metadata, producer and ``value_info`` are not compared. A difference in node order or
any other difference counts as other graphs (the comparison may say "other" for graphs that compute
alike, never "same" for graphs that do not).
"""

from __future__ import annotations

import hashlib

import onnx
from onnx import numpy_helper


def same_graph(a: onnx.ModelProto, b: onnx.ModelProto) -> bool:
    """Whether ``a`` and ``b`` are one graph up to value names (see the module's docstring).

    Args:
        a, b: ONNX models (their initializers loaded, not external data).
    """
    if _opsets(a) != _opsets(b) or len(a.functions) != len(b.functions):
        return False
    if _graph(a.graph, {}) != _graph(b.graph, {}):
        return False
    fa = {(f.domain, f.name, f.overload): f for f in a.functions}
    fb = {(f.domain, f.name, f.overload): f for f in b.functions}
    return fa.keys() == fb.keys() and all(_function(fa[k]) == _function(fb[k]) for k in fa)


def _opsets(model: onnx.ModelProto) -> dict:
    return {o.domain or "ai.onnx": o.version for o in model.opset_import}


def _value_type(value: onnx.ValueInfoProto) -> tuple:
    """A value's element type and rank (a tensor), or its whole type otherwise."""
    if value.type.HasField("tensor_type"):
        t = value.type.tensor_type
        return ("tensor", t.elem_type, len(t.shape.dim) if t.HasField("shape") else None)
    return ("other", value.type.SerializeToString(deterministic=True))


def _tensor(t: onnx.TensorProto) -> tuple:
    """A tensor by its dtype, dims and values (a digest of them), not its name."""
    values = numpy_helper.to_array(t)
    return ("tensor", t.data_type, tuple(t.dims), hashlib.sha256(values.tobytes()).hexdigest())


def _graph(graph: onnx.GraphProto, outer: dict, depth: int = 0) -> tuple:
    """``graph`` as a comparable tuple; ``outer``: value name -> its key in the enclosing scopes;
    ``depth``: how deep the graph is nested (a value's key says at which depth it is made)."""
    scope = dict(outer)
    for k, value in enumerate(graph.input):
        scope[value.name] = ("input", depth, k)
    for init in graph.initializer:
        scope[init.name] = _tensor(init)
    for init in graph.sparse_initializer:
        scope[init.values.name] = ("sparse", init.SerializeToString(deterministic=True))
    inputs = tuple((v.name if depth == 0 else "", _value_type(v)) for v in graph.input)
    nodes = []
    for i, node in enumerate(graph.node):
        reads = tuple(scope.get(n, ("unknown", n)) if n else None for n in node.input)
        attributes = tuple(sorted((at.name, _attribute(at, scope, depth + 1)) for at in node.attribute))
        nodes.append((node.domain, node.op_type, node.overload, reads, attributes, len(node.output)))
        for k, out in enumerate(node.output):
            if out:
                scope[out] = ("node", depth, i, k)
    outputs = tuple((v.name if depth == 0 else "", _value_type(v), scope.get(v.name, ("unknown", v.name)))
                    for v in graph.output)
    return inputs, tuple(nodes), outputs


def _attribute(at: onnx.AttributeProto, scope: dict, depth: int) -> tuple:
    """An attribute's value: a tensor or subgraph as ``_tensor`` / ``_graph`` give it, others as they are."""
    if at.type == onnx.AttributeProto.TENSOR:
        return ("tensor", _tensor(at.t))
    if at.type == onnx.AttributeProto.TENSORS:
        return ("tensors", tuple(_tensor(t) for t in at.tensors))
    if at.type == onnx.AttributeProto.GRAPH:
        return ("graph", _graph(at.g, scope, depth))
    if at.type == onnx.AttributeProto.GRAPHS:
        return ("graphs", tuple(_graph(g, scope, depth) for g in at.graphs))
    plain = onnx.AttributeProto()
    plain.CopyFrom(at)
    plain.ClearField("doc_string")
    return ("plain", plain.SerializeToString(deterministic=True))


def _function(f: onnx.FunctionProto) -> tuple:
    """A local function: its inputs and attributes by position, its nodes and outputs as ``_graph`` reads them."""
    graph = onnx.helper.make_graph(list(f.node), f.name, [onnx.helper.make_empty_tensor_value_info(n) for n in f.input],
                                   [onnx.helper.make_empty_tensor_value_info(n) for n in f.output])
    opsets = tuple(sorted((o.domain or "ai.onnx", o.version) for o in f.opset_import))
    return (tuple(f.attribute), tuple(a.SerializeToString(deterministic=True) for a in f.attribute_proto), opsets,
            _graph(graph, {}))
