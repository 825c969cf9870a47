"""Shape arithmetic: fewer, simpler nodes computing sizes and shape lists.

- One source per dimension: ``Shape(v, i, i+1)`` reading a dimension named ``d`` (dim_param) is
  rewired to the first input of the scope carrying ``d``, so equal sizes are computed once (the
  duplicates then merge by CSE).
- ``Gather(Shape(x, s, e), [k...])`` with consecutive constant indices becomes
  ``Shape(x, s+k, s+k+n)``; ``Unsqueeze(Gather(Shape(x, s, e), k), [0])`` with a scalar ``k`` becomes
  ``Shape(x, s+k, s+k+1)``.
- ``Concat`` of 1-D int64 pieces: adjacent ``Shape`` slices of one value merge into one ``Shape``,
  adjacent constants into one constant; a single piece left replaces the ``Concat``.
- ``Reshape(x, computed)`` takes a constant shape (``allowzero=0``) when the result's dims allow: a
  dim equal to ``x``'s dim at the same position becomes ``0`` (copy), a static dim its value, and a
  single remaining unknown ``-1`` when all others are static (a ``-1`` beside a copied dim is
  ambiguous for zero sizes); a ``[x0, rest]`` result becomes ``Flatten(x, axis=1)``.
- ``Expand(x, computed)`` takes a constant shape when every result dim is static or equal to the
  aligned dim of ``x`` (then ``1``).

Why ours: the sizes here are named (dim_params), and equal names are equal sizes. onnxscript's
``fold_constants`` tracks shape values through Shape/Gather/Concat but replaces them only when every
dim is static; its ``materialize_reshape_shape_rule`` makes a Reshape's shape constant only with at
most one symbolic dim (written ``-1``), never copying a named dim with ``0``; no library pass reads
each named size from one place or merges the pieces of a shape list into Shape slices.

Semantics: ONNX Shape (start/end), Gather, Concat, Reshape (allowzero), Expand (bidirectional
broadcasting) specs (https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.optimize._scopes import (ScopedPass, const_array, const_ints, make_constant, make_node,
                                       producer_op, remove_if_unused, replace_value, shape_bounds)

_I64 = ir.DataType.INT64


def _shape_range(node: ir.Node) -> tuple[ir.Value, int, int | None] | None:
    """(x, start, end) of a Shape node with its bounds normalized; end None: to the end of an
    input of unknown rank."""
    x = node.inputs[0]
    if x is None:
        return None
    if x.shape is None:  # unknown rank: only a non-negative start with no end is understood
        start = node.attributes.get_int("start", 0)
        return (x, start, None) if start >= 0 and node.attributes.get_int("end") is None else None
    rank = len(x.shape)
    start, end = shape_bounds(node, rank)
    return x, start, end


def _dim_param(d) -> str | None:
    """The name of a symbolic dim (``SymbolicDim`` with a value), else None (ints, unknown dims)."""
    return d.value if isinstance(d, ir.SymbolicDim) else None


def _new_shape(scope, before: ir.Node, x: ir.Value, start: int, end: int) -> ir.Value:
    node = make_node(scope, before, "Shape", [x], {"start": start, "end": end})
    out = node.outputs[0]
    out.type = ir.TensorType(_I64)
    out.shape = ir.Shape([end - start])
    return out


class ShapeArithmeticPass(ScopedPass):
    """Simplify size and shape-list computations in every scope (see the module docstring)."""

    def rewrite(self, scope) -> bool:
        sources: dict[str, tuple[ir.Value, int]] = {}
        for v in scope.inputs:
            for axis, d in enumerate(v.shape or []):
                name = _dim_param(d)
                if name is not None and name not in sources:
                    sources[name] = (v, axis)
        modified = False
        for node in list(scope):
            if node.graph is None or node.domain != "":
                continue
            rule = getattr(self, f"_{node.op_type.lower()}", None)
            if rule is not None and rule(scope, node, sources):
                modified = True
        return modified

    # ------------------------------------------------------------------ rules
    def _shape(self, scope, node, sources) -> bool:
        rng = _shape_range(node)
        if rng is None or rng[2] is None or rng[2] != rng[1] + 1:
            return False
        x, start, _ = rng
        src = sources.get(_dim_param(x.shape[start]))
        if src is None or src[0] is x:
            return False
        node.replace_input_with(0, src[0])
        node.attributes["start"] = ir.AttrInt64("start", src[1])
        node.attributes["end"] = ir.AttrInt64("end", src[1] + 1)
        return True

    def _gather(self, scope, node, sources) -> bool:
        shape_node = producer_op(node.inputs[0], "Shape")
        if shape_node is None or node.attributes.get_int("axis", 0) != 0:
            return False
        rng = _shape_range(shape_node)
        idx_arr = const_ints(node.inputs[1])
        if rng is None or idx_arr is None or not idx_arr:
            return False
        x, start, end = rng
        if end is None:
            if min(idx_arr) < 0:
                return False
            n = max(idx_arr) + 1  # the run-time rank is at least this (else Gather fails anyway)
        else:
            n = end - start
        idx = [i + n if i < 0 else i for i in idx_arr]
        if any(not 0 <= i < n for i in idx) or idx != list(range(idx[0], idx[0] + len(idx))):
            return False
        out = node.outputs[0]
        scalar = const_array(node.inputs[1]).ndim == 0
        if not scalar:
            new = _new_shape(scope, node, x, start + idx[0], start + idx[0] + len(idx))
            if not replace_value(out, new):
                remove_if_unused(new.producer())
                return False
            remove_if_unused(node)
            remove_if_unused(shape_node)
            return True
        done = False
        for user in list(out.consumers()):
            if user.op_type == "Unsqueeze" and user.domain == "" and len(user.inputs) > 1 \
                    and const_ints(user.inputs[1]) in ([0], [-1]) and user.inputs[0] is out:
                new = _new_shape(scope, user, x, start + idx[0], start + idx[0] + 1)
                if replace_value(user.outputs[0], new):
                    remove_if_unused(user)
                    done = True
                else:
                    remove_if_unused(new.producer())
        if done and remove_if_unused(node):
            remove_if_unused(shape_node)
        return done

    def _concat(self, scope, node, sources) -> bool:
        out = node.outputs[0]
        if node.attributes.get_int("axis", 0) not in (0, -1) or out.dtype != _I64 or out.shape is None \
                or len(out.shape) != 1:
            return False
        pieces: list = []  # ("shape", x, start, end) | ("const", [ints]) | ("value", v)
        for v in node.inputs:
            c = const_ints(v)
            s = producer_op(v, "Shape")
            rng = _shape_range(s) if s is not None else None
            if c is not None and v.shape is not None and len(v.shape) == 1:
                if pieces and pieces[-1][0] == "const":
                    pieces[-1] = ("const", pieces[-1][1] + c)
                else:
                    pieces.append(("const", c))
            elif rng is not None and rng[2] is not None:
                x, start, end = rng
                last = pieces[-1] if pieces else None
                if last is not None and last[0] == "shape" and last[1] is x and last[3] == start:
                    pieces[-1] = ("shape", x, last[2], end)
                else:
                    pieces.append(("shape", x, start, end))
            else:
                pieces.append(("value", v))
        if len(pieces) == len([v for v in node.inputs if v is not None]):
            return False
        values = []
        for p in pieces:
            if p[0] == "const":
                values.append(make_constant(scope, node, np.array(p[1], dtype=np.int64)))
            elif p[0] == "shape":
                values.append(_new_shape(scope, node, p[1], p[2], p[3]))
            else:
                values.append(p[1])
        old_inputs = [v.producer() for v in node.inputs if v is not None]
        if len(values) == 1:
            if not replace_value(out, values[0]):
                return False
            remove_if_unused(node)
        else:
            node.resize_inputs(len(values))
            for i, v in enumerate(values):
                node.replace_input_with(i, v)
        for p in old_inputs:
            if p is not None and p.graph is not None:
                remove_if_unused(p)
        return True

    def _reshape(self, scope, node, sources) -> bool:
        if len(node.inputs) < 2 or const_ints(node.inputs[1]) is not None:
            return False
        x, y = node.inputs[0], node.outputs[0]
        if y.shape is None or x.shape is None:
            return False
        xd = list(x.shape)
        shape, unknown, copies = [], 0, 0
        for i, d in enumerate(y.shape):
            name = _dim_param(d)
            if isinstance(d, int) and d > 0:
                shape.append(d)
            elif name is not None and i < len(xd) and _dim_param(xd[i]) == name:
                shape.append(0)
                copies += 1
            else:
                shape.append(-1)
                unknown += 1
        if unknown == 1 and copies:
            return self._as_flatten(scope, node, x, y, shape)
        if unknown > 1:
            return False
        # static sizes, copies of x's dims, or one -1 beside static sizes only: right for zero sizes too
        node.attributes.pop("allowzero", None)
        return self._set_shape_input(scope, node, shape)

    @staticmethod
    def _as_flatten(scope, node, x, y, shape: list[int]) -> bool:
        """A result ``[x0, rest]`` of ``Reshape`` is ``Flatten(x, axis=1)``: no shape list, and right
        for zero sizes (``[0, -1]`` is ambiguous when ``x0`` is 0)."""
        if shape != [0, -1] or len(x.shape) < 2:
            return False
        axis = 1
        flat = make_node(scope, node, "Flatten", [x], {"axis": axis}).outputs[0]
        if not replace_value(y, flat):
            scope.remove(flat.producer(), safe=True)
            return False
        remove_if_unused(node)
        return True

    def _expand(self, scope, node, sources) -> bool:
        if len(node.inputs) < 2 or const_ints(node.inputs[1]) is not None:
            return False
        x, y = node.inputs[0], node.outputs[0]
        if y.shape is None or x.shape is None or len(y.shape) < len(x.shape):
            return False
        offset = len(y.shape) - len(x.shape)
        shape = []
        for i, d in enumerate(y.shape):
            xdim = x.shape[i - offset] if i >= offset else None
            name = _dim_param(d)
            if isinstance(d, int):
                shape.append(d)
            elif name is not None and xdim is not None and _dim_param(xdim) == name:
                shape.append(1)
            else:
                return False
        return self._set_shape_input(scope, node, shape)

    @staticmethod
    def _set_shape_input(scope, node: ir.Node, shape: list[int]) -> bool:
        old = node.inputs[1]
        node.replace_input_with(1, make_constant(scope, node, np.array(shape, dtype=np.int64)))
        p = old.producer()
        if p is not None:
            remove_if_unused(p)
        return True
