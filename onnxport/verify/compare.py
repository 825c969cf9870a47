"""One output compared: eager PyTorch's against onnxruntime's, dtype-aware, NaN-aware, shapes exact."""

from __future__ import annotations

import numpy as np
import torch

TOLERANCES = {  # (atol, rtol) per torch dtype
    torch.float32: (1e-4, 1e-3),
    torch.float64: (1e-7, 1e-6),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor as a NumPy array (bfloat16 as float32, which NumPy lacks)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.contiguous().numpy()


def compare(expected: np.ndarray, got: np.ndarray, dtype: torch.dtype, atol=None, rtol=None) -> tuple[float, float, bool, str]:
    """(max abs error, max relative error, ok, note) of one output.

    Shapes must be equal; integers and bools exactly; floats within ``atol + rtol * |expected|``
    (``TOLERANCES`` per dtype unless given); NaN where and only where eager has NaN; equal infinities
    count as equal.
    """
    if tuple(expected.shape) != tuple(got.shape):
        return float("nan"), float("nan"), False, f"shape {tuple(got.shape)} != {tuple(expected.shape)}"
    if expected.size == 0:
        return 0.0, 0.0, True, ""
    d_atol, d_rtol = TOLERANCES.get(dtype, (0.0, 0.0))
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        diff = np.abs(expected.astype(np.float64) - got.astype(np.float64))
        m = float(diff.max())
        return m, m, m == 0, ""
    e = expected.astype(np.float64)
    g = got.astype(np.float64)
    nan_e, nan_g = np.isnan(e), np.isnan(g)
    if (nan_e != nan_g).any():
        return float("nan"), float("nan"), False, "NaN mismatch"
    both_inf = np.isinf(e) & (e == g)
    mask = ~(nan_e | both_inf)
    if not mask.any():
        return 0.0, 0.0, True, ""
    diff = np.abs(e[mask] - g[mask])
    max_abs = float(diff.max())
    with np.errstate(invalid="ignore"):
        rel = diff / np.maximum(np.abs(e[mask]), 1e-12)
    max_rel = float(rel.max())
    ok = bool(np.all(diff <= atol + rtol * np.abs(e[mask])))
    return max_abs, max_rel, ok, ""
