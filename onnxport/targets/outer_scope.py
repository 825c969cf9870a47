"""Scan and Loop bodies that read only their own inputs, what they compute, and initializers.

ONNX lets a subgraph read any value of the graphs enclosing it. OpenVINO 2026 refuses a Scan body
that reads a graph input so ("Number of Scan node inputs (2) is less than required (3) based on
body graph parameters"); reading an initializer works. Each value a body reads from outside (an
initializer of the main graph excepted) becomes an input of the body, passed by the node as one
more state (Scan) or loop-carried value (Loop) that the body hands back unchanged: the same values
at every step, so the node computes what it computed before. ``If`` branches have no inputs in
ONNX and keep reading their enclosing graph.
"""

from __future__ import annotations

import onnx_ir as ir

from onnxport.targets.builder import subgraphs
from onnxport.targets.names import FreshNames

LOOPS = ("Scan", "Loop")


def pass_outer_values(model: ir.Model) -> None:
    """Every Scan / Loop of ``model`` (nested ones included, outermost first) rewritten in place so
    that its body reads no value of an enclosing graph but main-graph initializers."""
    initializers = set(model.graph.initializers.values())
    _visit(model.graph, initializers, FreshNames(model))


def _visit(graph: ir.Graph, initializers: set, fresh: FreshNames) -> None:
    for node in list(graph):
        if node.domain in ("", "ai.onnx") and node.op_type in LOOPS:
            node = _explicit(node, graph, initializers, fresh)
        for sub in subgraphs(node):
            _visit(sub, initializers, fresh)


def _inside(body: ir.Graph) -> tuple[set, set]:
    """The nodes of ``body`` (its subgraphs' included) and the values defined there."""
    nodes, values = set(), set(body.inputs)
    for node in ir.traversal.RecursiveGraphIterator(body):
        nodes.add(node)
        values.update(node.outputs)
        for sub in subgraphs(node):
            values.update(sub.inputs)
    return nodes, values


def _outer_reads(body: ir.Graph, initializers: set) -> tuple[list[ir.Value], set]:
    """The values ``body`` reads from an enclosing graph (initializers left out), in first-use order."""
    nodes, defined = _inside(body)
    found: dict[ir.Value, None] = {}
    for node in ir.traversal.RecursiveGraphIterator(body):
        for value in node.inputs:
            if value is not None and value not in defined and value not in initializers:
                found.setdefault(value)
    for value in body.outputs:
        if value not in defined and value not in initializers:
            found.setdefault(value)
    return list(found), nodes


def _explicit(node: ir.Node, graph: ir.Graph, initializers: set, fresh: FreshNames) -> ir.Node:
    """``node`` (a Scan or Loop in ``graph``) with the outer values its body reads passed in as
    extra states / loop-carried values; ``node`` itself when it reads none."""
    body = node.attributes["body"].as_graph()
    outer, nodes = _outer_reads(body, initializers)
    if not outer:
        return node
    if node.op_type == "Scan":
        scanned = node.attributes["num_scan_inputs"].as_int()
        states = len(node.inputs) - scanned
        at_input, at_body, at_output = states, states, states
    else:  # Loop: inputs M, cond, carried...; body inputs iter, cond, carried...; body outputs cond, carried...
        carried = len(node.inputs) - 2
        at_input, at_body, at_output = len(node.inputs), 2 + carried, carried
    params = []
    for value in outer:
        param = ir.Value(name=fresh(f"{value.name}_passed"), type=value.type, shape=value.shape)
        params.append(param)
        for user, index in list(value.uses()):
            if user in nodes:
                user.replace_input_with(index, param)
    for k, param in enumerate(params):
        body.inputs.insert(at_body + k, param)
    for k, param in enumerate(params):
        identity = ir.Node("", "Identity", [param], num_outputs=1)
        body.append(identity)
        kept = identity.outputs[0]
        kept.name, kept.type, kept.shape = fresh(f"{param.name}_kept"), param.type, param.shape
        body.outputs.insert(at_body - (1 if node.op_type == "Loop" else 0) + k, kept)
        # a body output that was the outer value itself now hands out its passed copy
    for i, value in enumerate(body.outputs):
        if value in outer:
            body.outputs[i] = params[outer.index(value)]
    inputs = list(node.inputs[:at_input]) + outer + list(node.inputs[at_input:])
    rebuilt = ir.Node(node.domain, node.op_type, inputs, attributes=list(node.attributes.values()),
                      num_outputs=len(node.outputs) + len(outer), name=node.name,
                      metadata_props=dict(node.metadata_props))
    old = list(node.outputs)
    new = list(rebuilt.outputs[:at_output]) + list(rebuilt.outputs[at_output + len(outer):])
    for before, after in zip(old, new):
        after.type, after.shape = before.type, before.shape
        name = before.name
        before.replace_all_uses_with(after, replace_graph_outputs=True)
        before.name, after.name = None, name
    for k, value in enumerate(outer):
        extra = rebuilt.outputs[at_output + k]
        extra.name, extra.type, extra.shape = fresh(f"{value.name}_unchanged"), value.type, value.shape
    graph.insert_before(node, rebuilt)
    graph.remove(node, safe=True)
    return rebuilt
