"""One-line summaries of ONNX types, shapes, tensors and attributes, shared by the text and DOT renderings.

Names follow the ONNX spec (https://onnx.ai/onnx/repo-docs/IR.html): dtypes are written the numpy
way (``float32``, ``int64``, ``bool``), shapes as ``[batch, 16]`` with dim_params as written and
``?`` for an unknown dimension.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

_DTYPE_NAMES = {
    ir.DataType.FLOAT: "float32", ir.DataType.DOUBLE: "float64", ir.DataType.FLOAT16: "float16",
    ir.DataType.BFLOAT16: "bfloat16", ir.DataType.INT8: "int8", ir.DataType.INT16: "int16",
    ir.DataType.INT32: "int32", ir.DataType.INT64: "int64", ir.DataType.UINT8: "uint8",
    ir.DataType.UINT16: "uint16", ir.DataType.UINT32: "uint32", ir.DataType.UINT64: "uint64",
    ir.DataType.BOOL: "bool", ir.DataType.STRING: "string", ir.DataType.COMPLEX64: "complex64",
    ir.DataType.COMPLEX128: "complex128",
}

#: attributes holding a tensor element type as an int (Cast.to, EyeLike.dtype, RandomNormal.dtype...)
_DTYPE_ATTRS = {"to", "dtype", "output_dtype"}
#: tensors with more elements than this are summarized by dtype and shape only
SMALL_TENSOR = 4096
#: longest string attribute shown in full
MAX_STRING = 40
#: int/float list attributes longer than this are cut
MAX_LIST = 16


def dtype_name(dtype: ir.DataType | int | None) -> str:
    """``float32`` for ``ir.DataType.FLOAT``; ``?`` when unknown."""
    if dtype is None:
        return "?"
    try:
        dtype = ir.DataType(dtype)
    except ValueError:
        return f"dtype{int(dtype)}"
    if dtype == ir.DataType.UNDEFINED:
        return "?"
    return _DTYPE_NAMES.get(dtype, dtype.name.lower())


def dim_text(dim: Any) -> str:
    """An int dim as is, a symbolic dim by its name, ``?`` when it has none."""
    if isinstance(dim, int):
        return str(dim)
    value = getattr(dim, "value", dim)
    return "?" if value is None else str(value)


def shape_text(shape: ir.Shape | None) -> str:
    """``[batch, 16]``; ``[]`` for a scalar; empty string when the rank is unknown."""
    if shape is None:
        return ""
    return "[" + ", ".join(dim_text(d) for d in shape) + "]"


def type_text(value: ir.Value) -> str:
    """``float32[batch, 16]`` for a tensor value, ``seq(float32[?])`` for a sequence, '' when unknown."""
    vtype = value.type
    if vtype is None and value.shape is None:
        return ""
    if isinstance(vtype, ir.SequenceType):
        elem = vtype.elem_type
        return f"seq({dtype_name(getattr(elem, 'dtype', None))})"
    if isinstance(vtype, ir.OptionalType):
        return f"optional({dtype_name(getattr(vtype.elem_type, 'dtype', None))})"
    return dtype_name(value.dtype) + shape_text(value.shape)


def value_name(value: ir.Value | None) -> str:
    """The value's name; ``_`` for an omitted optional input or output (empty name)."""
    if value is None or not value.name:
        return "_"
    return value.name


