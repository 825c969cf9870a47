"""The time bound of a capture fallback: a torch.export call made after a failed capture that runs
longer than ``to_onnx(fallback_seconds=...)`` is stopped with a ``CaptureTimeoutError`` naming the
model's line it was tracing (``capture/time_bound.py``); the first trace is not bounded."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

import onnxport
from onnxport.capture.time_bound import Expired, time_bound
from onnxport.errors import CaptureTimeoutError, ExportError

GIVE_UP = 30.0  # seconds the slow trace runs when nothing stops it (the test then fails)
CALLS: list = []


class SlowOnRetrace(nn.Module):
    """The first trace fixes the batch at ``len(x)`` (a fallback retraces with ``len`` kept symbolic);
    every later trace spends its time in a Python loop. ``CALLS`` counts the calls (a global: the traces
    run on a copy of the module)."""

    def forward(self, x):
        CALLS.append(x.shape[0])
        if len(CALLS) == 1:
            return torch.ones(len(x), 1) * x
        end = time.monotonic() + GIVE_UP
        while time.monotonic() < end:
            time.sleep(0.01)  # the slow line
        return x * 2


def test_a_fallback_longer_than_its_bound_is_stopped_at_the_models_line():
    model = SlowOnRetrace()
    CALLS.clear()
    start = time.monotonic()
    with pytest.raises(CaptureTimeoutError) as caught:
        onnxport.to_onnx(model, (torch.randn(3, 4),), dynamic_shapes={"x": {0: "batch"}}, fallback_seconds=0.5)
    assert time.monotonic() - start < GIVE_UP / 2
    assert len(CALLS) == 2  # the first trace ran unbounded, the fallback was stopped
    error = caught.value
    assert error.where is not None and __file__ in error.where and "the slow line" in error.where
    assert "ran longer than 0.5 s" in error.summary
    assert "fallback_seconds" in error.hint
    assert "became the constant 3" in error.hint and "len(x)" in error.hint  # the failure the fallback answered


def test_the_first_trace_is_not_bounded():
    class Slow(nn.Module):
        def forward(self, x):
            time.sleep(0.3)
            return x + 1

    result = onnxport.to_onnx(Slow(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "batch"}},
                              fallback_seconds=0.05)
    assert [str(d) for d in result.model.graph.inputs[0].shape] == ["batch", "3"]


def test_a_block_that_ends_in_time_leaves_nothing_behind():
    with time_bound(0.2):
        pass
    time.sleep(0.4)  # an exception still pending would be raised here
    with pytest.raises(Expired):
        with time_bound(0.05):
            time.sleep(0.5)
            for _ in range(10):
                pass


@pytest.mark.parametrize("seconds", [0, -1.0])
def test_the_bound_is_positive_or_none(seconds):
    with pytest.raises(ExportError, match="fallback_seconds"):
        onnxport.to_onnx(nn.Identity(), (torch.randn(2),), fallback_seconds=seconds)
