"""``onnxport.integrations.returnn.capture_hooks``: what it replaces while active, that it restores every
replaced function on exit and on errors, and that a model that is not a RETURNN model exports the same."""

from __future__ import annotations

import pytest
import torch

import returnn_helpers  # noqa: F401 - skips without RETURNN

import onnxport
from onnxport.integrations.returnn import capture_hooks
from onnxport.integrations.returnn_dims import DimValues


def _replaced():
    import returnn.frontend as rf
    from returnn.frontend import _cache, array_
    from returnn.tensor import TensorDict
    from returnn.tensor._dim_extra import _DimMixin

    return {"rf.convert_to_tensor": rf.convert_to_tensor, "array_.convert_to_tensor": array_.convert_to_tensor,
            "rf.constant": rf.constant, "get_dim_value": _DimMixin.__dict__["get_dim_value"],
            "get_dim_value_tensor": _DimMixin.__dict__["get_dim_value_tensor"],
            "assign": TensorDict.__dict__["assign_from_raw_tensor_dict_"], "cache key": _cache._dim_value_for_key}


def test_replaced_while_active_restored_on_exit():
    before = _replaced()
    with capture_hooks():
        inside = _replaced()
        assert all(inside[k] is not before[k] for k in before), [k for k in before if inside[k] is before[k]]
    assert _replaced() == before


def test_restored_when_tracing_raises():
    before = _replaced()
    with pytest.raises(RuntimeError, match="traced model failed"):
        with capture_hooks():
            raise RuntimeError("traced model failed")
    assert _replaced() == before


class _Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x.transpose(1, 2)).transpose(1, 2)
        return torch.nn.functional.max_pool1d(y.transpose(1, 2), 2, ceil_mode=True).transpose(1, 2)


def test_a_model_that_is_not_returnn_exports_the_same():
    x = torch.randn(2, 11, 4)
    spec = {"x": {0: "batch", 1: "time"}}
    plain = onnxport.to_onnx(_Plain().eval(), (x,), dynamic_shapes=spec)
    hooked = onnxport.to_onnx(_Plain().eval(), (x,), dynamic_shapes=spec, capture_hooks=capture_hooks)
    assert [n.op_type for n in hooked.model.graph] == [n.op_type for n in plain.model.graph]
    assert repr(hooked) == repr(plain)
    assert hooked.validate(sizes=[{"batch": 3, "time": 7}, {"batch": 1, "time": 30}]).ok


class _BatchAsTensor(torch.nn.Module):
    """``rf.convert_to_tensor`` of the batch size read from a shape, as RETURNN's export tool does."""

    def forward(self, x):
        import returnn.frontend as rf

        rf.select_backend_torch()
        n = rf.convert_to_tensor(x.shape[0], dtype="int32").raw_tensor
        return x.sum(1) * n


def test_convert_to_tensor_of_a_symbolic_batch_size():
    x = torch.randn(3, 5)
    with pytest.raises(onnxport.CaptureError, match="SymInt"):
        onnxport.to_onnx(_BatchAsTensor(), (x,), dynamic_shapes={"x": {0: "batch"}})
    result = onnxport.to_onnx(_BatchAsTensor(), (x,), dynamic_shapes={"x": {0: "batch"}}, capture_hooks=capture_hooks)
    report = result.validate(sizes=[{"batch": 1}, {"batch": 7}])
    assert report.ok, str(report)


class _Dim:
    """The few attributes of a RETURNN ``Dim`` that ``DimValues`` reads."""

    def __init__(self, dimension=None, op=None):
        self.dimension, self.derived_from_op = dimension, op

    def get_same_base(self):
        return self


class _Op:
    def __init__(self, kind, *inputs):
        self.kind, self.inputs = kind, list(inputs)


def test_dim_values_derived_by_dim_math():
    values = DimValues()
    time, other = _Dim(), _Dim()
    values.record(time, 23)
    values.record(other, 10)
    assert values.value(_Dim(op=_Op("ceildiv", time, _Dim(4)))) == -(-23 // 4)
    assert values.value(_Dim(op=_Op("add", time, _Dim(-30)))) == 0  # RETURNN clips lengths at 0
    assert values.value(_Dim(op=_Op("add", time, _Dim(op=_Op("add", time, _Dim(-1)))))) == 45  # one root: 2*time-1
    assert values.value(_Dim(op=_Op("add", time, other))) is None  # max(a + b) is not max(a) + max(b)
    assert values.value(_Dim(op=_Op("floordiv", time, other))) is None
    assert values.value(_Dim()) is None


def test_ceil_division_in_torch_form_on_symbolic_sizes():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    t = env.create_unbacked_symint()
    values = DimValues()
    time = _Dim()
    values.record(time, t)
    got = values.value(_Dim(op=_Op("ceildiv", time, _Dim(4))))
    assert str(got.node.expr) == str(((t - 1) // 4 + 1).node.expr)
