"""Determinants: _linalg_det (torch.linalg.det, torch.det), _linalg_slogdet (torch.linalg.slogdet,
torch.logdet).

Semantics: torch.linalg.det / slogdet (https://pytorch.org/docs/stable/linalg.html) on ONNX Det,
which takes ``[..., n, n]`` and returns ``[...]``. The determinant of a 0 x 0 matrix is 1.
"""

from __future__ import annotations

import operator

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import UnsupportedOpError
from onnxport.translate.registry import translates

aten = torch.ops.aten


def det(ctx, a: ir.Value) -> ir.Value:
    """ONNX Det of ``a[..., n, n]``; ones when n is 0 (onnxruntime's Det refuses empty matrices)."""
    n = a.shape[-1] if a.shape is not None else None
    if n == 0:
        batch = ctx.op.Shape(a, start=0, end=-2)
        return ctx.op.ConstantOfShape(batch, value=ir.tensor(np.array([1], dtype=a.dtype.numpy())))
    return ctx.op.Det(a)


def _refuse_unread(ctx, outputs: tuple[int, ...], what: str) -> None:
    """The LU factors and pivots torch returns beside a determinant: ONNX Det gives none of them,
    so a model reading them is refused."""
    for user in ctx.current_node.users:
        if user.target is operator.getitem and user.args[1] in outputs and user.users:
            raise UnsupportedOpError(f"{what}: ONNX has no LU factorization to give them",
                                     hint="use only the determinant (torch.linalg.det / slogdet)")


@translates(aten._linalg_det.default)
def linalg_det(ctx, a):
    """_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots): the determinant; the LU
    factors and pivots are refused where read."""
    _refuse_unread(ctx, (1, 2), "the LU factors of torch.linalg.det")
    return det(ctx, a), None, None


@translates(aten._linalg_slogdet.default)
def linalg_slogdet(ctx, a):
    """_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots):
    sign(det) and log|det| (-inf for a singular matrix, sign 0)."""
    _refuse_unread(ctx, (2, 3), "the LU factors of torch.linalg.slogdet")
    d = det(ctx, a)
    return ctx.op.Sign(d), ctx.op.Log(ctx.op.Abs(d)), None, None
