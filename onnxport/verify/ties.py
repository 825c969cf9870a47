"""Outputs that are indices chosen among values: ``topk``, ``sort``, ``argmax``, max pooling.

Among equal values (exact zeros everywhere) or beside NaN, which index such an op returns is the
implementation's choice: eager PyTorch and onnxruntime may each pick another one and both be right.
Validation does not compare these outputs on the value sets that make such ties (``TIED_KINDS``).
"""

from __future__ import annotations

import operator

import torch

from onnxport.capture.tables import PASS

aten = torch.ops.aten

TIED_KINDS = ("zeros", "special")

# op -> the position of its indices among its results (None: the op returns only indices)
_INDEX_OPS = {
    aten.topk.default: 1, aten.sort.default: 1, aten.sort.stable: 1, aten.kthvalue.default: 1,
    aten.max.dim: 1, aten.min.dim: 1, aten.median.dim: 1, aten.nanmedian.dim: 1, aten.mode.default: 1,
    aten.cummax.default: 1, aten.cummin.default: 1,
    aten.max_pool1d_with_indices.default: 1, aten.max_pool2d_with_indices.default: 1,
    aten.max_pool3d_with_indices.default: 1, aten.adaptive_max_pool1d.default: 1,
    aten.adaptive_max_pool2d.default: 1, aten.adaptive_max_pool3d.default: 1,
    aten.argmax.default: None, aten.argmin.default: None, aten.argsort.default: None, aten.argsort.stable: None,
}


def index_outputs(program) -> set[int]:
    """Positions among the user outputs (as the ONNX model and ``eager.output_leaves`` list them:
    ``None`` left out) of the outputs that are such indices, directly or through views and casts."""
    if program is None:
        return set()
    out_node = next(n for n in program.graph.nodes if n.op == "output")
    values = out_node.args[0]
    found, position = set(), 0
    for spec, value in zip(program.graph_signature.output_specs, values):
        if spec.kind.name != "USER_OUTPUT" or value is None:
            continue
        if isinstance(value, torch.fx.Node) and _is_index(value):
            found.add(position)
        position += 1
    return found


def _is_index(node: torch.fx.Node) -> bool:
    while node.op == "call_function" and node.target in PASS and node.args and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    if node.op != "call_function":
        return False
    if node.target in _INDEX_OPS and _INDEX_OPS[node.target] is None:
        return True
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        source, index = node.args
        return source.op == "call_function" and _INDEX_OPS.get(source.target, -1) == index
    return False
