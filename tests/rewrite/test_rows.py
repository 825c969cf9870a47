"""rewrite_control_flow: loops over a tensor's rows (``for row in x``, ``for g in x.unbind(d)``,
``for v in torch.unbind(x, d)``) over a dynamic axis -> scan -> ONNX Scan.

The list filled by ``append`` and stacked or concatenated after the loop, and the tensors carried
from one row to the next (an RNN's ``h, c``), as in ``for i in range(x.shape[0])`` loops; each
export compared with eager PyTorch through onnxruntime at the example and at other sizes of the
scanned axis. Over a static axis the loop stays a Python loop; one the rewrite cannot take keeps
torch.export's error, which names the loop's line and why the rewrite did not take it."""

import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops
from onnxport.rewrite import rewrite_module


class RowsStacked(torch.nn.Module):
    """``for row in x``: a running mean carried, each row's output appended and stacked."""

    def forward(self, x):  # [N, D]
        acc = torch.zeros(x.shape[1])
        outs = []
        for row in x:
            acc = 0.5 * acc + torch.tanh(row)
            outs.append(acc * row)
        return torch.stack(outs), acc


def test_rows_of_a_tensor_appended_and_stacked():
    result = check_export(RowsStacked(), (torch.randn(5, 3),), ({0: Dim("n"), 1: Dim("d")},),
                          rewrite_control_flow=True, inputs=[(torch.randn(2, 4),), (torch.randn(11, 3),)],
                          expect_outputs={"output_0": ["n", "d"]})
    assert count_ops(result, "Scan") == 1


class Cell(torch.nn.Module):
    """torchaudio's ``_CustomLSTM`` in small: ``for gates in gated.unbind(0)`` over time, the loop
    target rebound in the body, ``h, c`` carried (bound on either side of an ``if`` before the loop),
    the outputs appended then stacked, the last state returned."""

    def __init__(self, state_given: bool = False):
        super().__init__()
        self.x2g = torch.nn.Linear(3, 16)
        self.p2g = torch.nn.Linear(4, 16, bias=False)
        self.norm = torch.nn.LayerNorm(4)
        self.state_given = state_given

    def forward(self, x, state):  # x [T, B, 3], state [2, B, 4]
        if self.state_given:
            h, c = state.unbind(0)
        else:
            h = torch.zeros(x.shape[1], 4)
            c = torch.zeros(x.shape[1], 4)
        gated = self.x2g(x)
        outputs = []
        for gates in gated.unbind(0):
            gates = gates + self.p2g(h)
            i, f, g, o = gates.chunk(4, 1)
            c = self.norm(f.sigmoid() * c + i.sigmoid() * g.tanh())
            h = o.sigmoid() * c.tanh()
            outputs.append(h)
        return torch.stack(outputs, dim=0), h, c