def number_text(x: Any) -> str:
    """Compact text of one element: 4 significant digits for floats."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.4g}"
    if isinstance(x, bytes):
        return repr(x.decode("utf-8", "replace"))
    if isinstance(x, (np.integer, int)):
        return str(int(x))
    return repr(x)


def values_text(values: Any, max_values: int) -> str:
    """``[1, 2, 3, ...]``: the first ``max_values`` items of a flat sequence."""
    values = list(values)
    head = ", ".join(number_text(v) for v in values[:max_values])
    more = ", ..." if len(values) > max_values else ""
    return f"[{head}{more}]"


def tensor_values(tensor: Any, max_values: int) -> str | None:
    """The first values of a small tensor (``0.5`` for a scalar, ``[1, 2, ...]`` otherwise), or None
    when the tensor is large, external and not loaded, or ``max_values`` is 0."""
    if tensor is None or max_values <= 0:
        return None
    size = _size(tensor)
    if size is None or size > SMALL_TENSOR:
        return None
    try:
        array = np.asarray(tensor.numpy())
    except Exception:  # noqa: BLE001 - external data not present, unsupported dtype
        return None
    if array.ndim == 0:
        return number_text(array.item())
    return values_text(array.ravel()[:max_values + 1], max_values)


def tensor_text(tensor: Any, max_values: int) -> str:
    """``int64[2] [1, -1]`` / ``float32 0.5`` / ``float32[512, 512]`` for a large tensor."""
    dims = "" if tensor.shape is None else shape_text(tensor.shape)
    head = dtype_name(tensor.dtype) + ("" if dims == "[]" else dims)
    vals = tensor_values(tensor, max_values)
    return head if vals is None else f"{head} {vals}"


def attr_text(attr: ir.Attr, max_values: int, graph_label: Any = None) -> str:
    """One attribute as ``name=value``, big values summarized.

    ``graph_label(attr_name, index)`` names a subgraph attribute (``body={g1}``); without it a
    subgraph shows as ``<graph NAME: N nodes>``.
    """
    if attr.is_ref():
        return f"{attr.name}=@{attr.ref_attr_name}"
    t, v = attr.type, attr.value
    A = ir.AttributeType
    if t == A.INT and attr.name in _DTYPE_ATTRS:
        text = dtype_name(v)
    elif t in (A.INT, A.FLOAT):
        text = number_text(v)
    elif t == A.STRING:
        text = repr(v if len(v) <= MAX_STRING else v[:MAX_STRING] + "...")
    elif t in (A.INTS, A.FLOATS):
        text = values_text(v, MAX_LIST) if len(v) <= MAX_LIST else values_text(v, max(max_values, 1)) + f"({len(v)})"
    elif t == A.STRINGS:
        text = values_text([s[:MAX_STRING] for s in v], max(max_values, 1))
    elif t == A.TENSOR:
        text = tensor_text(v, max_values)
    elif t == A.TENSORS:
        text = "[" + ", ".join(tensor_text(x, 0) for x in v) + "]"
    elif t == A.GRAPH:
        text = graph_label(attr.name, 0) if graph_label else f"<graph {v.name}: {len(v)} nodes>"
    elif t == A.GRAPHS:
        text = "[" + ", ".join(graph_label(attr.name, i) if graph_label else f"<graph {g.name}>"
                               for i, g in enumerate(v)) + "]"
    else:
        text = str(v)
        if len(text) > MAX_STRING:
            text = text[:MAX_STRING] + "..."
    return f"{attr.name}={text}"


def _size(tensor: Any) -> int | None:
    try:
        return int(tensor.size)
    except Exception:  # noqa: BLE001 - unknown shape
        shape = getattr(tensor, "shape", None)
        if shape is None:
            return None
        return int(np.prod([int(d) for d in shape]))


def op_text(node: ir.Node) -> str:
    """``MatMul`` for the default domain, ``domain.op`` otherwise (local function calls)."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def node_depths(graph: Any) -> dict[ir.Node, int]:
    """Depth of each node from the graph's inputs: 0 when no input is produced inside this graph,
    else one more than the deepest producer in the graph."""
    depth: dict[ir.Node, int] = {}
    for node in graph:
        d = 0
        for v in node.inputs:
            p = v.producer() if v is not None else None
            if p is not None and p in depth:
                d = max(d, depth[p] + 1)
        depth[node] = d
    return depth


def outer_values(graph: Any) -> list[ir.Value]:
    """Values a (sub)graph reads from an enclosing scope: not its inputs, initializers or outputs
    of its own nodes, in first-use order."""
    own_nodes = set(graph)
    own = set(graph.inputs)
    own.update(getattr(graph, "initializers", {}).values() if hasattr(graph, "initializers") else [])
    seen: dict[ir.Value, None] = {}
    for node in graph:
        for v in node.inputs:
            if v is None or v in own or v in seen:
                continue
            p = v.producer()
            if p is None or p not in own_nodes:
                seen[v] = None
    for v in graph.outputs:
        p = v.producer()
        if v not in own and (p is None or p not in own_nodes) and v not in seen:
            seen[v] = None
    return list(seen)
