"""RMSNormalization fusion (opset >= 23) from the root-mean-square formula.

Matches ``x * Reciprocal(Sqrt(mean(x^2) + eps))`` (or ``x / Sqrt(...)``) over the last k axes
with an optional ``* scale`` of the normalized shape, and replaces it by
``RMSNormalization(x, scale, axis=-k, epsilon)``.

Semantics: ONNX RMSNormalization (https://onnx.ai/onnx/operators/onnx__RMSNormalization.html).
"""

from __future__ import annotations

import numpy as np

from onnxport.optimize._patterns import (FLOAT_TYPES, normalizer, NormalizerFusion, only_consumer, operands,
                                         reduce_mean_axes, squared, static_tail, trailing)
from onnxport.optimize._scopes import make_constant, make_node, producer_op, prune, replace_value


class RMSNormFusionPass(NormalizerFusion):
    """Fuse the RMS-norm formula into ``RMSNormalization`` in every scope (opset 23 models)."""

    def _fuse(self, scope, node) -> bool:
        found = normalizer(node)
        if found is None:
            return False
        x, var, eps = found
        if x.shape is None or x.dtype not in FLOAT_TYPES or producer_op(x, "Sub") is not None:
            return False
        rank = len(x.shape)
        var_node = producer_op(var, "ReduceMean")
        axes = reduce_mean_axes(var_node, rank)
        if axes is None or squared(var_node.inputs[0]) is not x:
            return False
        k = trailing(axes, rank)
        norm_shape = static_tail(x, k) if k else None
        if norm_shape is None:
            return False
        out, scale = node.outputs[0], None
        mul = only_consumer(out, "Mul")
        pair = operands(mul, first_test=lambda v: v.shape is not None and list(v.shape) == norm_shape) \
            if mul is not None else None
        if pair is not None and pair[1] is out and pair[0].dtype == x.dtype:
            scale, out = pair[0], mul.outputs[0]
        last = out.producer()
        if scale is None:
            scale = make_constant(scope, last, np.ones(norm_shape, dtype=x.dtype.numpy()))
        rms = make_node(scope, last, "RMSNormalization", [x, scale], {"axis": -k, "epsilon": float(eps)})
        if not replace_value(out, rms.outputs[0]):
            scope.remove(rms, safe=True)
            return False
        prune(last)
        return True
