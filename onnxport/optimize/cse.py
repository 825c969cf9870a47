"""Common subexpression elimination in every graph of the model.

onnx-ir's ``CommonSubexpressionEliminationPass`` merges identical nodes (same operator, inputs and
attributes; small ``Constant`` tensors compared by value; random operators and control flow left
alone) in ``model.graph`` only. This pass runs it on each graph in turn, each wrapped in a model of
its own: the main graph, the If/Loop/Scan bodies and the bodies of local functions.
"""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common

from onnxport.optimize._scopes import graphs


class CommonSubexpressionEliminationPass(ir.passes.InPlacePass):
    """Merge identical nodes within each graph of the model.

    Args:
        size_limit: ``Constant`` tensors with more elements than this are not compared.
    """

    def __init__(self, size_limit: int = 256):
        super().__init__()
        self._cse = common.CommonSubexpressionEliminationPass(size_limit=size_limit)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Eliminate common subexpressions; ``modified`` when any node was merged."""
        modified = False
        for graph in graphs(model):
            modified |= self._cse(ir.Model(graph, ir_version=model.ir_version)).modified
        return ir.passes.PassResult(model, modified)
