"""An onnxruntime session over an exported model, fed with PyTorch tensors."""

from __future__ import annotations

import numpy as np
import torch

from onnxport.errors import ValidationError
from onnxport.verify.compare import to_numpy


class OrtRunner:
    """An onnxruntime session over a model proto or a saved file; ``run(inputs) -> list[np.ndarray]``."""

    def __init__(self, proto, threads: int = 1):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 4  # a failing run raises (and is reported); onnxruntime prints nothing
        try:
            source = proto if isinstance(proto, str) else proto.SerializeToString()
            self.session = ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001
            text = str(e)
            hint = "run onnx.checker.check_model(model, full_check=True) to locate the problem"
            if "NOT_IMPLEMENTED" in text and not isinstance(proto, str) and _uses_bfloat16(proto):
                hint = ("the model is valid ONNX but onnxruntime's CPU provider has no bfloat16 kernel for this "
                        "operator: validate a float32 export (model.float()) or run on a provider with "
                        "bfloat16 support")
            raise ValidationError(f"onnxruntime could not load the model: {text.splitlines()[0][:300]}",
                                  hint=hint) from e
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, tensors: list[torch.Tensor]) -> list[np.ndarray]:
        feeds = {n: to_numpy(t) for n, t in zip(self.input_names, tensors)}
        return self.session.run(None, feeds)


def _uses_bfloat16(proto) -> bool:
    bf16 = 16  # onnx.TensorProto.BFLOAT16
    g = proto.graph
    return any(v.type.tensor_type.elem_type == bf16 for v in list(g.input) + list(g.output)) or \
        any(t.data_type == bf16 for t in g.initializer)


