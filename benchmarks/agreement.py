"""Whether an exported model's outputs agree with eager PyTorch's: the one rule of the benchmark scripts that
run models (``hf_sweep.py``, ``speech.py``). A float is right when ``|onnx - eager| <= ATOL * max(1,
max|eager|) + RTOL * |eager|``; integers and bools exactly; NaN and infinities where eager has them."""

from __future__ import annotations

ATOL, RTOL = 1e-4, 1e-3


def compare(got: list, expected: list) -> tuple[bool, float, str]:
    """``(ok, worst error relative to the output's scale, what differs)`` of the outputs."""
    import numpy as np

    if len(got) != len(expected):
        return False, float("nan"), f"{len(got)} outputs, eager {len(expected)}"
    worst = 0.0
    for i, (g, e) in enumerate(zip(got, expected)):
        e = e.detach().numpy()
        g = np.asarray(g)
        if g.shape != e.shape:
            return False, float("nan"), f"output {i}: shape {list(g.shape)}, eager {list(e.shape)}"
        if e.dtype.kind in "biu":
            if not np.array_equal(g.astype(e.dtype), e):
                return False, float("nan"), f"output {i}: {int((g.astype(e.dtype) != e).sum())} integers differ"
            continue
        e64, g64 = e.astype(np.float64), g.astype(np.float64)
        finite = np.isfinite(e64)
        if not np.array_equal(finite, np.isfinite(g64)) or not np.array_equal(np.isnan(e64), np.isnan(g64)):
            return False, float("nan"), f"output {i}: NaN or infinities where eager has none (or the reverse)"
        if not finite.any():
            continue
        scale = max(1.0, float(np.abs(e64[finite]).max()))
        diff = np.abs(g64 - e64)[finite]
        worst = max(worst, float(diff.max()) / scale)
        if not np.all(diff <= ATOL * scale + RTOL * np.abs(e64[finite])):
            return False, worst, f"output {i}: max abs error {float(diff.max()):.2e} (scale {scale:.2e})"
    return True, worst, ""
