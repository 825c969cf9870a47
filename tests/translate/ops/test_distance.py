"""torch.cdist and F.pdist (tests ops/distance.py)."""

import pytest
import torch

from exportcheck import check_export, Fn, Fn2


def _edges():
    # zero rows, repeated rows, negative and large coordinates
    return torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 3.0], [1.0, -2.0, 3.0], [-1e3, 5e2, 0.25], [1e-3, 0.0, -7.0]])


@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist(p):
    x1 = torch.cat([_edges(), torch.randn(3, 3)])
    x2 = torch.cat([torch.randn(4, 3), _edges()[:3]])
    check_export(Fn2(lambda a, b: torch.cdist(a, b, p=p)), (x1, x2), {"a": {0: "p"}, "b": {0: "r"}},
                 rtol=1e-4, atol=1e-4)
    # batched, with the matrix-product form eager takes beyond 25 rows
    check_export(Fn2(lambda a, b: torch.cdist(a, b, p=p)), (torch.randn(2, 30, 4), torch.randn(2, 27, 4)),
                 {"a": {0: "batch", 1: "p"}, "b": {0: "batch", 1: "r"}}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 2.5, float("inf")])
def test_pdist(p):
    x = torch.cat([_edges(), torch.randn(2, 3)])
    check_export(Fn(lambda t: torch.nn.functional.pdist(t, p=p)), (x,), {"x": {0: "n", 1: "m"}}, rtol=1e-4, atol=1e-4)
