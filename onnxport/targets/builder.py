"""What a target's rewrite uses to write nodes: initializers made once per value (``Constants``),
nodes appended as they are made with names no value of the model has (``Nodes``), a node's
outputs handed over to the values that replace it (``replace_outputs``), and a node's subgraphs
(``subgraphs``)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.metadata import SOURCE_KEY
from onnxport.targets.names import FreshNames


class Constants:
    """``const(array)`` -> an initializer of the main graph holding it, made once per value (a
    Scan body reads it from there)."""

    def __init__(self, graph: ir.Graph, fresh: FreshNames, prefix: str):
        self.graph, self.fresh, self.prefix, self.made = graph, fresh, prefix, {}

    def __call__(self, array: np.ndarray) -> ir.Value:
        array = np.array(array, order="C")  # (np.ascontiguousarray makes a 0-d array 1-d)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self.made:
            value = ir.Value(name=self.fresh(f"{self.prefix}_const"), const_value=ir.tensor(array),
                             type=ir.TensorType(ir.DataType.from_numpy(array.dtype)), shape=ir.Shape(array.shape))
            self.graph.register_initializer(value)
            self.made[key] = value
        return self.made[key]


class Nodes:
    """Nodes appended to ``nodes`` as they are made: ``op("Add", a, b)`` -> its output(s), named
    ``<prefix>_<op type>`` (``FreshNames``), each carrying the user's line ``source``."""

    def __init__(self, source: str | None, fresh: FreshNames, prefix: str):
        self.nodes: list[ir.Node] = []
        self.meta = {SOURCE_KEY: source} if source else {}
        self.fresh, self.prefix = fresh, prefix

    def op(self, op_type: str, *inputs, outputs: int = 1, **attributes):
        node = ir.Node("", op_type, list(inputs), attributes=[ir.convenience.convert_attribute(k, v)
                                                                for k, v in attributes.items()],
                       num_outputs=outputs, metadata_props=dict(self.meta))
        for value in node.outputs:
            value.name = self.fresh(f"{self.prefix}_{op_type.lower()}")
        self.nodes.append(node)
        return node.outputs[0] if outputs == 1 else list(node.outputs)


def replace_node(node: ir.Node, graph: ir.Graph, nodes: list[ir.Node], results: list[ir.Value]) -> None:
    """``nodes`` inserted before ``node`` in ``graph``, ``results[i]`` taking the place (uses, graph
    outputs, name, type, shape) of ``node.outputs[i]``, and ``node`` removed; outputs past
    ``results`` must have no use."""
    graph.insert_before(node, nodes)
    for before, after in zip(node.outputs, results):
        after.type, after.shape = before.type, before.shape
        name = before.name
        before.replace_all_uses_with(after, replace_graph_outputs=True)
        before.name, after.name = None, name
    graph.remove(node, safe=True)


def subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The graphs ``node``'s attributes hold: an ``If``'s branches, a ``Scan`` or ``Loop`` body, each
    graph of a list of graphs (``GRAPHS``); not the graphs nested in those."""
    out = []
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            out.append(attr.as_graph())
        elif attr.type == ir.AttributeType.GRAPHS:
            out.extend(attr.as_graphs())
    return out
