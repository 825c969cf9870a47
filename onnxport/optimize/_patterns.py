"""Small matchers shared by the fusion passes: commutative operands, scalars, reductions."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.optimize._scopes import ScopedPass, attr_int, axes_of, normalized_axes, producer_op, scalar

FLOAT_TYPES = {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE}


def operands(node: ir.Node, first_op: str | None = None, first_test=None):
    """(a, b) inputs of a two-input commutative node with ``a`` produced by ``first_op`` (or passing
    ``first_test(value)``), trying both orders; None when neither matches."""
    if node is None or len(node.inputs) != 2 or None in node.inputs:
        return None
    x, y = node.inputs
    for a, b in ((x, y), (y, x)):
        if first_op is not None and producer_op(a, first_op) is None:
            continue
        if first_test is not None and not first_test(a):
            continue
        return a, b
    return None


def only_consumer(value: ir.Value, op_type: str) -> ir.Node | None:
    """The single ``op_type`` node consuming ``value`` (its only use, not a graph output)."""
    uses = value.uses()
    if len(uses) != 1 or value.is_graph_output():
        return None
    node = next(iter(uses)).node
    return node if node.op_type == op_type and node.domain == "" else None


def reduce_mean_axes(node: ir.Node | None, rank: int) -> list[int] | None:
    """Normalized axes of ``ReduceMean(keepdims=1)`` with constant axes, else None."""
    if node is None or node.op_type != "ReduceMean" or attr_int(node, "keepdims", 1) != 1:
        return None
    axes = axes_of(node)
    return normalized_axes(axes, rank) if axes else None


def trailing(axes: list[int] | None, rank: int) -> int | None:
    """k when ``axes`` are the last k axes of a rank-``rank`` tensor, else None."""
    if not axes or axes != list(range(rank - len(axes), rank)):
        return None
    return len(axes)


def squared(value: ir.Value) -> ir.Value | None:
    """``t`` when ``value`` is ``Pow(t, 2)`` or ``Mul(t, t)``."""
    node = producer_op(value, "Pow")
    if node is not None and scalar(node.inputs[1]) == 2.0:
        return node.inputs[0]
    node = producer_op(value, "Mul")
    if node is not None and node.inputs[0] is node.inputs[1]:
        return node.inputs[0]
    return None


def normalizer(node: ir.Node) -> tuple[ir.Value, ir.Value, float] | None:
    """For ``n = t / Sqrt(v + eps)`` or ``n = t * Reciprocal(Sqrt(v + eps))``: (t, v, eps)."""
    if node.op_type == "Div":
        t, s = node.inputs
        sqrt = producer_op(s, "Sqrt")
    elif node.op_type == "Mul":
        pair = operands(node, "Reciprocal")
        if pair is None:
            return None
        r, t = pair
        sqrt = producer_op(r.producer().inputs[0], "Sqrt")
    else:
        return None
    add = producer_op(sqrt.inputs[0], "Add") if sqrt is not None else None
    pair = operands(add, first_test=lambda v: scalar(v) is not None) if add is not None else None
    if pair is None:
        return None
    eps, var = pair
    return t, var, scalar(eps)


def static_tail(value: ir.Value, k: int) -> list[int] | None:
    """The last ``k`` dims of ``value`` when they are all static ints."""
    if value.shape is None or len(value.shape) < k:
        return None
    tail = list(value.shape)[len(value.shape) - k:]
    return [int(d) for d in tail] if all(isinstance(d, int) for d in tail) else None


def affine(value: ir.Value, norm_shape: list[int]):
    """Optional ``* scale`` then ``+ bias`` after ``value`` with parameters of shape ``norm_shape``:
    (last value, scale or None, bias or None)."""
    def fits(v: ir.Value) -> bool:
        return v.shape is not None and [d for d in v.shape] == norm_shape

    out, scale, bias = value, None, None
    mul = only_consumer(out, "Mul")
    pair = operands(mul, first_test=fits) if mul is not None else None
    if pair is not None and pair[1] is out:
        scale, out = pair[0], mul.outputs[0]
    add = only_consumer(out, "Add")
    pair = operands(add, first_test=fits) if add is not None else None
    if pair is not None and pair[1] is out:
        bias, out = pair[0], add.outputs[0]
    return out, scale, bias


class NormalizerFusion(ScopedPass):
    """Base of the norm fusions: ``_fuse(scope, node)`` tried on each ``Div``/``Mul`` that may end a
    normalization formula (``x / sqrt(var + eps)`` or ``x * rsqrt(...)``)."""

    def rewrite(self, scope) -> bool:
        modified = False
        for node in list(scope):
            if node.graph is not None and node.op_type in ("Div", "Mul") and node.domain == "":
                modified |= self._fuse(scope, node)
        return modified

    def _fuse(self, scope, node) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError
