"""What to quantize, read from the graph onnxport built.

Weight-carrying nodes are ``MatMul`` / ``Gemm`` with a constant (initializer) second operand and
``Conv`` with a constant weight. Of those, three kinds stay in float:

- **embeddings**: a weight that an embedding ``Gather`` also reads (a language model's output
  projection tied to its token embedding) — a ``Gather`` itself is never quantized;
- **the final projection**: the weight node a float output comes from directly, through reshapes,
  a constant bias, a softmax or a cast only (a classifier's last layer, a language model's
  ``lm_head``): its outputs are the scores the user reads, and its error is not averaged away by a
  later layer. A hidden-state output (after a normalization or a residual sum) has none. A decoder's cache
  outputs (``present.*``) and the buffers a model updates (``*.updated``) are state, not results:
  the key/value projections feeding them are quantized like the others;
- **the user's list**: ``keep_float`` names, matched against the weight's initializer name
  (onnxport names initializers by the module's qualified name, ``lm_head.weight`` or
  ``lm_head.weight.T``) as a prefix, or against the node name.

Everything is decided on the finished ``onnx_ir`` graph; nothing here changes it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from onnxport.capture.caches import OUTPUT_PREFIX

WEIGHT_OPS = ("MatMul", "Gemm", "Conv")
UPDATED = ".updated"  # the suffix of the outputs holding a buffer or input updated in place
FLOAT_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})


@dataclasses.dataclass(frozen=True)
class WeightNode:
    """One node carrying a constant weight.

    Attributes:
        node: the node's name (unique in the finalized model).
        op_type: ``MatMul``, ``Gemm`` or ``Conv``.
        weight: the initializer name of its weight.
        kept: why it stays in float (``"embedding"``, ``"final projection"``, ``"user list"``), or
            ``""`` when it is quantized.
    """

    node: str
    op_type: str
    weight: str
    kept: str = ""


def _weight(node: ir.Node) -> ir.Value | None:
    """The constant weight operand of a MatMul/Gemm/Conv, or None."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in WEIGHT_OPS or len(node.inputs) < 2:
        return None
    w = node.inputs[1]
    if w is None or not w.is_initializer() or w.dtype not in FLOAT_TYPES:
        return None
    if node.op_type == "MatMul" and (w.shape is None or len(w.shape) != 2):
        return None
    return w


# what may stand between a final projection and the output: reshapes, a bias, a softmax, a cast
_PASS_THROUGH = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Identity", "Flatten", "Cast", "Softmax", "LogSoftmax",
                           "Add"})


def _projection_of(out: ir.Value, weighted) -> ir.Node | None:
    """The weight node ``out`` comes from directly (see ``_final_projections``), or None."""
    node = out.producer()
    while node is not None and node not in weighted and node.op_type in _PASS_THROUGH:
        data = [v for v in node.inputs[:1 if node.op_type != "Add" else 2] if v is not None]
        if node.op_type == "Add":
            variable = [v for v in data if not v.is_initializer() and v.const_value is None]
            if len(variable) != 1:
                break
            data = variable
        node = data[0].producer() if data else None
    return node if node is not None and node in weighted else None


def _final_projections(graph: ir.Graph, weighted) -> set[ir.Node]:
    """The weight node each float result output comes from directly: walking back through
    reshapes, casts, softmax and the addition of a constant bias only (a residual ``Add`` or a
    normalization ends the walk: a hidden-state output has no final projection)."""
    found: set[ir.Node] = set()
    for out in graph.outputs:
        name = out.name or ""
        if out.dtype not in FLOAT_TYPES or name.startswith(OUTPUT_PREFIX + ".") or name.endswith(UPDATED):
            continue
        node = _projection_of(out, weighted)
        if node is not None:
            found.add(node)
    return found


def output_kinds(model: ir.Model) -> dict[str, str]:
    """Output name -> ``"classes"`` (a float output computed directly by a projection with a
    constant weight, its last axis static and longer than 1: scores over classes or tokens),
    ``"hidden"`` (any other float output) or ``"exact"`` (integers, bools), read on the float graph
    before quantization changes the projections' form."""
    graph = model.graph
    weighted = {n for n in graph if _weight(n) is not None}
    kinds = {}
    for out in graph.outputs:
        if out.dtype not in FLOAT_TYPES:
            kinds[out.name] = "exact"
            continue
        last = out.shape[-1] if out.shape is not None and len(out.shape) else None
        scores = isinstance(last, int) and last > 1 and _projection_of(out, weighted) is not None
        kinds[out.name] = "classes" if scores else "hidden"
    return kinds


def weight_nodes(model: ir.Model, keep_float: list[str] | tuple[str, ...] = (), *, embeddings: bool = True,
                 final_projection: bool = True) -> list[WeightNode]:
    """Every weight node of the main graph, with the reason it stays in float (module docstring).

    Args:
        model: a finalized model (unique node names).
        keep_float: initializer-name prefixes or node names kept in float.
        embeddings, final_projection: keep those in float (default True each).
    """
    graph = model.graph
    weighted = {n: w for n in graph for w in [_weight(n)] if w is not None}
    gathered = {n.inputs[0] for n in graph if n.op_type == "Gather" and n.inputs[0] is not None
                and n.inputs[0].is_initializer()}
    finals = _final_projections(graph, set(weighted)) if final_projection else set()
    out = []
    for node, w in weighted.items():
        name = w.name or ""
        base = name[:-2] if name.endswith(".T") else name
        tied = embeddings and any(g is w or (g.name or "") in (base, name) or
                                  _same_data(g, w) for g in gathered)
        if any(name.startswith(p) or node.name == p for p in keep_float):
            kept = "user list"
        elif tied:
            kept = "embedding"
        elif node in finals:
            kept = "final projection"
        else:
            kept = ""
        out.append(WeightNode(node.name, node.op_type, name, kept))
    return out


def _same_data(gathered: ir.Value, weight: ir.Value) -> bool:
    """Whether ``weight`` is the embedding table ``gathered`` or its transpose (a tied projection)."""
    a, b = gathered.shape, weight.shape
    if a is None or b is None or len(a) != 2 or len(b) != 2 or sorted(a) != sorted(b):
        return False
    ga, wb = gathered.const_value.numpy(), weight.const_value.numpy()
    return bool((tuple(a) == tuple(b) and np.array_equal(ga, wb)) or
                (tuple(a) == tuple(b)[::-1] and np.array_equal(ga, wb.T)))
