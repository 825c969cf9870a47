"""Helpers shared by the op families: type promotion, scalars, axes."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from onnxport.translate import dtypes


def promote(ctx, *operands: Any, to: ir.DataType | None = None) -> list[ir.Value]:
    """Values for ``operands`` (ir.Values or Python scalars) cast to one dtype.

    ``to`` defaults to PyTorch's result type of the operands (``torch.result_type`` semantics:
    Python scalars do not raise a tensor's category's precision; 0-d tensors promote like
    scalars when a dimensioned tensor is present).
    """
    if to is None:
        to = result_type(*operands)
    out = []
    for o in operands:
        if isinstance(o, ir.Value):
            out.append(ctx.cast(o, to))
        else:
            out.append(ctx.scalar(o, to))
    return out


def _as_torch_operand(o: Any) -> Any:
    if isinstance(o, ir.Value):
        rank = len(o.shape) if o.shape is not None else 1
        return torch.empty((1,) * rank if rank else (), dtype=dtypes.torch_dtype(o.dtype))
    if isinstance(o, (torch.SymInt,)):
        return 1
    return o


def result_type(*operands: Any) -> ir.DataType:
    """PyTorch's promoted dtype of tensors (ir.Values) and Python scalars."""
    ops = [_as_torch_operand(o) for o in operands]
    if len(ops) == 1:
        o = ops[0]
        return dtypes.onnx_dtype(o.dtype if isinstance(o, torch.Tensor) else dtypes.scalar_dtype(o))
    dt = torch.result_type(ops[0], ops[1])
    for o in ops[2:]:
        dt = torch.promote_types(dt, torch.result_type(torch.empty((1,), dtype=dt), o))
    return dtypes.onnx_dtype(dt)


def axes_const(ctx, axes) -> ir.Value:
    """1-D int64 constant of axes (ints)."""
    if isinstance(axes, int):
        axes = [axes]
    return ctx.const(np.array(list(axes), dtype=np.int64))


def norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis
