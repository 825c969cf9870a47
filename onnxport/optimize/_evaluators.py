"""Numpy evaluation of ONNX nodes whose inputs are all constants, for constant folding.

Each evaluator follows the ONNX operator spec (https://onnx.ai/onnx/operators/) of opsets 18-23
for the attributes it reads. ``evaluate(node, arrays)`` returns the output arrays, or None when
the operator is not covered here; ``evaluate_reference`` falls back to ``onnx.reference``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx_ir as ir

from onnxport.optimize._scopes import attr_int, attr_ints, shape_bounds

_EVAL: dict[str, Callable] = {}


def _op(*names: str):
    def deco(fn):
        for n in names:
            _EVAL[n] = fn
        return fn

    return deco


def _axes(node, arrays, index: int = 1):
    if len(arrays) > index and arrays[index] is not None:
        return [int(a) for a in arrays[index].reshape(-1)]
    return attr_ints(node, "axes")


@_op("Identity")
def _identity(node, a):
    return [a[0]]


@_op("Cast")
def _cast(node, a):
    return [a[0].astype(ir.DataType(attr_int(node, "to")).numpy())]


@_op("Shape")
def _shape(node, a):
    shape = np.array(a[0].shape, dtype=np.int64)
    rank = len(shape)
    start, end = shape_bounds(node, rank)
    return [shape[start:end]]


@_op("Size")
def _size(node, a):
    return [np.array(a[0].size, dtype=np.int64)]


@_op("Reshape")
def _reshape(node, a):
    shape = [int(s) for s in a[1]]
    if not attr_int(node, "allowzero", 0):
        shape = [a[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [a[0].reshape(shape)]


@_op("Unsqueeze")
def _unsqueeze(node, a):
    x = a[0]
    axes = sorted(ax + x.ndim + len(_axes(node, a)) if ax < 0 else ax for ax in _axes(node, a))
    for ax in axes:
        x = np.expand_dims(x, ax)
    return [x]


@_op("Squeeze")
def _squeeze(node, a):
    axes = _axes(node, a)
    return [np.squeeze(a[0], axis=tuple(axes)) if axes else np.squeeze(a[0])]


@_op("Concat")
def _concat(node, a):
    return [np.concatenate(a, axis=attr_int(node, "axis"))]


@_op("Gather")
def _gather(node, a):
    return [np.take(a[0], a[1].astype(np.int64), axis=attr_int(node, "axis", 0))]


@_op("Slice")
def _slice(node, a):
    x = a[0]
    starts, ends = a[1].reshape(-1), a[2].reshape(-1)
    axes = a[3].reshape(-1) if len(a) > 3 and a[3] is not None else range(len(starts))
    steps = a[4].reshape(-1) if len(a) > 4 and a[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        index[int(ax)] = slice(int(s), int(e), int(st))
    return [x[tuple(index)]]


@_op("Transpose")
def _transpose(node, a):
    return [np.ascontiguousarray(np.transpose(a[0], attr_ints(node, "perm")))]


def _same_dtype(fn):
    def wrapped(node, a):
        out = fn(*a)
        return [np.asarray(out).astype(a[0].dtype, copy=False)]

    return wrapped


def _int_div(x, y):
    if x.dtype.kind in "iu":
        q = np.floor_divide(x, y)
        fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return q + fix.astype(q.dtype)  # ONNX Div truncates toward zero on integers
    return x / y


for _name, _fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", _int_div),
                   ("Neg", np.negative), ("Abs", np.abs), ("Sqrt", np.sqrt), ("Floor", np.floor),
                   ("Ceil", np.ceil), ("Sign", np.sign), ("Reciprocal", np.reciprocal), ("Exp", np.exp),
                   ("Log", np.log), ("Max", np.maximum), ("Min", np.minimum)):
    _EVAL[_name] = _same_dtype(_fn)


@_op("Pow")
def _pow(node, a):
    return [np.power(a[0], a[1].astype(a[0].dtype)).astype(a[0].dtype)]


@_op("Mod")
def _mod(node, a):
    fn = np.fmod if attr_int(node, "fmod", 0) else np.remainder
    return [fn(a[0], a[1]).astype(a[0].dtype)]


for _name, _fn in (("Equal", np.equal), ("Less", np.less), ("Greater", np.greater),
                   ("LessOrEqual", np.less_equal), ("GreaterOrEqual", np.greater_equal),
                   ("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)):
    _EVAL[_name] = (lambda f: lambda node, a: [np.asarray(f(a[0], a[1]))])(_fn)


@_op("Not")
def _not(node, a):
    return [np.logical_not(a[0])]


@_op("Where")
def _where(node, a):
    return [np.where(a[0], a[1], a[2]).astype(a[1].dtype)]


@_op("Range")
def _range(node, a):
    return [np.arange(a[0].item(), a[1].item(), a[2].item(), dtype=a[0].dtype)]


@_op("ConstantOfShape")
def _constant_of_shape(node, a):
    value = node.attributes.get("value")
    fill = value.as_tensor().numpy().reshape(-1) if value is not None else np.zeros(1, np.float32)
    return [np.full([int(d) for d in a[0]], fill[0], dtype=fill.dtype)]


@_op("Expand")
def _expand(node, a):
    shape = np.broadcast_shapes(a[0].shape, tuple(int(d) for d in a[1]))
    return [np.ascontiguousarray(np.broadcast_to(a[0], shape))]


def _reduce(fn):
    def wrapped(node, a):
        axes = _axes(node, a)
        keep = bool(attr_int(node, "keepdims", 1))
        if not axes:
            if attr_int(node, "noop_with_empty_axes", 0):
                return [a[0]]
            axes = None
        out = fn(a[0], axis=None if axes is None else tuple(axes), keepdims=keep)
        return [np.asarray(out).astype(a[0].dtype)]

    return wrapped


for _name, _fn in (("ReduceSum", np.sum), ("ReduceProd", np.prod), ("ReduceMax", np.max),
                   ("ReduceMin", np.min), ("ReduceMean", np.mean)):
    _EVAL[_name] = _reduce(_fn)


def evaluate(node: ir.Node, arrays: list) -> list[np.ndarray] | None:
    """Outputs of ``node`` on constant ``arrays`` (None for omitted optional inputs), or None when
    the operator has no numpy evaluator here or evaluation fails."""
    fn = _EVAL.get(node.op_type)
    if fn is None:
        return None
    try:
        with np.errstate(all="ignore"):
            return [np.asarray(o) for o in fn(node, arrays)]
    except Exception:  # noqa: BLE001 - a node numpy cannot evaluate is left to run time
        return None


def evaluate_reference(node: ir.Node, arrays: list, opset: int) -> list[np.ndarray] | None:
    """Outputs of ``node`` computed by ``onnx.reference`` on a one-node model, or None on failure."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    names = [f"i{i}" if a is not None else "" for i, a in enumerate(arrays)]
    try:
        proto = ir.serde.serialize_node(node)
        del proto.input[:]
        proto.input.extend(names)
        del proto.output[:]
        outs = [f"o{i}" for i in range(len(node.outputs))]
        proto.output.extend(outs)
        graph = onnx.helper.make_graph(
            [proto], "fold",
            [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in zip(names, arrays) if a is not None],
            [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outs])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        feeds = {n: a for n, a in zip(names, arrays) if a is not None}
        return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]
    except Exception:  # noqa: BLE001 - left to run time
        return None
