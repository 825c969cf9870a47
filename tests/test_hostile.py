"""Odd and hostile inputs: each a correct model or a clear ExportError, never a crash."""

import onnx
import pytest
import torch

import onnxport
from exportcheck import check_export


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1


def test_zero_size_dim_in_validation():
    r = check_export(Double(), (torch.randn(3, 4),), {"x": {0: "n"}})
    assert r.validate(sizes=[{"n": 0}]).ok


def test_scalar_input_and_output():
    check_export(Double(), (torch.tensor(3.0),), expect_inputs={"x": []}, expect_outputs={"output": []})


class Scalars(torch.nn.Module):
    def forward(self, x, n: int, f: float, flag: bool):
        return x * n * f if flag else x


def test_python_scalars_are_constants_of_the_export():
    r = check_export(Scalars(), (torch.randn(3, 2), 3, 2.5, True), ({0: "n"}, None, None, None))
    assert [v.name for v in r.model.graph.inputs] == ["x"]


class NoneInOut(torch.nn.Module):
    def forward(self, x, mask=None):
        return x * 2, None, x + 1


def test_none_in_inputs_and_outputs():
    r = check_export(NoneInOut(), (torch.randn(3, 2), None), ({0: "n"}, None))
    assert [v.name for v in r.model.graph.outputs] == ["output_0", "output_2"]


def test_python_numbers_returned_are_constant_outputs():
    class Sizes(torch.nn.Module):
        def forward(self, x):
            return x + 1, x.shape[1], 2.5

    r = onnxport.to_onnx(Sizes(), (torch.randn(3, 2),))
    assert [v.name for v in r.model.graph.outputs] == ["output_0", "output_1", "output_2"]
    assert r.validate().ok


def test_a_model_returning_no_tensor_is_refused():
    class NoTensor(torch.nn.Module):
        def forward(self, x):
            return torch.broadcast_shapes(x.shape, (1,))[:0]

    with pytest.raises(onnxport.TranslationError, match="returns no tensor"):
        onnxport.to_onnx(NoTensor(), (torch.randn(3, 2),))


class Mutating(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x):
        self.count.add_(1)
        x.mul_(2)
        return x + self.count


def test_buffer_and_input_mutation_become_extra_outputs():
    r = check_export(Mutating(), (torch.randn(2, 3),), {"x": {0: "n"}})
    assert [v.name for v in r.model.graph.outputs] == ["output", "count.updated", "x.updated"]


class Unused(torch.nn.Module):
    def forward(self, x, unused):
        return x + 1


def test_unused_input_is_kept():
    r = check_export(Unused(), (torch.randn(2, 3), torch.randn(4)), ({0: "n"}, None))
    assert [v.name for v in r.model.graph.inputs] == ["x", "unused"]


@pytest.mark.parametrize("layout", ["transposed", "channels_last"])
def test_non_contiguous_inputs(layout):
    x = (torch.randn(4, 3).t() if layout == "transposed"
         else torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last))
    check_export(Double(), (x,), {"x": {0: "n"}})


class Lin(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4).to(dtype)

    def forward(self, x):
        return self.lin(x) * 2


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_half_and_double_models(dtype):
    check_export(Lin(dtype), (torch.randn(2, 4, dtype=dtype),), {"x": {0: "n"}})


def test_bfloat16_model_is_valid_and_runs_where_onnxruntime_lacks_kernels():
    with pytest.warns(UserWarning, match="no bfloat16 kernel"):
        r = onnxport.to_onnx(Lin(torch.bfloat16), (torch.randn(2, 4, dtype=torch.bfloat16),),
                             dynamic_shapes={"x": {0: "n"}})
    onnx.checker.check_model(r.model_proto, full_check=True)
    assert r.model.graph.inputs[0].dtype.name == "BFLOAT16" and r.float32_compute
    assert r.validate().ok
