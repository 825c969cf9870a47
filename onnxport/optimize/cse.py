"""Common subexpression elimination in every scope.

onnx-ir's ``CommonSubexpressionEliminationPass`` merges identical nodes (same operator, inputs and
attributes; small ``Constant`` tensors compared by value) in the main graph only; this pass applies
the same algorithm to each scope: subgraphs of If/Loop/Scan and local functions too.
"""

from __future__ import annotations

import onnx_ir.passes.common as common

from onnxport.optimize._scopes import ScopedPass


class CommonSubexpressionEliminationPass(ScopedPass):
    """Merge identical nodes within each scope.

    Args:
        size_limit: ``Constant`` tensors with more elements than this are not compared.
    """

    def __init__(self, size_limit: int = 256):
        super().__init__()
        self._cse = common.CommonSubexpressionEliminationPass(size_limit=size_limit)

    def rewrite(self, scope) -> bool:
        return bool(self._cse._eliminate_common_subexpression(scope))  # noqa: SLF001 - per-scope entry
