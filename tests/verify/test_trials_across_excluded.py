"""A condition adopted on trial (eager PyTorch runs at sizes it excludes) is judged in onnxruntime across what
it excludes, not only where eager PyTorch was first run (``verify/unneeded_constraints.py``, ``_across``):
a model whose own branch takes a third path farther from the boundary keeps the constraint stated, where
matching at the first sizes tried would have dropped it and left the ONNX model wrong there."""

import torch

import onnxport


class NestedBranch(torch.nn.Module):
    """Above 60 and below 10 the same values; between, others: the trace at 64 holds for ``image >= 61``."""

    def forward(self, x):
        n = x.shape[2]
        if n > 60:
            return x * 2
        return x * 2 if n < 10 else x * 3


class ConvThenBranch(torch.nn.Module):
    """A patch convolution (eager refuses below 4), then the same values from 12 up, others below."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.patches = torch.nn.Conv2d(3, 4, 4, 4)

    def forward(self, x):
        y = self.patches(x)
        n = x.shape[2]
        if n >= 16:
            return y * 2
        return y * 2 if n >= 12 else y * 3


DYNAMIC = {"x": {0: "batch", 2: "image", 3: "image"}}


def _stated_and_right(model, example: int, bound: str, inside: list[int]):
    r = onnxport.to_onnx(model, (torch.randn(2, 3, example, example),), dynamic_shapes=DYNAMIC)
    assert [str(c) for c in r.constraints] == [bound]
    assert any("where the ONNX model traced under it differs" in g.note for g in r.captured.guards if g.adopted)
    assert r.validate(sizes=[{"batch": 1, "image": n} for n in inside], values=[]).ok


def test_a_third_path_far_below_the_first_sizes_tried_keeps_the_constraint():
    # eager PyTorch runs at 1, 2 and 3 and matches there; at 30 it takes the other path
    _stated_and_right(NestedBranch(), 64, "image >= 61", [61, 100])


def test_a_third_path_below_the_boundary_keeps_the_constraint():
    # eager refuses 1 to 3 (the kernel of 4), runs and matches at 15 beside the boundary; at 7 it differs
    _stated_and_right(ConvThenBranch(), 16, "image >= 16", [16, 33])
