"""One output compared: eager PyTorch's against onnxruntime's, dtype exact, shape exact,
integers and bools exact, floats within a dtype's tolerance, NaN where and only where eager has NaN."""

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


def expected_numpy_dtype(dtype: torch.dtype) -> np.dtype | None:
    """The NumPy dtype onnxruntime gives an output of torch dtype ``dtype`` (None for bfloat16,
    which NumPy lacks and onnxruntime hands over in a dtype of its own)."""
    if dtype == torch.bfloat16:
        return None
    return torch.empty((), dtype=dtype).numpy().dtype


def compare(expected: np.ndarray, got: np.ndarray, dtype: torch.dtype, atol=None, rtol=None, *,
            scale: float = 1.0, peak: float = 0.0) -> tuple[float, float, bool, str]:
    """(max abs error, max relative error, ok, note) of one output.

    Args:
        expected: eager's output as NumPy (``to_numpy``); ``dtype`` its torch dtype.
        got: onnxruntime's output.
        atol, rtol: tolerances; default ``TOLERANCES[dtype]`` (0 for integers and bools).
        scale: the default ``atol`` is multiplied by it (inputs ``scale`` times as large give
            absolute errors as much larger); an explicit ``atol`` is taken as is.
        peak: the default ``atol`` is at least ``peak * rtol`` times the output's largest finite
            magnitude: where large terms cancel to a small value, the value keeps only the absolute
            precision of the terms (an output reaching 5e5 is good to about 0.05 in float32).

    The dtype must be the one eager gives (``expected_numpy_dtype``), the shape equal; integers and
    bools exactly equal; floats within ``atol + rtol * |expected|``, NaN where and only where eager
    has NaN, infinities only where eager has the same one.
    """
    want = expected_numpy_dtype(dtype)
    if want is not None and np.dtype(got.dtype) != want:
        return float("nan"), float("nan"), False, f"dtype {np.dtype(got.dtype)} != {want}"
    if tuple(expected.shape) != tuple(got.shape):
        return float("nan"), float("nan"), False, f"shape {tuple(got.shape)} != {tuple(expected.shape)}"
    if expected.size == 0:
        return 0.0, 0.0, True, ""
    d_atol, d_rtol = TOLERANCES.get(dtype, (0.0, 0.0))
    rtol = d_rtol if rtol is None else rtol
    if atol is None:
        atol = d_atol * scale
        finite = np.abs(expected[np.isfinite(expected)]) if peak and expected.dtype.kind == "f" else ()
        if len(finite):
            atol = max(atol, peak * rtol * float(finite.max()))
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        diff = np.abs(expected.astype(np.float64) - got.astype(np.float64))
        m = float(diff.max())
        return m, m, bool(np.array_equal(expected, got)), ""
    e = expected.astype(np.float64)
    g = got.astype(np.float64)
    nan_e, nan_g = np.isnan(e), np.isnan(g)
    if (nan_e != nan_g).any():
        return float("nan"), float("nan"), False, "NaN mismatch"
    both_inf = np.isinf(e) & (e == g)
    mask = ~(nan_e | both_inf)
    if not mask.any():
        return 0.0, 0.0, True, ""
    with np.errstate(invalid="ignore"):
        diff = np.abs(e[mask] - g[mask])
    diff = np.where(np.isnan(diff), np.inf, diff)  # an infinity against a number
    max_abs = float(diff.max())
    with np.errstate(invalid="ignore"):
        rel = diff / np.maximum(np.abs(e[mask]), 1e-12)
    max_rel = float(np.where(np.isnan(rel), np.inf, rel).max())  # inf / inf: an infinity against a number
    infinite = np.isinf(e[mask]) | np.isinf(g[mask])  # an infinity left here is matched by no equal one
    ok = bool(np.all(diff <= atol + rtol * np.abs(e[mask])) and not infinite.any())
    return max_abs, max_rel, ok, "infinity mismatch" if infinite.any() else ""
