"""Scopes and value surgery shared by onnxport's own passes.

A *scope* is one graph-like container of nodes: the main graph, every subgraph held by a node
attribute (If/Loop/Scan bodies), and every local function (``model.functions``) with its own
subgraphs; onnx-ir lists them (``Model.graphs``, ``Function.subgraphs``). ``ScopedPass`` runs a
pass's ``rewrite(scope)`` on each of them.

What stays here is onnxport's policy, which onnx-ir's convenience functions leave to the caller:
an initializer that is also a graph input is not a constant (``const_array``), a graph output keeps
its name and shape and is never rebound to a graph input, an initializer, another output or an
outer-scope value (``replace_value``), dims compare as ints or dim_params (``dims``).

Values used inside a subgraph but defined outside it count as used: onnx-ir records a subgraph
node's input as a use of the outer value, so ``Value.uses()`` sees it.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir


def scopes(model: ir.Model) -> list:
    """Every scope of ``model``: main graph, its subgraphs, each function and its subgraphs."""
    out: list = list(model.graphs())
    for fn in model.functions.values():
        out.append(fn)
        out.extend(fn.subgraphs())
    return out


def graphs(model: ir.Model) -> list[ir.Graph]:
    """The graph of every scope of ``model`` (a function's body graph in place of the function)."""
    return [scope.graph if isinstance(scope, ir.Function) else scope for scope in scopes(model)]


class ScopedPass(ir.passes.InPlacePass):
    """An in-place pass applying ``rewrite(scope) -> bool`` to every scope of the model (onnx-ir's
    passes each walk the graphs their own way; this is the walk of onnxport's passes)."""

    def rewrite(self, scope) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Run the pass on every scope; ``modified`` is True when any scope changed."""
        modified = False
        for scope in scopes(model):
            if self.rewrite(scope):
                modified = True
        return ir.passes.PassResult(model, modified)


# ------------------------------------------------------------------------------- constants
def _const_tensor(value: ir.Value | None) -> ir.TensorProtocol | None:
    """The tensor of a constant ``value`` (initializer or ``Constant`` output, read by
    ``onnx_ir.convenience.get_const_tensor``), else None.

    An initializer that is also a graph input can be overridden at run time: not constant.
    """
    if value is None or value.is_graph_input():
        return None
    try:
        return ir.convenience.get_const_tensor(value)
    except Exception:  # noqa: BLE001 - attribute references are not constants
        return None


def const_array(value: ir.Value | None) -> np.ndarray | None:
    """The numpy value of ``value`` when it is constant (see ``_const_tensor``)."""
    tensor = _const_tensor(value)
    try:
        return None if tensor is None else tensor.numpy()
    except Exception:  # noqa: BLE001 - external or exotic tensors are not read
        return None


def is_constant(value: ir.Value | None) -> bool:
    """``value`` is a constant (see ``_const_tensor``), told without reading its data."""
    return _const_tensor(value) is not None


def const_ints(value: ir.Value | None) -> list[int] | None:
    """A constant integer tensor as a flat list of Python ints, else None."""
    arr = const_array(value)
    if arr is None or arr.dtype.kind not in "iu":
        return None
    return [int(v) for v in arr.reshape(-1)]


def scalar(value: ir.Value | None) -> float | None:
    """The number held by a one-element float/int constant, else None (a larger constant is not
    read)."""
    tensor = _const_tensor(value)
    if tensor is None or tensor.size != 1:
        return None
    arr = const_array(value)
    if arr is None or arr.size != 1 or arr.dtype.kind not in "fiu":
        return None
    return float(arr.reshape(-1)[0])


def make_constant(scope, before: ir.Node, array: np.ndarray) -> ir.Value:
    """Insert a ``Constant`` node holding ``array`` before ``before``; return its output (typed, with
    its ``const_value``)."""
    tensor = ir.tensor(np.asarray(array))
    node = ir.node("Constant", [], {"value": tensor})
    out = node.outputs[0]
    out.type = ir.TensorType(tensor.dtype)
    out.shape = ir.Shape(tensor.shape)
    out.const_value = tensor
    scope.insert_before(before, node)
    return out


def make_node(scope, before: ir.Node, op_type: str, inputs, attrs: dict | None = None) -> ir.Node:
    """Insert the one-output ONNX-domain node ``op_type(inputs, **attrs)`` before ``before``; return it."""
    node = ir.node(op_type, list(inputs), {k: v for k, v in (attrs or {}).items() if v is not None})
    scope.insert_before(before, node)
    return node


# ------------------------------------------------------------------------------- shapes
def dims(value: ir.Value | None) -> list | None:
    """Dims of ``value`` as ints / dim_param strings, or None when the shape or any dim is unknown."""
    if value is None or value.shape is None:
        return None
    out = []
    for d in value.shape:
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, ir.SymbolicDim) and d.value is not None:
            out.append(d.value)
        else:
            return None
    return out


def same_known_shape(a: ir.Value, b: ir.Value) -> bool:
    """Both shapes fully known (ints or dim_params) and equal dim by dim."""
    da, db = dims(a), dims(b)
    return da is not None and da == db


# ------------------------------------------------------------------------------- replacement
def _merge_meta(old: ir.Value, new: ir.Value) -> None:
    if new.type is None:
        new.type = old.type
    if new.shape is None:
        new.shape = old.shape
    elif old.shape is not None and len(old.shape) == len(new.shape):
        merged = []
        changed = False
        for o, n in zip(old.shape, new.shape):
            n_known = isinstance(n, int) or (isinstance(n, ir.SymbolicDim) and n.value is not None)
            if not n_known and (isinstance(o, int) or (isinstance(o, ir.SymbolicDim) and o.value is not None)):
                merged.append(o)
                changed = True
            else:
                merged.append(n)
        if changed:
            new.shape = ir.Shape(merged)


def replace_value(old: ir.Value, new: ir.Value) -> bool:
    """Make every user of ``old`` (nodes, subgraph nodes, graph outputs) use ``new``.

    A graph output keeps its name and shape: ``new`` takes them when it is an intermediate value
    of the same scope; when it cannot (``new`` is a graph input, an initializer, another output or
    comes from an outer scope) nothing changes and False is returned.
    """
    if old is new:
        return False
    if old.is_graph_output():
        if new.is_graph_input() or new.is_initializer() or new.is_graph_output():
            return False
        producer = new.producer()
        if producer is None or producer.graph is not old.graph:
            return False
        _merge_meta(old, new)
        new.shape = old.shape if old.shape is not None else new.shape
        name = old.name
        old.name = None
        new.name = name
        ir.convenience.replace_all_uses_with(old, new, replace_graph_outputs=True)
        return True
    _merge_meta(old, new)
    ir.convenience.replace_all_uses_with(old, new)
    return True


def single_use(value: ir.Value) -> bool:
    """``value`` feeds exactly one node input and is not a graph output."""
    return len(value.uses()) == 1 and not value.is_graph_output()


def remove_if_unused(node: ir.Node) -> bool:
    """Remove ``node`` from its scope when none of its outputs is used; True when removed."""
    if node.graph is None:
        return False
    for out in node.outputs:
        if out.uses() or out.is_graph_output():
            return False
    node.graph.remove(node, safe=True)
    return True


def producer_op(value: ir.Value | None, op_type: str) -> ir.Node | None:
    """The producer of ``value`` when it is an ONNX-domain ``op_type`` node."""
    if value is None:
        return None
    node = value.producer()
    if node is not None and node.op_type == op_type and node.domain == "":
        return node
    return None





def axes_of(node: ir.Node) -> list[int] | None:
    """The ``axes`` of a Squeeze/Unsqueeze/Reduce* node: its constant second input (opset 13/18
    form) or its ``axes`` attribute; None when neither is known."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return const_ints(node.inputs[1])
    axes = node.attributes.get_ints("axes")
    return None if axes is None else list(axes)


def normalized_axes(axes: list[int], rank: int) -> list[int]:
    """``axes`` of a rank-``rank`` tensor, negative ones counted from the end, sorted."""
    return sorted(a + rank if a < 0 else a for a in axes)


def shape_bounds(node: ir.Node, rank: int) -> tuple[int, int]:
    """(start, end) of a ``Shape`` node reading a rank-``rank`` input: its ``start``/``end``
    attributes, negative ones counted from the end, clamped to [0, rank] (ONNX Shape-15 spec)."""
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    start = max(0, min(rank, start + rank if start < 0 else start))
    end = max(0, min(rank, end + rank if end < 0 else end))
    return start, end


def prune(node: ir.Node | None) -> None:
    """Remove ``node`` when unused, then its producers that became unused (within its scope)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None or n.graph is None:
            continue
        producers = [v.producer() for v in n.inputs if v is not None]
        if remove_if_unused(n):
            stack.extend(p for p in producers if p is not None)
