"""Values that hold one element repeated, and the ``Where`` nodes they decide.

A value is *uniform* when every element of it is the same known scalar, at any size: a constant
whose elements are all equal, and what ``Expand``, ``Cast``, ``Not``, ``Identity`` and
``ReduceMax`` / ``ReduceMin`` (over axes of a known nonzero size) make of one. ``Where`` on a
uniform condition is the branch it selects, when that branch already has the output's dtype and
shape (the broadcast would add nothing). The nodes left unused go with the pass after it
(``RemoveUnusedNodesPass``).

Where they come from: an attention mask that masks nothing, built by the model as a constant
expanded to the batch (Hugging Face's ``create_bidirectional_mask`` without a padding mask, as in
ViT), turned into the additive bias ``Where(mask, 0, -inf)`` of ``scaled_dot_product_attention``:
the bias is a uniform zero, its ``Add`` to the scores is the scores, and the fully-masked-row guard
``Where(IsNaN(probs), 0, probs)`` over a softmax of unmasked scores is the probabilities. The
constant folder cannot see through them: the ``Expand`` has a dynamic shape.

Why ours: onnxscript's constant folder folds nodes whose inputs are all constant, and its rules
match fixed patterns; neither follows a scalar through an ``Expand`` of dynamic shape.

Semantics: ONNX operator specs of Where, Expand, Cast, Not, ReduceMax, ReduceMin
(https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from onnxport.optimize._scopes import ScopedPass, axes_of, const_array, dims, prune, replace_value

_NONE = object()


def uniform(value: ir.Value | None, seen: dict | None = None) -> tuple[Any, list | None]:
    """``(element, dims)``: the scalar every element of ``value`` holds (a numpy scalar, or
    ``_NONE`` when unknown) and its dims (ints / dim_params, None when unknown), the dims followed
    through the nodes when the value carries none."""
    seen = {} if seen is None else seen
    if value is None:
        return _NONE, None
    if value in seen:
        return seen[value]
    seen[value] = (_NONE, None)
    arr = const_array(value)
    if arr is not None:
        element = arr.reshape(-1)[0] if arr.size > 0 and bool(np.all(arr == arr.reshape(-1)[0])) else _NONE
        result = (element, list(arr.shape))
    else:
        element, shape = _through(value.producer(), seen)
        result = (element, dims(value) or shape)
    seen[value] = result
    return result


def _through(node: ir.Node | None, seen: dict) -> tuple[Any, list | None]:
    if node is None or node.domain != "" or len(node.outputs) != 1 or not node.inputs:
        return _NONE, None
    op = node.op_type
    if op == "Where" and len(node.inputs) == 3 and None not in node.inputs:
        cond, cond_dims = uniform(node.inputs[0], seen)
        if cond is _NONE:
            return _NONE, None
        (a, a_dims), (b, b_dims) = uniform(node.inputs[1], seen), uniform(node.inputs[2], seen)
        return (a if bool(cond) else b), _broadcast([cond_dims, a_dims, b_dims])
    if op not in ("Expand", "Identity", "Cast", "Not", "ReduceMax", "ReduceMin"):
        return _NONE, None
    x, shape = uniform(node.inputs[0], seen)
    if x is _NONE:
        return _NONE, None
    if op == "Expand":
        return x, dims(node.outputs[0])
    if op == "Cast":
        to = node.attributes.get_int("to")
        if to is None:
            return _NONE, None
        try:
            return np.asarray(x).astype(ir.DataType(to).numpy())[()], shape
        except (TypeError, ValueError):  # a dtype numpy has no cast for
            return _NONE, None
    if op == "Not":
        return np.logical_not(x), shape
    if op in ("ReduceMax", "ReduceMin"):
        return _reduced(node, x, shape)
    return x, shape


def _reduced(node: ir.Node, x: Any, shape: list | None) -> tuple[Any, list | None]:
    """A ReduceMax/ReduceMin of a uniform ``x`` of dims ``shape``: ``x`` when every reduced axis has
    a known nonzero size (an empty axis gives the reduction's identity instead), with its dims."""
    if shape is None:
        return _NONE, None
    rank = len(shape)
    axes = axes_of(node)
    if axes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        return _NONE, None  # axes computed at run time
    axes = list(axes or [])
    if not axes:
        if node.attributes.get_int("noop_with_empty_axes", 0):
            return x, shape
        axes = list(range(rank))
    if any(not -rank <= a < rank for a in axes):
        return _NONE, None
    axes = sorted({a % rank for a in axes})
    if not all(isinstance(shape[a], int) and shape[a] > 0 for a in axes):
        return _NONE, None
    if node.attributes.get_int("keepdims", 1):
        return x, [1 if i in axes else d for i, d in enumerate(shape)]
    return x, [d for i, d in enumerate(shape) if i not in axes]


def _broadcast(shapes: list[list | None]) -> list | None:
    """The multidirectional broadcast of known dims (ONNX broadcasting), None when unknown or when
    two dims other than 1 differ."""
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        ds = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(ds) > 1:
            return None
        out.append(ds.pop() if ds else 1)
    return out


def _zero_added(node: ir.Node, seen: dict) -> ir.Value | None:
    """``x`` of ``Add(x, z)`` / ``Add(z, x)`` with ``z`` a uniform zero whose broadcast leaves
    ``x``'s dims and dtype as they are (an attention bias that masks nothing), else None."""
    for x, z in (node.inputs, tuple(reversed(node.inputs))):
        if z is None or z.producer() is None or z.producer().op_type not in ("Where", "Expand"):
            continue  # a computed bias, not a weight that happens to hold zeros
        element, z_dims = uniform(z, seen)
        if element is _NONE or x is None or x.dtype != node.outputs[0].dtype or x.dtype is None \
                or not x.dtype.is_floating_point() or float(element) != 0.0:
            continue
        if dims(x) is not None and _broadcast([dims(x), z_dims]) == dims(x):
            return x
    return None


def _needless_nan_guard(node: ir.Node) -> ir.Value | None:
    """``p`` of ``Where(IsNaN(p), c, p)`` with ``p = Softmax(MatMul(...))``: the fully-masked-row guard
    of attention whose scores have no mask added; softmax gives NaN there only from NaN or infinite
    inputs, where PyTorch gives NaN too."""
    cond, _, p = node.inputs
    guard = cond.producer()
    if guard is None or guard.op_type != "IsNaN" or guard.inputs[0] is not p:
        return None
    softmax = p.producer()
    scores = softmax.inputs[0].producer() if softmax is not None and softmax.op_type == "Softmax" else None
    return p if scores is not None and scores.op_type == "MatMul" else None


class UniformWherePass(ScopedPass):
    """``Where`` on a uniform condition becomes the selected branch (see the module docstring), an
    ``Add`` of a uniform zero its other operand, and attention's NaN guard over scores left without
    a mask the probabilities."""

    def rewrite(self, scope) -> bool:
        modified = False
        seen: dict = {}
        for node in list(scope):
            if node.graph is None or node.domain != "" or not node.outputs:
                continue
            if node.op_type == "Add" and len(node.inputs) == 2:
                x = _zero_added(node, seen)
                if x is not None and replace_value(node.outputs[0], x):
                    modified = True
                    prune(node)
                continue
            if node.op_type != "Where" or len(node.inputs) != 3:
                continue
            p = _needless_nan_guard(node) if None not in node.inputs else None
            if p is not None and dims(p) == dims(node.outputs[0]) and replace_value(node.outputs[0], p):
                modified = True
                prune(node)
                continue
            cond, cond_dims = uniform(node.inputs[0], seen)
            if cond is _NONE or None in node.inputs:
                continue
            chosen = node.inputs[1] if bool(cond) else node.inputs[2]
            out = node.outputs[0]
            target = dims(chosen)
            if target is None or chosen.dtype != out.dtype or \
                    _broadcast([cond_dims, dims(node.inputs[1]), dims(node.inputs[2])]) != target:
                continue
            if replace_value(out, chosen):
                modified = True
                prune(node)
        return modified
