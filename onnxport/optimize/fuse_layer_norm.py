"""LayerNormalization fusion (opset >= 17) from the mean / variance formula.

Matches ``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`` (also ``* Reciprocal(Sqrt(...))``,
``Pow(d, 2)`` or ``Mul(d, d)``) over the last k axes, with an optional ``* scale`` and ``+ bias`` of
the normalized shape, and replaces it by ``LayerNormalization(x, scale, bias, axis=-k, epsilon)``.

Semantics: ONNX LayerNormalization (https://onnx.ai/onnx/operators/onnx__LayerNormalization.html).
"""

from __future__ import annotations

import numpy as np

from onnxport.optimize._patterns import (FLOAT_TYPES, affine, normalizer, NormalizerFusion, reduce_mean_axes,
                                         squared, static_tail, trailing)
from onnxport.optimize._scopes import make_constant, make_node, producer_op, prune, replace_value


class LayerNormFusionPass(NormalizerFusion):
    """Fuse the layer-norm formula into ``LayerNormalization`` in every scope."""

    def _fuse(self, scope, node) -> bool:
        found = normalizer(node)
        if found is None:
            return False
        d, var, eps = found
        sub = producer_op(d, "Sub")
        if sub is None:
            return False
        x, mean = sub.inputs
        if x.shape is None or x.dtype not in FLOAT_TYPES:
            return False
        rank = len(x.shape)
        axes = reduce_mean_axes(mean.producer(), rank)
        if axes is None or mean.producer().inputs[0] is not x:
            return False
        var_node = producer_op(var, "ReduceMean")
        if var_node is None or reduce_mean_axes(var_node, rank) != axes or squared(var_node.inputs[0]) is not d:
            return False
        k = trailing(axes, rank)
        norm_shape = static_tail(x, k) if k else None
        if norm_shape is None:
            return False
        out, scale, bias = affine(node.outputs[0], norm_shape)
        last = out.producer()
        if scale is None:
            scale = make_constant(scope, last, np.ones(norm_shape, dtype=x.dtype.numpy()))
        if scale.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
            return False
        inputs = [x, scale] + ([bias] if bias is not None else [])
        ln = make_node(scope, last, "LayerNormalization", inputs, {"axis": -k, "epsilon": float(eps)})
        if not replace_value(out, ln.outputs[0]):
            scope.remove(ln, safe=True)
            return False
        prune(last)
        return True
