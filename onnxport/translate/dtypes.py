"""torch dtype <-> ONNX data type, and PyTorch's type promotion."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

TORCH_TO_ONNX: dict[torch.dtype, ir.DataType] = {
    torch.float32: ir.DataType.FLOAT,
    torch.float64: ir.DataType.DOUBLE,
    torch.float16: ir.DataType.FLOAT16,
    torch.bfloat16: ir.DataType.BFLOAT16,
    torch.int64: ir.DataType.INT64,
    torch.int32: ir.DataType.INT32,
    torch.int16: ir.DataType.INT16,
    torch.int8: ir.DataType.INT8,
    torch.uint8: ir.DataType.UINT8,
    torch.bool: ir.DataType.BOOL,
    torch.complex64: ir.DataType.COMPLEX64,
    torch.complex128: ir.DataType.COMPLEX128,
}
ONNX_TO_TORCH = {v: k for k, v in TORCH_TO_ONNX.items()}

FLOAT_TYPES = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
INT_TYPES = {ir.DataType.INT64, ir.DataType.INT32, ir.DataType.INT16, ir.DataType.INT8, ir.DataType.UINT8}


def onnx_dtype(dtype: torch.dtype) -> ir.DataType:
    """ONNX element type of a torch dtype (raises KeyError for unsupported ones)."""
    return TORCH_TO_ONNX[dtype]


def torch_dtype(dtype: ir.DataType) -> torch.dtype:
    return ONNX_TO_TORCH[dtype]


def numpy_dtype(dtype: ir.DataType) -> np.dtype:
    return dtype.numpy()


def is_float(dtype: ir.DataType | None) -> bool:
    return dtype in FLOAT_TYPES


def is_int(dtype: ir.DataType | None) -> bool:
    return dtype in INT_TYPES


def scalar_dtype(value) -> torch.dtype:
    """torch's default dtype for a Python scalar (bool -> bool, int -> int64, float -> float32)."""
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    return torch.get_default_dtype()
