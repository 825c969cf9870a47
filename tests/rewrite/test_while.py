"""rewrite_control_flow: ``while <tensor condition>:`` loops -> while_loop -> ONNX Loop.

Trip counts come from the data (0, 1 and several iterations at other sizes); carried tensors of
several dtypes, parameters and other inputs read in the body, loops in submodule methods."""

import pytest
import torch
from torch.export import Dim

from exportcheck import check_export, count_ops
from onnxport.rewrite import rewrite_module


class Halve(torch.nn.Module):
    """Halves until every value is at most ``bound`` (a ``not`` condition); counts the steps and sums
    (carried tensors of two dtypes)."""

    def forward(self, values, bound):
        steps = torch.zeros((), dtype=torch.int64)
        total = values.sum(0) * 0
        while not (values.max() <= bound):
            values = torch.div(values, 2, rounding_mode="floor")
            steps = steps + 1
            total = total + values.sum(0)
        return values, steps, total


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_data_dependent_trip_count(dtype):
    def mk(n, scale):
        return (torch.randint(0, scale + 1, (n, 3)).to(dtype), torch.tensor(5).to(dtype))

    result = check_export(Halve(), mk(4, 100), ({0: Dim("n")}, None), rewrite_control_flow=True,
                          inputs=[mk(2, 4), mk(6, 1000), mk(1, 11)])  # 0 iterations, many, 1
    assert count_ops(result, "Loop") == 1


class Accumulator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rate = torch.nn.Parameter(torch.tensor([0.5, 1.5, 1.0]))

    def forward(self, x, limit):
        return self.fill(x, limit) * 2

    def fill(self, x, limit):  # a method reached from forward; parameter and inputs read in the body
        acc = torch.zeros_like(x)
        while acc.sum() < limit:
            acc = acc + x.abs() * self.rate + 0.25
        return acc


class Wrapper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Accumulator()

    def forward(self, x, limit):
        return self.inner(x, limit) - 1


def test_while_in_a_submodule_method():
    mk = lambda n, lim: (torch.randn(n, 3), torch.tensor(lim))  # noqa: E731
    result = check_export(Wrapper(), mk(2, 10.0), ({0: Dim("n")}, None), rewrite_control_flow=True,
                          inputs=[mk(3, 0.0), mk(1, 40.0), mk(5, 3.0)])
    assert count_ops(result, "Loop") == 1
    notes = rewrite_module(Wrapper(), mk(2, 10.0)).onnxport_rewrite_notes
    assert [(n.construct, n.rewritten) for n in notes] == [("while", True)] and "in fill" in notes[0].where


class PythonCounter(torch.nn.Module):
    """A ``while`` on a Python int stays a Python loop (unrolled three times, as intended)."""

    def forward(self, x):
        k = 0
        while k < 3:
            x = x * 2 + k
            k += 1
        return x


def test_python_condition_stays_python():
    result = check_export(PythonCounter(), (torch.randn(2, 3),), ({0: Dim("n")},), rewrite_control_flow=True)
    assert count_ops(result, "Loop") == 0


class Breaks(torch.nn.Module):
    def forward(self, x):
        while x.sum() > 0:
            x = x - 1
            if x.max() < 3:
                break
        return x


def test_unhandled_while_is_left_alone_with_its_line():
    x = torch.rand(3) * 10
    with pytest.warns(UserWarning, match="left as Python"):
        rewritten = rewrite_module(Breaks(), (x,))
    (note,) = [n for n in rewritten.onnxport_rewrite_notes if n.construct == "while"]
    assert not note.rewritten and "break" in note.detail
    assert note.where.endswith(f":{Breaks.forward.__code__.co_firstlineno + 1} in forward")
    torch.testing.assert_close(rewritten(x), Breaks()(x))
