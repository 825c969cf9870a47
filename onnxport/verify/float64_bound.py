"""The verdict on one float32 output against the float64 reference (``verify.reference``).

Over the output's elements (where all sides are finite)::

    max |onnx - ref64|  <=  min(K * max |eager32 - ref64|  +  FLOOR * scale,  CEILING * scale)

``scale`` is the output's largest magnitude in the reference. ``eager32`` is eager PyTorch in
float32 on the same inputs; where that does not meet the bound, also eager float32 on the inputs
moved by one ulp (``reference.moved_one_ulp``), and the larger of its two distances counts:
float32 cannot resolve an output more finely than a last-bit change of its data moves it.

Where eager float32 itself lies farther than ``CEILING`` of the scale from float64 on the same
inputs, the float64 run is no reference (``Distances.usable``): float32 rounding does not move an
output that far; a random output, one depending on state kept between calls, or one that jumps
where float32 and float64 round apart (a floor, an argmax made a float) does.

The errors are judged against the whole output's scale, not element by element: summation order
(onnxruntime's convolution and matrix kernels add in another order than PyTorch's) moves each
element by a few ulps of the terms summed, which near a zero element is a large relative error of
that element and a tiny one of the output.

``FLOOR`` is PyTorch's own float32 tolerance (``torch.testing.assert_close``: atol 1e-5) taken at
the output's scale, 84 float32 epsilons (2**-23) of it: what a correct float32 computation may
differ by where eager float32 happens to be nearly exact. onnxruntime sums long reductions in
order where PyTorch sums pairwise (a global average pool over 1e5 zero-mean values: 28 eps of the
scale, eager 1), and its DFT of lengths that are not powers of two is a direct sum (58 eps at the
4x sizes of the FFT tests, eager 1).

Guarantee: a correct export lies within the bound (every model of the test suite does), so an
export error moving some element by more than twice the bound (``2 * limit``, shown per row) fails,
and never one beyond ``2 * CEILING`` of the scale; with eager float32 1e-6 to 2.4e-5 of the scale
from float64 (the example inputs of the CNNs tested), every error above 4e-5 to 4e-4 of the scale.
"""

from __future__ import annotations

import dataclasses

import numpy as np

K = 8.0  # onnxruntime may be this many times as far from float64 as eager float32 is
FLOOR = 1e-5  # the bound's floor, a fraction of the output's scale (torch.testing.assert_close's float32 atol)
CEILING = 0.01  # the bound's ceiling, a fraction of the scale; eager float32 farther than this: no reference


@dataclasses.dataclass(frozen=True)
class Distances:
    """The largest distances of one output, absolute (in the output's units).

    Attributes:
        scale: the largest |ref64| over the finite elements (0 when the reference is zero there).
        onnx_eager: max |onnx - eager32|.
        eager_ref: max |eager32 - ref64|, the larger of the run on the inputs and (when ``moved``)
            the run on the inputs moved by one ulp.
        onnx_ref: max |onnx - ref64|.
        moved: ``eager_ref`` comes from the run on the inputs moved by one ulp.
    """

    scale: float
    onnx_eager: float
    eager_ref: float
    onnx_ref: float
    moved: bool = False

    @property
    def limit(self) -> float:
        """The largest ``onnx_ref`` that passes: ``K * eager_ref + FLOOR * scale``, at most
        ``CEILING * scale``."""
        return min(K * self.eager_ref + FLOOR * self.scale, CEILING * self.scale)

    @property
    def usable(self) -> bool:
        """Whether the float64 run can judge: the reference is not zero everywhere, and eager
        float32 lies within ``CEILING`` of the scale from it (farther, the output is random,
        depends on state kept between calls, or jumps where float32 and float64 round apart:
        float32 rounding alone does not move it so far)."""
        return self.scale > 0 and self.eager_ref <= CEILING * self.scale

    @property
    def ok(self) -> bool:
        return self.onnx_ref <= self.limit

    def relative(self, value: float) -> float:
        """``value`` over the scale (``value`` itself when the scale is 0)."""
        return value / self.scale if self.scale > 0 else value


def distances(eager: np.ndarray, ref: np.ndarray, got: np.ndarray, moved: np.ndarray | None = None) -> Distances:
    """The ``Distances`` of one output.

    Args:
        eager: eager float32's output; ``ref``: the float64 run's (same shape); ``got``:
            onnxruntime's (same shape and dtype as ``eager``: ``compare`` checked that).
        moved: eager float32's output on the inputs moved by one ulp, or None.

    Elements where any of them is NaN or infinite are left out (``compare`` checked that
    onnxruntime has NaN and infinities where eager has).
    """
    e, r, g = (np.asarray(a, dtype=np.float64) for a in (eager, ref, got))
    finite = np.isfinite(e) & np.isfinite(r) & np.isfinite(g)
    if moved is not None:
        m = np.asarray(moved, dtype=np.float64)
        finite &= np.isfinite(m)
    if not finite.any():
        return Distances(0.0, 0.0, 0.0, 0.0)
    e, r, g = e[finite], r[finite], g[finite]
    eager_ref = float(np.abs(e - r).max())
    moved_ref = float(np.abs(m[finite] - r).max()) if moved is not None else 0.0
    return Distances(float(np.abs(r).max()), float(np.abs(g - e).max()), max(eager_ref, moved_ref),
                     float(np.abs(g - r).max()), moved_ref > eager_ref)
