"""One output judged: integers and bools exactly, a float32 output against the float64 reference
(``verify.float64_bound``) where a float64 run can judge it, any other float by its dtype's
tolerance (``verify.compare``), the reason on the row (``Check.basis``).

A verdict of another kind (a quantized model's agreement with its float model) is a module of its
own beside this one, giving ``Check`` fields the same way.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from onnxport.capture.inputs import LARGE
from onnxport.verify.compare import TOLERANCES, compare, to_numpy
from onnxport.verify.float64_bound import CEILING, distances
from onnxport.verify.reference import SetRuns
from onnxport.verify.report import EXACT, FLOAT64

PEAK = 0.01  # judged by the dtype tolerance, the large set's atol: at least this many rtol of the output's peak


def judge(e: torch.Tensor, got: np.ndarray, runs: SetRuns, key: int | str, large: bool, atol: float | None,
          rtol: float | None) -> dict[str, Any]:
    """The ``Check`` fields of one output (``max_abs``, ``max_rel``, ``ok``, ``note``, and
    ``scale``, the distances to float64, ``limit``, ``moved``, ``basis`` where they apply).

    Args:
        e: eager float32's output (or the value of a buffer or input it updated).
        got: onnxruntime's.
        runs: the other runs of this input set; ``key`` names the output among them.
        large: the input set holds large values (``VALUE_KINDS``' ``"large"``): the dtype
            tolerance's atol is ``LARGE`` times the dtype's there, and at least ``PEAK`` of its
            rtol times the output's peak.
        atol, rtol: the tolerances given, or None.

    Integers and bools: equal (``basis`` ``EXACT``). A float32 output with a float64 run of the
    same shape: dtype, shape, NaN and infinities as eager's (``compare``), then within
    ``float64_bound``'s limit, eager float32 on the inputs moved by one ulp consulted where it
    does not meet it at first (``basis`` ``FLOAT64``). Otherwise the dtype tolerance
    (``compare``), ``basis`` saying why.
    """
    expected = to_numpy(e)
    if e.dtype == torch.bool or not (e.is_floating_point() or e.is_complex()):
        return _fields(*compare(expected, got, e.dtype, atol, rtol), basis=EXACT)
    reason, seen = runs.reference.reason, {}
    r = None
    if e.dtype != torch.float32:
        reason = f"a {_name(e.dtype)} output (float32 outputs are judged against float64)"
    elif not reason:
        r = runs.float64(key)
        reason = runs.reference.reason
        if r is not None and (r.dtype != torch.float64 or tuple(r.shape) != tuple(e.shape)):
            reason = f"the float64 run gives {_name(r.dtype)}{list(r.shape)} here (the model fixes this output's dtype)"
    if not reason:
        max_abs, _, ok, note = compare(expected, got, e.dtype, math.inf, 0.0)  # dtype, shape, NaN and infinities
        if not ok:
            return _fields(max_abs, float("nan"), False, note)
        reference = to_numpy(r)
        d = distances(expected, reference, got)
        usable = d.usable  # judged on the same inputs: the run on moved inputs only widens the bound
        if usable and not d.ok:
            moved = runs.moved(key)
            if moved is not None and moved.shape == e.shape and moved.dtype == e.dtype:
                d = distances(expected, reference, got, to_numpy(moved))
        if usable:
            return _fields(d.onnx_eager, d.relative(d.onnx_eager), d.ok, "", scale=d.scale,
                           eager_vs_float64=d.relative(d.eager_ref), onnx_vs_float64=d.relative(d.onnx_ref),
                           limit=d.relative(d.limit), moved=d.moved, basis=FLOAT64)
        if d.scale == 0:
            reason = "the float64 reference is zero everywhere (no scale to judge against)"
        else:
            reason = (f"eager float32 lies over {CEILING:g} of the scale from float64, farther than float32 rounding "
                      "goes (a random or stateful output, or a jump where the two round apart)")
            seen = {"eager_vs_float64": d.relative(d.eager_ref), "onnx_vs_float64": d.relative(d.onnx_ref)}
    max_abs, _, ok, note = compare(expected, got, e.dtype, atol, rtol, scale=LARGE if large else 1.0,
                                   peak=PEAK if large else 0.0)
    peak = _peak(expected)
    return _fields(max_abs, max_abs / peak if peak > 0 else max_abs, ok, note, scale=peak,
                   basis=f"{reason}: judged by {tolerance_text(e.dtype, atol, rtol, large)}", **seen)


def tolerance_text(dtype: torch.dtype, atol: float | None, rtol: float | None, large: bool) -> str:
    """How ``compare`` judges an output of ``dtype``: ``|ONNX - eager| <= atol + rtol |eager|``."""
    d_atol, d_rtol = TOLERANCES.get(dtype, (0.0, 0.0))
    a = atol if atol is not None else d_atol * (LARGE if large else 1.0)
    r = rtol if rtol is not None else d_rtol
    peak = f", at least {PEAK:g} rtol x the peak" if large and atol is None else ""
    return f"|ONNX - eager| <= {a:g} + {r:g} |eager| per element{peak}"


def _fields(max_abs: float, max_rel: float, ok: bool, note: str, **rest: Any) -> dict[str, Any]:
    return {"max_abs": max_abs, "max_rel": max_rel, "ok": ok, "note": note, **rest}


def _peak(values: np.ndarray) -> float:
    """The largest finite magnitude of ``values`` (0 when there is none)."""
    finite = np.abs(values[np.isfinite(values)]) if values.size else values
    return float(finite.max()) if finite.size else 0.0


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
