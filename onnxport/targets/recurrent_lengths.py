"""ONNX LSTM, GRU and RNN nodes with ``sequence_lens``, written as one Scan per direction that masks
each step (``target="openvino"``).

The operators' ``sequence_lens`` (onnx.ai/onnx/operators/onnx__LSTM.html, GRU, RNN): sequence ``b``
runs over its first ``sequence_lens[b]`` steps only (the reverse direction starting at its last
valid step), ``Y`` is 0 past it, and ``Y_h`` (``Y_c``) are the states at its last valid step.
OpenVINO 2026.4 ignores ``sequence_lens``: every sequence runs over all ``T`` steps, ``Y`` is not 0
past a length and the final states are those of step ``T`` (measured on LSTM, GRU and RNN).

The form written here says it step by step: a Scan over time (over the time-reversed sequence for
the reverse direction, its outputs reversed back) carries the states; at step ``t`` the cell
(``targets.recurrent_cells``) computes the new states and each sequence takes them where
``t < sequence_lens[b]`` and keeps its old ones elsewhere (``Where``), so a state is left as it was
at the sequence's last valid step (forward), or stays the initial one until its first (reverse);
the step's output is the new ``h`` there and 0 elsewhere. Standard operators only, computed as the
specification says in any runtime.

Written for the forms onnxport emits (default activations, the RNN's Tanh or Relu, GRU with
``linear_before_reset=1``; no clip, peepholes or ``layout=1``); another form is left as it is.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.metadata import SOURCE_KEY
from onnxport.targets.builder import Constants, Nodes, replace_node, subgraphs
from onnxport.targets.names import FreshNames
from onnxport.targets.recurrent_fused import cell_state_unread, fused_form, joined
from onnxport.targets.recurrent_cells import CELLS, GATES, STATES

DIRECTIONS = {"forward": (0,), "reverse": (1,), "bidirectional": (0, 1)}
DEFAULT_ACTIVATIONS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"], "RNN": ["tanh"]}


def mask_sequence_lengths(model: ir.Model) -> None:
    """Every LSTM, GRU and RNN of ``model`` (in any subgraph) with ``sequence_lens`` replaced in
    place: by the fused operator over each direction, masked and read at the lengths, where no node
    reads an LSTM's final cell state (``targets.recurrent_fused``), else by the masked Scan form
    (module docstring)."""
    fresh = FreshNames(model)
    const = Constants(model.graph, fresh, "sequence_lengths")
    nested = ir.traversal.RecursiveGraphIterator(model.graph)
    graphs = [model.graph] + [sub for node in nested for sub in subgraphs(node)]
    for graph in graphs:
        for node in list(graph):
            if node.op_type in CELLS and node.domain in ("", "ai.onnx") and _activation(node) is not None:
                if cell_state_unread(node, graph):
                    directions = DIRECTIONS[node.attributes.get_string("direction", "forward")]
                    fused_form(node, graph, const, fresh, directions)
                else:
                    _replace(node, graph, const, fresh)


def _activation(node: ir.Node) -> str | None:
    """The RNN's activation (``Tanh``/``Relu``), ``""`` for an LSTM or GRU, when ``node`` has
    ``sequence_lens`` and a form written here; None otherwise."""
    inputs = list(node.inputs) + [None] * (8 - len(node.inputs))
    attrs = node.attributes
    if inputs[4] is None or "clip" in attrs or attrs.get_int("layout", 0) != 0 or \
            attrs.get_int("input_forget", 0) != 0 or (node.op_type == "LSTM" and inputs[7] is not None):
        return None
    if node.op_type == "GRU" and attrs.get_int("linear_before_reset", 0) != 1:
        return None
    default = DEFAULT_ACTIVATIONS[node.op_type]
    given = [a.lower() for a in attrs.get_strings("activations", default)]
    directions = len(DIRECTIONS[attrs.get_string("direction", "forward")])
    if node.op_type == "RNN":
        return {"tanh": "Tanh", "relu": "Relu"}.get(given[0]) if len(set(given)) == 1 else None
    return "" if given in (default, default * directions) else None


def _replace(node: ir.Node, graph: ir.Graph, const, fresh: FreshNames) -> None:
    kind, activation = node.op_type, _activation(node)
    inputs = list(node.inputs) + [None] * (8 - len(node.inputs))
    x, w, r, bias, lengths, h0 = inputs[:6]
    c0 = inputs[6] if kind == "LSTM" else None
    hidden = node.attributes.get_int("hidden_size")
    width = GATES[kind] * hidden
    np_dtype = x.dtype.numpy()
    nodes = Nodes(node.metadata_props.get(SOURCE_KEY), fresh, kind.lower())
    op = nodes.op
    axis0, axis1 = const(np.array([0], np.int64)), const(np.array([1], np.int64))
    steps, batch = op("Shape", x, start=0, end=1), op("Shape", x, start=1, end=2)
    times = op("Range", const(np.array(0, np.int64)), op("Squeeze", steps, axis0), const(np.array(1, np.int64)))
    valid = op("Unsqueeze", op("Less", op("Unsqueeze", times, axis1),
                               op("Unsqueeze", op("Cast", lengths, to=ir.DataType.INT64), axis0)),
               const(np.array([2], np.int64)))  # [T, B, 1]: t < lengths[b]
    zeros = op("ConstantOfShape", op("Concat", batch, const(np.array([hidden], np.int64)), axis=0),
               value=ir.tensor(np.zeros(1, np_dtype)))
    backwards = [const(np.array([-1], np.int64)), const(np.array([np.iinfo(np.int64).min], np.int64)), axis0,
                 const(np.array([-1], np.int64))]
    outs: list[list] = [[] for _ in range(1 + STATES[kind])]  # Y, Y_h (, Y_c): one part per direction
    for k, reverse in enumerate(DIRECTIONS[node.attributes.get_string("direction", "forward")]):
        w_t, r_t, wb, rb = _weights(op, const, w, r, bias, k, width, np_dtype)
        initial = [op("Gather", s, const(np.array(k, np.int64)), axis=0) if s is not None else zeros
                   for s in (h0, c0)[:STATES[kind]]]
        body = _step_body(kind, activation, x, hidden, (w_t, r_t, wb, rb), const, fresh)
        # the reverse direction scans the time-reversed inputs and reverses its outputs back (a Scan's own
        # scan_input_directions are not implemented by every runtime: onnx.reference's)
        flip = (lambda v: op("Slice", v, *backwards)) if reverse else (lambda v: v)
        *finals, y = op("Scan", *initial, flip(x), flip(valid), outputs=STATES[kind] + 1, body=body,
                        num_scan_inputs=2)
        outs[0].append(op("Unsqueeze", flip(y), axis1))
        for part, final in zip(outs[1:], finals):
            part.append(op("Unsqueeze", final, axis0))
    results = [joined(op, parts, axis=1 if i == 0 else 0) for i, parts in enumerate(outs)]
    replace_node(node, graph, nodes.nodes, results)


def _weights(op, const, w, r, bias, k: int, width: int, np_dtype) -> tuple:
    """Direction ``k``'s ``W^T [I, G*H]``, ``R^T [H, G*H]`` and biases ``wb``, ``rb`` ``[G*H]``:
    initializers computed here when the operator's are initializers, nodes before the loop otherwise."""
    if all(v is None or v.const_value is not None for v in (w, r, bias)):
        b = np.zeros(2 * width, np_dtype) if bias is None else bias.const_value.numpy()[k]
        return (const(w.const_value.numpy()[k].T), const(r.const_value.numpy()[k].T), const(b[:width]),
                const(b[width:]))
    index = const(np.array(k, np.int64))
    w_t = op("Transpose", op("Gather", w, index, axis=0), perm=[1, 0])
    r_t = op("Transpose", op("Gather", r, index, axis=0), perm=[1, 0])
    if bias is None:
        zero = const(np.zeros(width, np_dtype))
        return w_t, r_t, zero, zero
    wb, rb = op("Split", op("Gather", bias, index, axis=0), axis=0, num_outputs=2, outputs=2)
    return w_t, r_t, wb, rb


