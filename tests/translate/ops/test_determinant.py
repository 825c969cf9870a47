"""torch.linalg.det / slogdet / logdet on ONNX Det (tests ops/determinant.py)."""

import pytest
import torch

import onnxport
from exportcheck import check_export, Fn


@pytest.mark.parametrize("n", [1, 3, 4])
def test_det_slogdet_logdet_of_batches(n):
    a = torch.randn(2, n, n) + 2 * torch.eye(n)  # logdet needs a positive determinant to be real
    fn = lambda t: (torch.linalg.det(t), *torch.linalg.slogdet(t), torch.logdet(t @ t.mT + torch.eye(n)))  # noqa: E731
    check_export(Fn(fn), (a,), {"x": {0: "batch"}})


def test_det_of_singular_and_empty_matrices():
    fn = lambda t: (torch.linalg.det(t[:, :0, :0]), *torch.linalg.slogdet(t[:, :0, :0]),  # noqa: E731
                    *torch.linalg.slogdet(t * torch.tensor([1.0, 0.0, 1.0])))
    check_export(Fn(fn), (torch.randn(2, 3, 3),), {"x": {0: "batch"}})


def test_reading_the_lu_factors_is_refused():
    with pytest.raises(onnxport.UnsupportedOpError, match="LU factors"):
        onnxport.to_onnx(Fn(lambda t: torch.ops.aten._linalg_det(t)[1]).eval(), (torch.randn(3, 3),))
