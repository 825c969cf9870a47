"""The optimization pipeline: the passes, in order, in one place."""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common


def passes(opset: int) -> list[ir.passes.PassBase]:
    """The ordered passes for a model targeting ``opset``."""
    return [
        common.RemoveUnusedNodesPass(),
        common.CommonSubexpressionEliminationPass(),
        common.RemoveUnusedNodesPass(),
        common.RemoveUnusedFunctionsPass(),
        common.DeduplicateInitializersPass(),
    ]


def optimize(model: ir.Model, opset: int) -> ir.Model:
    """Optimize ``model`` in place and return it."""
    for p in passes(opset):
        p(model)
    return model
