"""The optimization pipeline: the passes, in order, in one place.

Library passes: onnx-ir's CSE (run on every graph by ``cse``), dead-node and unused-function
removal, constant lifting and initializer deduplication; onnxscript's constant folder (in
``constant_folding``, after the named weight transposes) and its pattern rewriter, on which the
fusion rules are written. onnxport's own: shape arithmetic and no-op removal, which compare named
dims, ``Where`` on conditions that hold one repeated value, and axes and defaults written as
fusion tools read them (their module docstrings say why no library pass does the same).
"""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common

from onnxport.optimize.constant_folding import ConstantFoldingPass
from onnxport.optimize.cse import CommonSubexpressionEliminationPass
from onnxport.optimize.fuse_attention import AttentionFusionPass
from onnxport.optimize.fuse_conv_bn import ConvBatchNormFusionPass
from onnxport.optimize.fuse_gelu import GeluFusionPass
from onnxport.optimize.fuse_gemm import GemmFusionPass
from onnxport.optimize.fuse_layer_norm import LayerNormFusionPass
from onnxport.optimize.fuse_rms_norm import RMSNormFusionPass
from onnxport.optimize.fusion_forms import FusionFormsPass
from onnxport.optimize.noop_removal import NoOpRemovalPass
from onnxport.optimize.shape_arithmetic import ShapeArithmeticPass
from onnxport.optimize.unflatten_gemm import UnflattenGemmPass
from onnxport.optimize.uniform_values import UniformWherePass


def passes(opset: int, *, attention: bool = False) -> list[ir.passes.PassBase]:
    """The ordered passes for a model targeting ``opset``.

    Fusions are included when ``opset`` has the fused operator; the Attention fusion (opset 23)
    only when ``attention`` is True.
    """
    simplify = [
        ConstantFoldingPass(),
        NoOpRemovalPass(),
        UniformWherePass(),
        ShapeArithmeticPass(),
        CommonSubexpressionEliminationPass(),
        common.RemoveUnusedNodesPass(),
    ]
    fusions: list[ir.passes.PassBase] = [ConvBatchNormFusionPass(), LayerNormFusionPass(), UnflattenGemmPass(),
                                         GemmFusionPass()]
    if opset >= 20:
        fusions.append(GeluFusionPass())
    if opset >= 23:
        fusions.append(RMSNormFusionPass())
        if attention:
            fusions.append(AttentionFusionPass())
    return [
        *simplify,
        *fusions,
        *simplify,
        FusionFormsPass(),
        common.RemoveUnusedFunctionsPass(),
        common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common.DeduplicateInitializersPass(),
    ]


def optimize(model: ir.Model, opset: int, *, attention: bool = False) -> ir.Model:
    """Optimize ``model`` in place and return it.

    Args:
        model: the translated model (main graph, subgraphs and local functions are all optimized).
        opset: its default-domain opset; decides which fusions apply.
        attention: fuse scaled-dot-product attention patterns into ``Attention`` (opset >= 23).
    """
    ir.passes.Sequential(*passes(opset, attention=attention))(model)
    return model


def node_count(model: ir.Model) -> int:
    """Nodes of ``model``: its main graph, every subgraph, every local function's."""
    graphs = [model.graph, *model.functions.values()]
    return sum(1 for g in graphs for _ in ir.traversal.RecursiveGraphIterator(g))
