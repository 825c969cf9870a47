"""Removal of nodes that compute nothing, and of inverse pairs.

Removed (output replaced by the input): ``Identity``; ``Cast`` to the input's type; ``Transpose``
with the identity permutation, or two Transposes that cancel (two that do not cancel become one
when the inner one has no other use); ``Reshape`` and ``Expand`` whose output shape equals the
input's (all dims known: ints or the same dim_param); ``Reshape(Reshape(x, s1), s2)`` with a
constant ``s2`` without 0 reads ``x``; ``Squeeze(Unsqueeze(x, a), a)``, and
``Unsqueeze(Squeeze(x, a), a)`` when the squeezed dims of ``x`` are statically 1 (the 1-D size round
trip); ``Slice`` with steps 1 keeping the whole shape; ``Concat`` of one input.
``Squeeze(Transpose(Unsqueeze(x)))`` dropping exactly the inserted axes becomes one ``Transpose``;
``Unsqueeze(Unsqueeze(x))`` one ``Unsqueeze``; ``x * 1``, ``x / 1``, ``x + 0``, ``x - 0`` with a
``Constant`` (not a weight initializer) that does not broadcast ``x``. A graph output keeps its
name and shape: when the replacement is a graph input, an initializer, another output or a value
of an outer scope, the node stays.

Why these are ours rather than a library's:

- onnx-ir's ``IdentityEliminationPass`` renames an Identity's input after its output even when the
  input is itself a graph output: two outputs then share one value and one output name is lost.
- onnxscript's rules compare shapes as static ints (``no_op_expand_rule`` needs a constant shape),
  take one non-negative axis per Unsqueeze (``unsqueeze_unsqueeze_rule``) and 0-d neutral constants,
  initializers included (``add_0_rule``...): the dim_param comparisons, axis lists, broadcast check
  and weight exclusion here remove more, or keep what must stay.
- onnxscript's ``no_op_transpose_rule`` and ``transpose_transpose_rule`` give the same node counts
  on the benchmark models but, tried at every node of every graph, add up to 40% to the whole
  optimization time.

Semantics: ONNX operator specs of Identity, Cast, Transpose, Reshape, Expand, Squeeze, Unsqueeze,
Slice, Concat (https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.optimize._scopes import (ScopedPass, axes_of, const_array, const_ints, dims,
                                       make_constant, make_node, normalized_axes, producer_op, prune,
                                       remove_if_unused, replace_value, same_known_shape, single_use)


def _perm(node: ir.Node) -> list[int] | None:
    """The ``perm`` attribute of a Transpose as a list, None when absent."""
    perm = node.attributes.get_ints("perm")
    return None if perm is None else list(perm)


def _fits_within(shape: tuple, x: ir.Value) -> bool:
    """Broadcasting a constant of ``shape`` with ``x`` keeps ``x``'s shape."""
    if x.shape is None or len(shape) > len(x.shape):
        return False
    tail = list(x.shape)[len(x.shape) - len(shape):]
    return all(c == 1 or (isinstance(d, int) and d == c) for c, d in zip(shape, tail))


def _neutral(node: ir.Node, element: int, both_sides: bool):
    """The other operand of a binary node whose constant operand is all ``element``, when the
    result has that operand's dtype and shape."""
    if len(node.inputs) != 2 or None in node.inputs:
        return None
    pairs = [(node.inputs[0], node.inputs[1])] + ([(node.inputs[1], node.inputs[0])] if both_sides else [])
    y = node.outputs[0]
    for x, c in pairs:
        if c.is_initializer():  # weights (all-zero biases...) keep their role: they may be replaced later
            continue
        arr = const_array(c)
        if arr is None or arr.size == 0 or not bool(np.all(arr == element)) or x.dtype is None:
            continue
        if x.dtype != y.dtype and y.dtype is not None:
            continue
        if same_known_shape(x, y) or _fits_within(arr.shape, x):
            return x
    return None


