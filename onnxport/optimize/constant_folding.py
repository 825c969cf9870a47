"""Constant folding with a size cap, including shape computations known statically.

- A node whose inputs are all constants is evaluated (numpy, else ``onnx.reference``) and its
  outputs become ``Constant`` nodes, when no input exceeds ``input_limit`` elements and no output
  exceeds ``size_limit`` elements: large tensors are never materialized.
- ``Shape(x, start, end)`` / ``Size(x)`` fold when the dims they read are static ints.
- ``Transpose`` of an initializer used by nothing else is folded into that initializer whatever its
  size (same number of elements): the ``linear`` weight ``W`` feeding ``MatMul(x, W^T)``. The
  initializer is renamed ``<name>.T`` (``.permuted`` for other permutations), so that nobody copies
  weights by name into the wrong layout.

Semantics: each folded operator per its ONNX spec (https://onnx.ai/onnx/operators/).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.optimize import _evaluators
from onnxport.optimize._scopes import (ScopedPass, attr_ints, const_array, make_constant,
                                       remove_if_unused, replace_value, shape_bounds)

# operators whose outputs vary between runs, or that hold graphs: never folded
_NEVER = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
          "Bernoulli", "Constant", "If", "Loop", "Scan", "SequenceConstruct", "SequenceEmpty"}


class ConstantFoldingPass(ScopedPass):
    """Fold constant subcomputations into ``Constant`` nodes (lifted to initializers later).

    Args:
        opset: default-domain opset of the model (for the ``onnx.reference`` fallback).
        size_limit: largest output (elements) a fold may create.
        input_limit: largest input (elements) a fold may read (Transpose of a weight excepted).
    """

    def __init__(self, opset: int = 20, size_limit: int = 4096, input_limit: int = 1 << 20):
        super().__init__()
        self.opset = opset
        self.size_limit = size_limit
        self.input_limit = input_limit

    def rewrite(self, scope) -> bool:
        modified = False
        for node in list(scope):
            if node.graph is None or node.domain != "" or node.op_type in _NEVER:
                continue
            if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values()):
                continue
            if not any(o.uses() or o.is_graph_output() for o in node.outputs):
                continue
            if self._fold_static_shape(scope, node) or self._fold_weight_transpose(node) \
                    or self._fold_constant_inputs(scope, node):
                modified = True
        return modified

    # ------------------------------------------------------------------ all inputs constant
    def _fold_constant_inputs(self, scope, node: ir.Node) -> bool:
        arrays = []
        for v in node.inputs:
            if v is None:
                arrays.append(None)
                continue
            arr = const_array(v)
            if arr is None or arr.size > self.input_limit:
                return False
            arrays.append(arr)
        if not node.inputs and node.op_type != "ConstantOfShape":
            return False
        outs = _evaluators.evaluate(node, arrays)
        if outs is None:
            if sum(a.size for a in arrays if a is not None) > self.size_limit:
                return False
            outs = _evaluators.evaluate_reference(node, arrays, self.opset)
        if outs is None or len(outs) != len(node.outputs):
            return False
        if any(o.size > self.size_limit or o.dtype == object for o in outs):
            return False
        return self._replace_outputs(scope, node, outs)

    def _replace_outputs(self, scope, node: ir.Node, outs: list[np.ndarray]) -> bool:
        done = False
        for value, arr in zip(node.outputs, outs):
            if not (value.uses() or value.is_graph_output()):
                continue
            if value.dtype is not None and value.dtype != ir.DataType.UNDEFINED:
                try:
                    arr = arr.astype(value.dtype.numpy(), copy=False)
                except Exception:  # noqa: BLE001 - keep numpy's dtype
                    pass
            const = make_constant(scope, node, arr)
            if replace_value(value, const):
                done = True
            else:
                scope.remove(const.producer(), safe=True)
        if done and not any(o.uses() or o.is_graph_output() for o in node.outputs):
            producers = [v.producer() for v in node.inputs if v is not None]
            scope.remove(node, safe=True)
            for p in producers:  # constants feeding only the folded node go too
                if p is not None and p.graph is not None and p.op_type == "Constant":
                    remove_if_unused(p)
        return done

    # ------------------------------------------------------------------ static shapes
    def _fold_static_shape(self, scope, node: ir.Node) -> bool:
        if node.op_type not in ("Shape", "Size") or not node.inputs or node.inputs[0] is None:
            return False
        x = node.inputs[0]
        if x.shape is None:
            return False
        dims = list(x.shape)
        if node.op_type == "Size":
            if not all(isinstance(d, int) for d in dims):
                return False
            return self._replace_outputs(scope, node, [np.array(int(np.prod(dims)), dtype=np.int64)])
        rank = len(dims)
        start, end = shape_bounds(node, rank)
        part = dims[start:end]
        if not all(isinstance(d, int) for d in part):
            return False
        return self._replace_outputs(scope, node, [np.array(part, dtype=np.int64)])

    # ------------------------------------------------------------------ weights
    def _fold_weight_transpose(self, node: ir.Node) -> bool:
        if node.op_type != "Transpose":
            return False
        w = node.inputs[0]
        if w is None or not w.is_initializer() or w.is_graph_input() or w.is_graph_output():
            return False
        if len(w.uses()) != 1 or w.const_value is None:
            return False
        out = node.outputs[0]
        if out.is_graph_output():
            return False
        arr = const_array(w)
        if arr is None:
            return False
        perm = attr_ints(node, "perm") or list(reversed(range(arr.ndim)))
        data = np.ascontiguousarray(np.transpose(arr, perm))
        # the stored layout is no longer the parameter's: the name says so (``encoder.weight.T``)
        # (the new tensor first: renaming the value renames its tensor, which may be the caller's)
        suffix = ".T" if list(perm) == list(reversed(range(arr.ndim))) else ".permuted"
        w.const_value = ir.tensor(data, name=w.name)
        if not w.name.endswith(suffix):
            w.name = w.name + suffix
        w.shape = ir.Shape(data.shape)
        w.metadata_props["transposed_perm"] = ",".join(str(p) for p in perm)
        out.replace_all_uses_with(w)
        node.graph.remove(node, safe=True)
        return True
