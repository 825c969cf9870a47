"""The capture steps: the attempts each export records, a fallback added as one step class, the
user's capture hooks on every trace, and what torch prints while tracing."""

from __future__ import annotations

import contextlib
import sys

import pytest
import torch

import onnxport
from exportcheck import check_export
from onnxport.capture.patches import Patch, SetAttribute, register
from onnxport.capture.state import Request
from onnxport.capture.steps import STEPS, Fallback, ReasonSizeObliviously
from onnxport.capture.trace import finish, run_steps, start


class ConvStack(torch.nn.Module):
    """Three unpadded convolutions: torch.export needs time >= 7, which a plain-string dim adopts."""

    def __init__(self):
        super().__init__()
        self.convs = torch.nn.Sequential(*[torch.nn.Conv1d(2, 2, 3) for _ in range(3)])

    def forward(self, x):
        return self.convs(x)


def test_attempts_say_which_steps_ran_and_why():
    r = onnxport.to_onnx(torch.nn.Linear(3, 2).eval(), (torch.randn(4, 3),), dynamic_shapes={"input": {0: "b"}})
    attempts = r.captured.attempts
    assert [a.step for a in attempts] == [s.name for s in STEPS]
    assert attempts[0].applied and attempts[0].why == "captured"
    assert not attempts[2].applied and attempts[2].why == "the trace succeeded"
    assert all(str(a).startswith(a.step) for a in attempts)


def test_a_retry_is_recorded_with_the_step_that_made_it():
    with pytest.warns(UserWarning, match="time >= 7"):
        r = check_export(ConvStack().eval(), (torch.randn(2, 2, 9),), {"x": {2: "time"}})
    applied = [a for a in r.captured.attempts if a.applied]
    assert [str(c) for c in r.constraints] == ["time >= 7"]
    traces = [a for a in applied if a.step == "trace"]
    assert len(traces) >= 1 and any("time" in a.why for a in applied if a.step != "trace")


class Fragile(torch.nn.Module):
    def forward(self, x):
        return _library_helper(x)


def _library_helper(x):
    raise RuntimeError("the helper cannot be traced")


def _traceable_helper(x):
    return x * 3


HELPER_VARIANT = register(Patch(
    "test: the traceable helper", lambda: [SetAttribute(sys.modules[__name__], "_library_helper",
                                                        lambda original: _traceable_helper)]))


class UseTraceableHelper(Fallback):
    """A fallback of one class: when the helper fails, trace again with its traceable variant."""

    name = "use the traceable helper"

    def retry(self, state):
        if "helper cannot be traced" not in state.trace.text or HELPER_VARIANT in state.patches:
            return "not the helper's failure"
        return state.retrace("the helper's traceable variant", patches=state.patches + (HELPER_VARIANT,))


def test_a_fallback_is_one_step_class_listed_among_the_steps():
    x = torch.randn(3, 4)
    request = Request.make(Fragile(), (x,), {}, {"x": {0: "n"}}, relations=None)
    with pytest.raises(onnxport.CaptureError, match="helper cannot be traced"):
        finish(run_steps(start(request)))
    steps = STEPS[:STEPS.index(next(s for s in STEPS if isinstance(s, ReasonSizeObliviously))) + 1]
    steps += (UseTraceableHelper(),) + STEPS[len(steps):]
    captured = finish(run_steps(start(request), steps))
    assert [a.why for a in captured.attempts if a.step == UseTraceableHelper.name and a.applied] == \
        ["the helper's traceable variant"]
    assert _library_helper is not _traceable_helper  # restored after the trace
    torch.testing.assert_close(captured.program.module()(x), x * 3)


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(2))

    def forward(self, x):
        self.calls[0].add_(1)  # a write through a view: the whole program is decomposed (traced again)
        return x * 2 + self.calls[0]


@pytest.mark.slow
def test_the_users_capture_hooks_apply_to_every_trace_the_decomposition_included():
    entered = []

    @contextlib.contextmanager
    def hooks():
        entered.append(1)
        yield

    r = onnxport.to_onnx(Counter().eval(), (torch.randn(3, 2),), dynamic_shapes={"x": {0: "b"}}, capture_hooks=hooks)
    assert r.decomposed["whole_program"] == ["aten.add_.Tensor"]
    traces = sum(a.step == "trace" and a.applied for a in r.captured.attempts)
    assert len(entered) == traces + 1


class Chatty(torch.nn.Module):
    def forward(self, x):
        print("the model's own message", file=sys.stderr)
        return x + 1


def test_what_a_successful_trace_prints_still_reaches_stderr(capfd):
    onnxport.to_onnx(Chatty().eval(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "b"}})
    assert "the model's own message" in capfd.readouterr().err