class NoOpRemovalPass(ScopedPass):
    """Remove no-op and self-cancelling nodes in every scope (see the module docstring)."""

    def rewrite(self, scope) -> bool:
        modified = False
        for node in list(scope):
            if node.graph is None or node.domain != "" or len(node.outputs) != 1:
                continue
            rule = getattr(self, f"_{node.op_type.lower()}", None)
            if rule is None:
                continue
            replacement = rule(scope, node)
            if replacement is not None and replace_value(node.outputs[0], replacement):
                modified = True
                prune(node)
        return modified

    # ------------------------------------------------------------------ rules: return the value to use
    def _identity(self, scope, node):
        return node.inputs[0]

    def _cast(self, scope, node):
        x = node.inputs[0]
        to = node.attributes.get_int("to")
        return x if x is not None and x.dtype is not None and to is not None and x.dtype == ir.DataType(to) else None

    def _transpose(self, scope, node):
        x = node.inputs[0]
        perm = _perm(node)
        if perm is None:
            return None
        if perm == list(range(len(perm))):
            return x
        inner = producer_op(x, "Transpose")
        inner_perm = _perm(inner) if inner is not None else None
        if inner_perm is None or len(inner_perm) != len(perm):
            return None
        combined = [inner_perm[p] for p in perm]  # out[i] = x[inner_perm[perm[i]]]
        if combined == list(range(len(perm))):
            return inner.inputs[0]
        if single_use(x):
            node.replace_input_with(0, inner.inputs[0])
            node.attributes["perm"] = ir.AttrInt64s("perm", combined)
            remove_if_unused(inner)
            return None
        return None

    def _reshape(self, scope, node):
        x, y = node.inputs[0], node.outputs[0]
        if same_known_shape(x, y):
            return x
        inner = producer_op(x, "Reshape")
        shape = const_ints(node.inputs[1])
        if inner is not None and shape is not None and 0 not in shape and single_use(x):
            node.replace_input_with(0, inner.inputs[0])  # Reshape(Reshape(a, s1), s2) = Reshape(a, s2)
            remove_if_unused(inner)
        return None

    def _expand(self, scope, node):
        x, y = node.inputs[0], node.outputs[0]
        return x if same_known_shape(x, y) else None

    def _squeeze(self, scope, node):
        x = node.inputs[0]
        inner = producer_op(x, "Unsqueeze")
        if inner is None:
            return self._squeeze_transposed_unsqueeze(scope, node)
        a, b = axes_of(node), axes_of(inner)
        if a is None or b is None:
            return None
        src = inner.inputs[0]
        if x.shape is not None:
            rank = len(x.shape)
        elif src.shape is not None:
            rank = len(src.shape) + len(b)
        elif min(a + b) >= 0:
            rank = 0
        else:
            return None
        return src if normalized_axes(a, rank) == normalized_axes(b, rank) else None

    @staticmethod
    def _squeeze_transposed_unsqueeze(scope, node):
        """``Squeeze(Transpose(Unsqueeze(x, U), perm), S)`` that drops exactly the inserted axes:
        one ``Transpose`` of ``x`` (or ``x`` itself)."""
        t = producer_op(node.inputs[0], "Transpose")
        u = producer_op(t.inputs[0], "Unsqueeze") if t is not None else None
        perm = _perm(t) if t is not None else None
        if u is None or perm is None or not single_use(node.inputs[0]) or not single_use(t.inputs[0]):
            return None
        rank = len(perm)
        inserted, dropped = axes_of(u), axes_of(node)
        if inserted is None or dropped is None:
            return None
        inserted, dropped = normalized_axes(inserted, rank), normalized_axes(dropped, rank)
        if sorted(perm[i] for i in dropped) != inserted:
            return None
        source = {}
        for i in range(rank):
            if i not in inserted:
                source[i] = len(source)
        new_perm = [source[perm[i]] for i in range(rank) if i not in dropped]
        if new_perm == list(range(len(new_perm))):
            return u.inputs[0]
        return make_node(scope, node, "Transpose", [u.inputs[0]], {"perm": new_perm}).outputs[0]

    def _unsqueeze(self, scope, node):
        x = node.inputs[0]
        inner = producer_op(x, "Squeeze")
        if inner is None:
            self._merge_unsqueezes(scope, node)
            return None
        src = inner.inputs[0]
        src_dims = dims(src)
        a, b = axes_of(node), axes_of(inner)
        if src_dims is None or a is None:
            return None
        rank = len(src_dims)
        if b is None:  # no axes: every dim of size 1 is squeezed; axes computed at run time: unknown
            if len(inner.inputs) > 1 and inner.inputs[1] is not None:
                return None
            b = [i for i, d in enumerate(src_dims) if d == 1]
        b = normalized_axes(b, rank)
        if normalized_axes(a, rank) != b or any(src_dims[i] != 1 for i in b):
            return None
        return src

    @staticmethod
    def _merge_unsqueezes(scope, node) -> None:
        """``Unsqueeze(Unsqueeze(x, a1), a2)`` -> ``Unsqueeze(x, a)`` when the inner one has no other use."""
        inner = producer_op(node.inputs[0], "Unsqueeze")
        if inner is None or not single_use(node.inputs[0]) or inner.inputs[0].shape is None:
            return
        a1, a2 = axes_of(inner), axes_of(node)
        if a1 is None or a2 is None or len(inner.inputs) < 2 or len(node.inputs) < 2:
            return
        final = len(inner.inputs[0].shape) + len(a1) + len(a2)
        a2 = normalized_axes(a2, final)
        kept = [i for i in range(final) if i not in a2]  # final positions of the intermediate axes
        a1 = normalized_axes(a1, final - len(a2))
        axes = sorted(a2 + [kept[p] for p in a1])
        node.replace_input_with(0, inner.inputs[0])
        node.replace_input_with(1, make_constant(scope, node, np.array(axes, dtype=np.int64)))
        prune(inner)

    def _slice(self, scope, node):
        x, y = node.inputs[0], node.outputs[0]
        steps = const_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else []
        if steps is None or any(s != 1 for s in steps):
            return None
        return x if same_known_shape(x, y) else None

    # x * 1, x / 1, x + 0, x - 0 with a constant that does not broadcast x to a larger shape
    def _mul(self, scope, node):
        return _neutral(node, 1, both_sides=True)

    def _div(self, scope, node):
        return _neutral(node, 1, both_sides=False)

    def _add(self, scope, node):
        return _neutral(node, 0, both_sides=True)

    def _sub(self, scope, node):
        return _neutral(node, 0, both_sides=False)

    def _concat(self, scope, node):
        ins = [v for v in node.inputs if v is not None]
        return ins[0] if len(ins) == 1 else None