def _step_body(kind: str, activation: str, x: ir.Value, hidden: int, weights: tuple, const,
               fresh: FreshNames) -> ir.Graph:
    """The Scan body of one direction: ``(states..., x_t, valid) -> (states'..., y_t)``."""
    dtype = x.dtype
    features = x.shape[2] if x.shape is not None and len(x.shape) == 3 else None
    names = ("h", "c")[:STATES[kind]]
    states = [ir.Value(name=fresh(n), type=ir.TensorType(dtype), shape=ir.Shape([None, hidden])) for n in names]
    x_t = ir.Value(name=fresh("x_t"), type=ir.TensorType(dtype), shape=ir.Shape([None, features]))
    valid = ir.Value(name=fresh("valid"), type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([None, 1]))
    nodes = Nodes(None, fresh, f"{kind.lower()}_step")
    op = nodes.op
    new = CELLS[kind](op, const, x_t, states, *weights, activation)
    kept = [op("Where", valid, n, s) for n, s in zip(new, states)]
    y_t = op("Where", valid, new[0], const(np.zeros((), dtype.numpy())))
    for value, name in zip(kept + [y_t], [f"{n}_next" for n in names] + ["y_t"]):
        value.name, value.type, value.shape = fresh(name), ir.TensorType(dtype), ir.Shape([None, hidden])
    return ir.Graph([*states, x_t, valid], [*kept, y_t], nodes=nodes.nodes, name=f"{kind.lower()}_step")
