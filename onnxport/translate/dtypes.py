"""torch dtype <-> ONNX data type (onnx-ir's torch adapters: every dtype both have, unsigned and
float8 types included), and the type groups translations test."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import from_torch_dtype, to_torch_dtype

FLOAT_TYPES = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
INT_TYPES = {ir.DataType.INT64, ir.DataType.INT32, ir.DataType.INT16, ir.DataType.INT8, ir.DataType.UINT8,
             ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64}


def onnx_dtype(dtype: torch.dtype) -> ir.DataType:
    """ONNX element type of a torch dtype (raises KeyError for one ONNX lacks)."""
    try:
        return from_torch_dtype(dtype)
    except TypeError as e:
        raise KeyError(dtype) from e


def torch_dtype(dtype: ir.DataType) -> torch.dtype:
    """torch dtype of an ONNX element type (raises KeyError for one torch lacks)."""
    try:
        return to_torch_dtype(dtype)
    except TypeError as e:
        raise KeyError(dtype) from e


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
