"""bincount, torch.unique, unique_consecutive: outputs whose sizes depend on the data
(tests ops/counting.py)."""

import pytest
import torch

from exportcheck import check_export, Fn, Fn2


def test_bincount_with_and_without_weights():
    fn = lambda i, w: (torch.bincount(i), torch.bincount(i, minlength=12), torch.bincount(i, weights=w),  # noqa: E731
                       torch.bincount(i, weights=w.double()))
    i = torch.tensor([0, 3, 3, 1, 7, 3])
    r = check_export(Fn2(fn), (i, torch.rand(6)), {"a": {0: "n"}, "b": {0: "n"}},
                     inputs=[(torch.tensor([5, 5]), torch.rand(2))])
    # no ids: PyTorch gives int64 zeros even with weights; the ONNX outputs keep the weights' dtype
    # (an output's dtype cannot depend on the input being empty), values and shapes as PyTorch's
    report = r.validate(sizes=[], values=[], inputs=[(torch.tensor([], dtype=torch.long), torch.rand(0))])
    wrong = {c.output: c.note for c in report.checks if c.inputs == "inputs 1" and not c.ok}
    assert wrong == {"output_2": "dtype float32 != int64", "output_3": "dtype float64 != int64"}, report


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_unique_with_inverse_and_counts(dtype):
    fn = lambda t: (torch.unique(t), *torch.unique(t, return_inverse=True, return_counts=True),  # noqa: E731
                    torch.unique(t, sorted=False, return_counts=True)[1])
    x = torch.randint(0, 5, (3, 6)).to(dtype)
    check_export(Fn(fn), (x,), {"x": {0: "batch", 1: "n"}})


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_unique_consecutive(dtype):
    fn = lambda t: (torch.unique_consecutive(t), *torch.unique_consecutive(t, return_inverse=True, return_counts=True))  # noqa: E731
    x = torch.tensor([[1, 1, 2, 2, 2, 3], [3, 1, 1, 0, 0, 0]]).to(dtype)
    check_export(Fn(fn), (x,), {"x": {0: "batch", 1: "n"}},
                 inputs=[torch.zeros(1, 1, dtype=dtype), torch.arange(7, dtype=dtype).reshape(1, 7) // 2])
