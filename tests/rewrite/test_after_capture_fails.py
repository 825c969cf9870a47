"""By default, a Python loop over a dynamic size or a branch on a data-dependent count is rewritten
after capture fails on it (one warning naming the construct and its line): the loop becomes a
``Scan``, the branch an ``If`` holding both sides, each compared with eager PyTorch through
onnxruntime on inputs that take every side. ``rewrite_control_flow=False`` gives the error
instead; a construct the rewriter cannot express keeps the error."""

from __future__ import annotations

import contextlib
import sys
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

import onnxport
from exportcheck import check_export, count_ops


class CountBranch(torch.nn.Module):
    """The branch is on how many values are positive: a count known only when the model runs."""

    def forward(self, x):
        kept = x[x > 0]
        if kept.numel() > 3:
            y = kept.sum() * 2
        else:
            y = kept.sum() - 1
        return y


class RowLoop(torch.nn.Module):
    def forward(self, x, y):
        dist = torch.empty(x.shape[0], y.shape[0])
        for i in range(x.shape[0]):
            dist[i, :] = ((y - x[i:i + 1]) ** 2).sum(1)
        return dist


class CountReturn(torch.nn.Module):
    """A data-dependent count returned through a Python int: nothing the rewriter can express."""

    def forward(self, x):
        kept = x[x > 0]
        return torch.zeros(int(kept.numel()) if kept.numel() > 2 else 1)


def _run(result, x: torch.Tensor) -> np.ndarray:
    session = ort.InferenceSession(result.model_proto.SerializeToString())
    return session.run(None, {"x": x.numpy()})[0]


def test_a_branch_on_a_data_dependent_count_becomes_if():
    with pytest.warns(UserWarning, match=r"onnxport rewrote the if at .*test_after_capture_fails.py:\d+ in forward"):
        result = onnxport.to_onnx(CountBranch(), (torch.randn(8),), dynamic_shapes={"x": {0: "n"}})
    assert count_ops(result, "If") == 1
    for x in (torch.tensor([1.0, 2, -1, 3, 4]), torch.tensor([1.0, -2, -1]), torch.randn(40), torch.zeros(2)):
        np.testing.assert_allclose(_run(result, x), CountBranch()(x).numpy(), rtol=1e-5, atol=1e-6)


def test_without_the_rewrite_the_branch_is_an_error():
    with pytest.raises(onnxport.DataDependentError, match=r"kept.shape\[0\] > 3"):
        onnxport.to_onnx(CountBranch(), (torch.randn(8),), dynamic_shapes={"x": {0: "n"}},
                         rewrite_control_flow=False)


@pytest.mark.slow
def test_a_loop_over_a_dynamic_size_becomes_scan():
    x, y = torch.randn(3, 4), torch.randn(5, 4)
    dims = {"x": {0: "x_rows", 1: "dim"}, "y": {0: "y_rows", 1: "dim"}}
    with pytest.warns(UserWarning, match=r"onnxport rewrote the for at .*test_after_capture_fails.py:\d+ in forward"):
        result = check_export(RowLoop(), (x, y), dims, expect_outputs={"output": ["x_rows", "y_rows"]})
    assert count_ops(result, "Scan") == 1
    with pytest.raises(onnxport.SpecializationError, match=r"range\(x.shape\[0\]\)"):
        onnxport.to_onnx(RowLoop(), (x, y), dynamic_shapes=dims, rewrite_control_flow=False)


def test_what_the_rewriter_cannot_express_keeps_the_error():
    with warnings.catch_warnings(record=True) as caught, pytest.raises(onnxport.ExportError) as info:
        warnings.simplefilter("always")
        onnxport.to_onnx(CountReturn(), (torch.randn(8),), dynamic_shapes={"x": {0: "n"}})
    assert "test_after_capture_fails.py" in str(info.value)
    assert not [w for w in caught if "rewrote" in str(w.message)]  # no notice of a rewrite that did not help


class ConstantSide(torch.nn.Module):
    """One side of the data-dependent branch is a constant tensor (a cond branch returning a constant)."""

    def forward(self, x):
        kept = x[x > 0]
        if kept.numel() > 3:
            y = kept[:3] * 2
        else:
            y = torch.zeros(3)
        return y


@pytest.mark.slow
def test_a_branch_returning_a_constant():
    with pytest.warns(UserWarning, match="onnxport rewrote the if"):
        result = onnxport.to_onnx(ConstantSide(), (torch.randn(8),), dynamic_shapes={"x": {0: "n"}})
    for x in (torch.tensor([1.0, 2, 3, 4, -1]), -torch.rand(5), torch.rand(2)):
        np.testing.assert_allclose(_run(result, x), ConstantSide()(x).numpy())


class FirstFour(torch.nn.Module):
    """The true side is written for the sizes its predicate selects (``x[:4]``)."""

    def forward(self, x):
        if x.shape[0] > 3:
            return x[:4] * 2
        return x * 3


def test_a_range_the_traced_side_needs_is_not_adopted_when_the_if_takes_the_other_side():
    # x[:4] clamps (Min(4, n), no guard on n); the if on n > 3 is the model's own branch
    with pytest.warns(UserWarning, match=r"onnxport rewrote the if at .*test_after_capture_fails.py:\d+"):
        r = onnxport.to_onnx(FirstFour(), (torch.randn(6, 4),), dynamic_shapes={"x": {0: "n"}})
    assert r.constraints == [] and "If" in {n.op_type for n in r.model.graph}
    report = r.validate(sizes=[{"n": 1}, {"n": 3}, {"n": 4}, {"n": 9}])
    assert report.ok and not report.rejected


class PadToInputLength(torch.nn.Module):
    """SEW-D's upsampling: pool by 2, repeat by 2, pad back to the input's length when it is odd;
    a convolution of kernel 5 needs a length of at least 5, which torch reports as a violation of
    the declared range after tracing."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(1, 1, 5)

    def forward(self, x):
        summary = self.conv(x[:, None]).mean((1, 2))[:, None]
        n = x.shape[1]
        up = torch.nn.functional.avg_pool1d(x[:, None], 2)[:, 0].repeat_interleave(2, dim=1)
        if up.shape[1] < n:
            up = torch.nn.functional.pad(up, (0, n - up.shape[1]))
        return up + summary


def test_the_rewritten_model_is_captured_outside_the_first_failure():
    """The rewritten model is captured after the first capture failed, and not while that failure
    is being handled: an exception torch raises while tracing it (a range violation, which the
    capture records and decides) would otherwise carry the first failure as its context, and be
    classified as it (SEW-D was refused for the branch its rewrite had removed). ``n >= 5`` (the
    convolution's kernel) is adopted."""
    handled = []

    @contextlib.contextmanager
    def hook():
        handled.append(sys.exc_info()[1])
        yield

    with pytest.warns(UserWarning, match="onnxport rewrote the if"):
        r = check_export(PadToInputLength(), (torch.randn(2, 8),), {"x": {1: "n"}}, capture_hooks=hook,
                         sizes=[{"n": 7}, {"n": 5}, {"n": 9}])
    assert len(handled) >= 2 and handled == [None] * len(handled)
    assert count_ops(r, "If") == 0 and [c.text for c in r.constraints] == ["n >= 5"]
