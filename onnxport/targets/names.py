"""Names for the values a target's rewrite makes, unused anywhere in the model.

ONNX wants every value name given once in a graph and the graphs it encloses (onnxruntime refuses
a subgraph value named as one outside it); onnx-ir names a new node's outputs per graph, so values
made in a new Scan body could take a name the main graph has. A rewrite names its values here.
"""

from __future__ import annotations

import onnx_ir as ir


class FreshNames:
    """``fresh("y_passed")`` -> ``"y_passed"``, or ``"y_passed_2"``... the first name no value of the
    model (any graph, any function) has, nor one given before."""

    def __init__(self, model: ir.Model):
        self.taken: set[str] = set()
        for graph_like in [model.graph, *model.functions.values()]:
            self.taken.update(v.name for v in graph_like.inputs if v.name)
            if isinstance(graph_like, ir.Graph):
                self.taken.update(graph_like.initializers)
            for node in ir.traversal.RecursiveGraphIterator(graph_like):
                self.taken.update(v.name for v in node.outputs if v.name)
                for attr in node.attributes.values():
                    if attr.type == ir.AttributeType.GRAPH:
                        self.taken.update(v.name for v in attr.as_graph().inputs if v.name)

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name