@pytest.mark.parametrize("state_given", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_unbind_of_the_leading_axis_with_a_carried_state(state_given):
    t, b = Dim("t"), Dim("b")
    result = check_export(Cell(state_given), (torch.randn(6, 2, 3), torch.randn(2, 2, 4)),
                          ({0: t, 1: b}, {1: b}), rewrite_control_flow=True,
                          inputs=[(torch.randn(1, 3, 3), torch.randn(2, 3, 4)),
                                  (torch.randn(13, 1, 3), torch.randn(2, 1, 4))],
                          expect_outputs={"output_0": ["t", "b", 4]})
    assert count_ops(result, "Scan") == 1


class NonLeading(torch.nn.Module):
    """Loops over axis 1 (``x.unbind(1)``, ``torch.unbind(x, dim=1)``) and the last axis
    (``torch.unbind(x, -1)``): outputs stacked on dim 1, concatenated on the last dim, and a sum."""

    def forward(self, x):  # [B, T, D]
        prev = torch.zeros(x.shape[0], x.shape[2])
        steps = []
        for frame in x.unbind(1):
            prev = torch.maximum(prev, frame) - 0.1 * frame
            steps.append(prev)
        pieces = []
        for frame in torch.unbind(x, dim=1):
            pieces.append(frame.cumsum(-1))
        total = torch.zeros(x.shape[0], x.shape[1])
        for column in torch.unbind(x, -1):
            total = total + column * column
        return torch.stack(steps, dim=1), torch.cat(pieces, -1), total


def test_unbind_of_a_non_leading_axis():
    b, t = Dim("b"), Dim("t")
    result = check_export(NonLeading(), (torch.randn(2, 5, 3),), ({0: b, 1: t},), rewrite_control_flow=True,
                          inputs=[(torch.randn(3, 1, 3),), (torch.randn(1, 9, 3),)],
                          expect_outputs={"output_0": ["b", "t", 3]})
    assert count_ops(result, "Scan") == 2  # the loop over the last axis, of static size 3, stays Python


def test_rows_of_a_static_axis_stay_a_python_loop():
    result = check_export(NonLeading(), (torch.randn(2, 5, 3),), ({0: Dim("b")},), rewrite_control_flow=True,
                          inputs=[(torch.randn(4, 5, 3),)])
    assert count_ops(result, "Scan") == 0


class Rebinds(torch.nn.Module):
    """The loop rebinds the tensor it iterates: Python iterates the rows of the tensor as it was."""

    def forward(self, x):  # [N, D]
        total = torch.zeros(x.shape[1])
        for row in x:
            total = total + row * x.sum(0)
            x = x * 0.5
        return total, x


def test_a_loop_rebinding_its_sequence_scans_the_rows_it_started_with():
    result = check_export(Rebinds(), (torch.randn(4, 3),), ({0: Dim("n")},), rewrite_control_flow=True,
                          inputs=[(torch.randn(1, 3),), (torch.randn(7, 3),)])
    assert count_ops(result, "Scan") == 1


class LastRowRead(torch.nn.Module):
    """The row the loop ended on is read after it: not expressible as a scan."""

    def forward(self, x):  # [N, D]
        acc = torch.zeros(x.shape[1])
        for frame in x.unbind(0):
            acc = acc + frame
        return acc + frame


def test_an_unbind_loop_not_rewritten_is_noted_and_refused_with_its_line():
    line = LastRowRead.forward.__code__.co_firstlineno + 2
    rewritten = rewrite_module(LastRowRead(), (torch.randn(4, 3),), warn=False)
    (note,) = [n for n in rewritten.onnxport_rewrite_notes if n.construct == "for"]
    assert not note.rewritten and note.where.endswith(f":{line} in forward")
    assert "x.unbind(0)" in note.detail and "frame first bound inside the loop and read after it" in note.detail
    with pytest.raises(onnxport.SpecializationError, match=r"for frame in x\.unbind\(0\)") as info:
        onnxport.to_onnx(LastRowRead(), (torch.randn(4, 3),), dynamic_shapes=({0: Dim("n")},))
    assert f"test_rows.py:{line} in forward" in str(info.value)


class PerStep(torch.nn.Module):
    """A comprehension over ``x.unbind(1)`` stacked on dim 1, another over ``torch.unbind(x)``
    concatenated: each the loop it stands for, scanned."""

    def __init__(self):
        super().__init__()
        self.step = torch.nn.Linear(3, 2)

    def forward(self, x):  # [B, T, 3]
        per_step = torch.stack([torch.relu(self.step(x_t)) for x_t in x.unbind(1)], dim=1)
        per_item = torch.cat([row.flip(0) for row in torch.unbind(x)], 0)
        return per_step, per_item


@pytest.mark.slow
def test_comprehensions_over_unbind():
    b, t = Dim("b"), Dim("t")
    result = check_export(PerStep(), (torch.randn(2, 5, 3),), ({0: b, 1: t},), rewrite_control_flow=True,
                          inputs=[(torch.randn(3, 1, 3),), (torch.randn(1, 8, 3),)],
                          expect_outputs={"output_0": ["b", "t", 2]})
    assert count_ops(result, "Scan") == 2
    assert [n.construct for n in result.rewrite_notes if n.rewritten] == ["comprehension", "comprehension"]
