"""An onnxruntime session over an exported model, fed with PyTorch tensors."""

from __future__ import annotations

import numpy as np
import torch

from onnxport.errors import ValidationError
from onnxport.verify.compare import to_numpy


class OrtRunner:
    """An onnxruntime session over a model proto or a saved file; ``run(inputs) -> list[np.ndarray]``.

    A model proto with bfloat16 inputs or outputs, which NumPy cannot hold, runs with float32 ones
    in their place, cast to and from bfloat16 at the edge of the graph (``float_io``): it is fed
    and read as ``to_numpy`` gives eager PyTorch's bfloat16 tensors, with the same values.
    """

    label = "onnxruntime"  # the runtime's name in validation's notes (verify.runtimes)

    def __init__(self, proto, threads: int = 1):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 4  # a failing run raises (and is reported); onnxruntime prints nothing
        try:
            source = proto if isinstance(proto, str) else float_io(proto).SerializeToString()
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




def float_io(proto):
    """``proto``, or a copy of it whose bfloat16 graph inputs and outputs are float32, a ``Cast``
    to bfloat16 after each such input and one to float32 before each such output (the names kept).
    Every bfloat16 value is exactly a float32 one, so the copy computes the same values."""
    bf16 = 16  # onnx.TensorProto.BFLOAT16
    g = proto.graph
    if not any(v.type.tensor_type.elem_type == bf16 for v in list(g.input) + list(g.output)):
        return proto
    import onnx_ir as ir

    model = ir.serde.deserialize_model(proto)
    graph = model.graph
    for k, value in enumerate(list(graph.inputs)):
        if value.dtype != ir.DataType.BFLOAT16:
            continue
        name = value.name
        value.name = f"{name}_bfloat16"
        outer = ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=value.shape)
        cast = ir.Node("", "Cast", [outer], [ir.AttrInt64("to", ir.DataType.BFLOAT16)])
        inner = cast.outputs[0]
        inner.name, inner.type, inner.shape = f"{name}_bfloat16_cast", value.type, value.shape
        graph.inputs[k] = outer
        if len(graph):
            graph.insert_before(graph.node(0), cast)
        else:
            graph.append(cast)
        value.replace_all_uses_with(inner)
        graph.outputs[:] = [inner if o is value else o for o in graph.outputs]
    for k, value in enumerate(list(graph.outputs)):
        if value.dtype != ir.DataType.BFLOAT16:
            continue
        cast = ir.Node("", "Cast", [value], [ir.AttrInt64("to", ir.DataType.FLOAT)])
        graph.append(cast)
        out = cast.outputs[0]
        out.type, out.shape = ir.TensorType(ir.DataType.FLOAT), value.shape
        name = value.name
        value.name = f"{name}_bfloat16"
        out.name = name
        graph.outputs[k] = out
    return ir.serde.serialize_model(model)
