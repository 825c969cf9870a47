"""Local functions inlined: every call of a control-flow body (or any local function) replaced by
the function's nodes, and the functions removed. onnx-ir's ``InlinePass`` does it; runtimes
without local-function support (OpenVINO 2026: "No conversion rule found for operations:
onnxport.scan_body_...") load the result."""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common


def inline_functions(model: ir.Model) -> None:
    """Inline every local function of ``model`` in place (``onnx_ir.passes.common.InlinePass``)."""
    if model.functions:
        common.InlinePass()(model)
        common.RemoveUnusedFunctionsPass()(model)
