"""bfloat16 models load and run in onnxruntime's CPU provider: what it has no bfloat16 kernel for
computes in float32 between Casts (``optimize/bfloat16.py``, called by ``finalize``), stated in a
warning and on the result; inputs, outputs and weights stay bfloat16."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import onnxport
from onnxport.errors import TranslationError
from exportcheck import check_export

BF16 = onnx.TensorProto.BFLOAT16


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.down = torch.nn.Linear(32, 6)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.norm(self.up(x)))
        return torch.softmax(self.down(h), dim=-1), h.mean(-1)


def _export(**kwargs):
    model = MLP().to(torch.bfloat16).eval()
    x = torch.randn(3, 5, 8, dtype=torch.bfloat16)
    return model, x, kwargs


@pytest.mark.slow
def test_a_bfloat16_mlp_loads_and_matches_eager_within_bfloat16_tolerance():
    model, x, _ = _export()
    with pytest.warns(UserWarning, match=r"no bfloat16 kernel for .*(Gemm|MatMul)") as caught:
        result = check_export(model, (x,), {"x": {0: Dim("batch"), 1: Dim("seq")}},
                              sizes=[{"batch": 2, "seq": 7}, {"batch": 6, "seq": 1}])
    warned = next(str(w.message) for w in caught if "bfloat16 kernel" in str(w.message))
    assert result.float32_compute and all(op in warned for op in result.float32_compute)
    assert "float32_compute=[" in repr(result)
    proto = result.model_proto
    assert [v.type.tensor_type.elem_type for v in [*proto.graph.input, *proto.graph.output]] == [BF16] * 3
    assert {t.data_type for t in proto.graph.initializer if len(t.dims) == 2} == {BF16}  # the weights


def test_the_saved_bfloat16_model_runs_in_onnxruntime_as_it_is(tmp_path):
    model, x, _ = _export()
    with pytest.warns(UserWarning, match="bfloat16 kernel"):
        result = onnxport.to_onnx(model, (x,), dynamic_shapes={"x": {0: Dim("batch")}})
    path = tmp_path / "mlp.onnx"
    result.save(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(x.view(torch.int16).numpy().view(np.uint16), BF16)
    outs = session.run_with_ort_values(None, {session.get_inputs()[0].name: feed})
    assert [o.data_type() for o in outs] == ["tensor(bfloat16)"] * 2 and outs[0].shape() == [3, 5, 6]


def test_a_float32_model_is_left_as_it_is():
    model = MLP().eval()
    result = check_export(model, (torch.randn(3, 5, 8),), {"x": {0: Dim("batch")}})
    assert result.float32_compute == [] and "float32_compute" not in repr(result)


def test_a_bfloat16_node_onnxruntime_cannot_load_is_refused_with_its_line():
    """EyeLike(dtype=bfloat16) on a float input: its bfloat16 output is set by an attribute, so there
    is no float32 form to compute it in; the export is refused naming it and its line (never a file
    that does not load)."""
    import onnx_ir as ir

    from onnxport.finalize import finalize
    from onnxport.metadata import SOURCE_KEY

    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3, 3]))
    eye = ir.Node("", "EyeLike", [x], [ir.AttrInt64("dtype", ir.DataType.BFLOAT16)])
    eye.outputs[0].name, eye.outputs[0].type = "eye", ir.TensorType(ir.DataType.BFLOAT16)
    eye.outputs[0].shape = ir.Shape([3, 3])
    eye.metadata_props[SOURCE_KEY] = "model.py:7 in forward: torch.eye(3, dtype=torch.bfloat16)"
    model = ir.Model(ir.Graph([x], [eye.outputs[0]], nodes=[eye], opset_imports={"": 20}, name="g"), ir_version=10)
    with pytest.raises(TranslationError, match=r"no bfloat16 kernel for EyeLike at model.py:7 in forward"):
        finalize(model)
