"""Axes and defaults written as pattern-based fusion tools read them.

onnxport's translations write axes as non-negative numbers (``Concat(..., axis=3)``,
``LayerNormalization(x, ..., axis=2)``, ``ReduceMean(x, [2])``). onnxruntime's fusion tools
(onnxscript's ``ort_fusions`` behind ``optimize_for_ort``, the transformers optimizer) match their
patterns on attribute and constant values as torch.onnx writes them: the last axis as ``-1``
(rotary embedding's ``Concat(-x2, x1, axis=-1)``, ``LayerNormalization(axis=-1)`` before
``SkipLayerNormalization``, the RMS norm's ``ReduceMean(x^2, [-1])``). On a value whose rank is
known, this pass writes the last axis as ``-1`` on ``Concat``, ``Softmax``, ``LogSoftmax``,
``LayerNormalization`` and the ``axes`` of ``ReduceMean`` (a one-element constant, replaced by a
shared ``[-1]`` initializer; in the main graph and its subgraphs). ``ReduceMean`` also gets its
``noop_with_empty_axes=0`` written out (the default), which those patterns require spelled. The axis
is the same one and the attribute its default: nothing computed changes.

Why ours: no library pass canonicalizes axes; onnx-ir's and onnxscript's passes keep them as written.

Semantics: ONNX operators accept negative axes counted from the end (``axis + rank``),
https://onnx.ai/onnx/operators/.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.optimize._scopes import const_ints, scopes

AXIS_ATTRIBUTE_OPS = frozenset({"Concat", "Softmax", "LogSoftmax", "LayerNormalization"})
AXES_INPUT_OPS = frozenset({"ReduceMean"})
LAST_AXIS_NAME = "last_axis"


def _rank(value: ir.Value | None) -> int | None:
    return len(value.shape) if value is not None and value.shape is not None else None


class FusionFormsPass(ir.passes.InPlacePass):
    """Write the last axis as ``-1`` and ReduceMean's default attribute out (see the module docstring)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Rewrite the axes; ``modified`` when any changed."""
        modified = False
        last: list[ir.Value] = []  # the shared [-1] initializer, made on first use

        def minus_one() -> ir.Value:
            if not last:
                name = LAST_AXIS_NAME
                while name in model.graph.initializers:
                    name += "_"
                value = ir.Value(name=name, const_value=ir.tensor(np.array([-1], dtype=np.int64), name=name),
                                 type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([1]))
                model.graph.register_initializer(value)
                last.append(value)
            return last[0]

        for scope in scopes(model):
            in_main_scope = not isinstance(scope, ir.Function)  # initializers are read from the main graph
            for node in (scope.graph if isinstance(scope, ir.Function) else scope):
                if node.domain not in ("", "ai.onnx"):
                    continue
                if node.op_type in AXIS_ATTRIBUTE_OPS:
                    r = _rank(node.inputs[0] if node.op_type != "Concat" else node.outputs[0])
                    axis = node.attributes.get_int("axis", None)
                    if r and axis is not None and axis == r - 1:
                        node.attributes["axis"] = ir.AttrInt64("axis", -1)
                        modified = True
                elif node.op_type in AXES_INPUT_OPS and in_main_scope and len(node.inputs) > 1:
                    r, axes = _rank(node.inputs[0]), const_ints(node.inputs[1])
                    if r and axes == [r - 1]:
                        node.replace_input_with(1, minus_one())
                        modified = True
                    if "noop_with_empty_axes" not in node.attributes:
                        node.attributes["noop_with_empty_axes"] = ir.AttrInt64("noop_with_empty_axes", 0)
                        modified = True
        return ir.passes.PassResult(model, modified)
