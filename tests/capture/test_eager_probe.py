"""A condition torch.export's trace states is probed in eager PyTorch before it is adopted or refused on:
where eager runs at sizes it excludes and onnxruntime matches eager there, it is no constraint."""

import dataclasses

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import onnxport
from onnxport.capture.guards.conditions import EAGER_RUNS, GuardStatus
from onnxport.settle import _differs
from tests.exportcheck import check_export


class LastAsMany(torch.nn.Module):
    """``x[:, -m:]`` with ``m`` another input's length: Python clamps where ``m > n``."""

    def forward(self, x, y):
        return x[:, -y.shape[1]:] * 2 + y.sum()


@pytest.mark.parametrize("dims", [({1: Dim("n", min=1)}, {1: Dim("m", min=1)}), ({1: "n"}, {1: "m"})],
                         ids=["explicit ranges", "named without a range"])
def test_a_condition_eager_pytorch_contradicts_is_neither_adopted_nor_refused(dims):
    result = check_export(LastAsMany(), (torch.randn(2, 8), torch.randn(2, 5)), dims,
                          sizes=[{"n": 3, "m": 6}, {"n": 9, "m": 2}])
    assert result.constraints == []
    probed = [g for g in result.guards if g.text == "m <= n"]
    assert probed and probed[0].status is GuardStatus.KEPT  # validation looks where it would have excluded
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    x, y = torch.randn(2, 2), torch.randn(2, 7)
    got = session.run(None, {"x": x.numpy(), "y": y.numpy()})[0]
    np.testing.assert_allclose(got, LastAsMany()(x, y).numpy(), rtol=1e-6)


def test_where_onnxruntime_differs_an_explicit_range_is_refused_and_a_named_dim_adopts_it_saying_why():
    results = [onnxport.to_onnx(LastAsMany(), (torch.randn(2, 8), torch.randn(2, 5)), dynamic_shapes=dims)
               for dims in (({1: Dim("n", min=1)}, {1: Dim("m", min=1)}), ({1: "n"}, {1: "m"}))]
    explicit, named = ([g for g in r.guards if g.text == "m <= n"][0] for r in results)
    trial = dataclasses.replace(explicit, status=GuardStatus.ADOPTED, method=EAGER_RUNS)
    said = r"(?s)holds only where m <= n.*detail: eager PyTorch runs at n=1, m=2"
    with pytest.raises(onnxport.DynamicShapesError, match=said):
        _differs(results[0], trial, "n=1, m=2")
    adopted = _differs(results[1], dataclasses.replace(named, status=GuardStatus.ADOPTED, method=EAGER_RUNS),
                       "n=1, m=2")
    assert adopted.status is GuardStatus.ADOPTED and "eager PyTorch runs at n=1, m=2" in adopted.note
