"""A capture strategy tried after a failed capture starts at the larger example that capture reached
(``ExportError.traced_at``; ``capture.capture``'s ``enlarged_after``): MaskFormer's Swin backbone is
traced at twice its image (its last map is 1 x 1 at the example), refused on a branch, rewritten and
captured again; that capture traces at twice the image from its first trace instead of finding it
again (two traces fewer)."""

import dataclasses

import pytest
import torch

from onnxport.capture import capture
from onnxport.capture.state import CaptureState, Request
from onnxport.capture.steps import Step, run_steps
from onnxport.errors import CaptureTimeoutError, SpecializationError


class Pool(torch.nn.Module):
    def forward(self, x):  # [b, c, s, s] -> a token per position: [b, s * s, c]
        return x.flatten(2).transpose(1, 2).softmax(-1) * 2


DIMS = {"x": {0: "batch", 2: "image", 3: "image"}}


def _refused_at(traced_at: tuple) -> SpecializationError:
    return SpecializationError("the model's code branches on a size").with_traced_at(traced_at)


def test_a_capture_after_one_that_enlarged_traces_at_its_larger_example():
    example = torch.randn(2, 3, 16, 16)
    first = _refused_at((("image", 32),))
    captured = capture(Pool(), (example,), {}, DIMS, enlarged_after=first)
    [x] = [n for n in captured.program.graph.nodes if n.op == "placeholder"]
    assert x.meta["val"].shape[2].node.hint == 32  # traced at the larger example from the first trace
    assert captured.example[0][0] is example  # the user's example is the one handed forward
    assert captured.enlarged_from is first  # raised where a constraint of the result breaks the example
    assert not any(a.applied and "larger example" in a.step for a in captured.attempts)
    for x in (example, torch.randn(3, 3, 24, 24), torch.randn(1, 3, 8, 8)):
        torch.testing.assert_close(captured.program.module()(x), Pool()(x))


def test_a_size_outside_the_piece_is_not_traced_at():
    captured = capture(Pool(), (torch.randn(2, 3, 16, 16),), {}, DIMS, within={"image": (8, 20)},
                       enlarged_after=_refused_at((("image", 32),)))
    [x] = [n for n in captured.program.graph.nodes if n.op == "placeholder"]
    assert x.meta["val"].shape[2].node.hint == 16
    assert captured.enlarged_from is None


@dataclasses.dataclass(frozen=True)
class Refuses(Step):
    error: Exception = None
    name = "refuse"

    def __call__(self, state):
        raise self.error


def _state(enlarged: bool) -> CaptureState:
    request = Request.make(Pool(), (torch.randn(2, 3, 16, 16),), {}, DIMS, relations=None)
    return CaptureState(request.enlarged("image", 32) if enlarged else request)


def test_a_refusal_after_the_example_was_enlarged_says_where():
    with pytest.raises(SpecializationError) as refused:
        run_steps(_state(enlarged=True), (Refuses(SpecializationError("a branch on a size")),))
    assert refused.value.traced_at == (("image", 32),)
    with pytest.raises(SpecializationError) as refused:
        run_steps(_state(enlarged=False), (Refuses(SpecializationError("a branch on a size")),))
    assert refused.value.traced_at == ()
    with pytest.raises(CaptureTimeoutError) as slow:  # out of time: no other strategy follows
        run_steps(_state(enlarged=True), (Refuses(CaptureTimeoutError("out of time")),))
    assert slow.value.traced_at == ()
