"""BatchNormalization (inference) folded into the Conv before it.

``BatchNormalization(Conv(x, W, B), scale, bias, mean, var, epsilon)`` with all parameters constant
and the Conv used only there becomes ``Conv(x, W * f, (B - mean) * f + bias)`` where
``f = scale / sqrt(var + epsilon)`` per output channel. The folded weights replace the originals (initializers
keep their names).

Semantics: ONNX Conv and BatchNormalization (inference mode, ``training_mode=0``)
(https://onnx.ai/onnx/operators/onnx__BatchNormalization.html).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.optimize._patterns import FLOAT_TYPES
from onnxport.optimize._scopes import (ScopedPass, attr_float, attr_int, const_array, make_constant, producer_op, prune,
                                       replace_value, single_use)


def _updated(scope, conv, value, array: np.ndarray):
    """``value`` holding ``array`` now: an initializer used only by ``conv`` keeps its name and takes
    the new data; otherwise a new constant."""
    if value is not None and value.is_initializer() and not value.is_graph_input() and len(value.uses()) == 1:
        value.const_value = ir.tensor(array, name=value.name)
        return value
    return make_constant(scope, conv, array)


class ConvBatchNormFusionPass(ScopedPass):
    """Fold inference BatchNormalization into the preceding Conv in every scope."""

    def rewrite(self, scope) -> bool:
        modified = False
        for bn in list(scope):
            if bn.graph is None or bn.op_type != "BatchNormalization" or bn.domain != "":
                continue
            if len(bn.outputs) != 1 or attr_int(bn, "training_mode", 0) != 0:
                continue
            conv = producer_op(bn.inputs[0], "Conv")
            if conv is None or not single_use(bn.inputs[0]) or conv.inputs[0].dtype not in FLOAT_TYPES:
                continue
            params = [const_array(v) for v in bn.inputs[1:5]]
            w = const_array(conv.inputs[1])
            b = const_array(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] is not None else None
            if w is None or any(p is None for p in params) or (len(conv.inputs) > 2 and conv.inputs[2] is not None
                                                               and b is None):
                continue
            scale, bias, mean, var = (p.astype(np.float64) for p in params)
            eps = attr_float(bn, "epsilon", 1e-5)
            f = scale / np.sqrt(var + eps)
            new_w = (w.astype(np.float64) * f.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
            b64 = b.astype(np.float64) if b is not None else np.zeros_like(f)
            new_b = ((b64 - mean) * f + bias).astype(w.dtype)
            old = [v.producer() for v in conv.inputs[1:] if v is not None]
            conv.replace_input_with(1, _updated(scope, conv, conv.inputs[1], new_w))
            if len(conv.inputs) < 3:
                conv.resize_inputs(3)
            conv.replace_input_with(2, _updated(scope, conv, conv.inputs[2], new_b))
            if replace_value(bn.outputs[0], conv.outputs[0]):
                prune(bn)
                for p in old:
                    prune(p)
                modified = True
        return modified
