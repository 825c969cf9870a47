"""Finalize: inline bodies on request, sort, name values uniquely, drop unused opsets."""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common


def finalize(model: ir.Model, *, inline: bool = False) -> ir.Model:
    """Make ``model`` ready to serialize (in place): inlined functions when ``inline``, topological
    order, unique value names, only the opsets in use."""
    if inline and model.functions:
        common.InlinePass()(model)
        common.RemoveUnusedFunctionsPass()(model)
    common.TopologicalSortPass()(model)
    common.NameFixPass()(model)
    common.RemoveUnusedOpsetsPass()(model)
    return model
