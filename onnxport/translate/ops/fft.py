"""Discrete Fourier transforms: ``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``, the ATen ops every
``torch.fft`` function (fft, ifft, rfft, irfft, hfft, ihfft and their 2-d / n-d forms) becomes.

Semantics: ``torch.fft`` (https://pytorch.org/docs/stable/fft.html) on ONNX DFT (opset 17; the
axis an input from opset 20). Complex values are carried as real ``[..., 2]`` pairs
(``complex.ComplexAsReal``). Only the forward, unnormalized DFT is emitted; the inverse is
``conj(DFT(conj(X)))`` and the scale is applied after, so the result does not depend on a runtime's
reading of ``inverse``. ``normalization`` is ATen's: 0 none, 1 ``1/sqrt(n)``, 2 ``1/n``, with ``n``
the product of the signal sizes (the input's for r2c and c2c, the output's for c2r).

The short-time transform (``torch.stft``, translated in ``spectral.py``) takes its form from
``stft_form``, chosen per ``n_fft`` by the figures of ``benchmarks/NUMERICS.md`` (section "STFT, by
n_fft": 4 x 16,000 samples, hop 160, Hann window; errors against eager float64 over eager float32's,
normal and large-magnitude inputs) and DESIGN.md's rule (accuracy on large magnitudes first, then
speed; never farther from float64 than torch.onnx, whose form is ONNX STFT):

- ``basis`` for float32 where ``n_fft`` is not a power of two: the DFT as one Conv over the signal,
  stride ``hop``, its weights a precomputed ``[2 * bins, 1, n_fft]`` basis (cos and -sin rows,
  computed in float64 with the window and the ``normalized`` scale folded in, rounded once): the
  framing and the MatMul in one node (onnxruntime's im2col and GEMM). onnxruntime's STFT takes a
  slow path there, 140-580x eager's error (at 400: the 2e-4 mel and 1e-3 log-mel differences of a
  speech front end); the basis is within 2.0-3.1x (320, 400, 1200; torchaudio's log-mel and
  SpeechBrain's Fbank 1.6-2.5x) at 0.05-0.16x its time (1.6 ms against 25 ms at 400). Its constant
  is ``8 * n_fft * bins`` bytes (0.64 MB at 400, 5.8 MB at 1200).
- ``STFT`` (ONNX STFT) for powers of two, where onnxruntime's radix-2 FFT is within 2.2-2.7x eager's
  error on large-magnitude inputs and the basis 2.4-3.1x (1.1-1.2x farther from float64; 10 seeds
  at 512 and 1024 agree), though the basis is nearer on normal inputs (2.4-3.1x against 4.2-4.9x)
  and faster at 512 (0.54x the time; 1.0x at 1024, 1.9x at 2048, its cost growing as
  ``n_fft ** 2``); and for float64 (onnxruntime's Conv has no float64 kernel; its float64 STFT is
  7e-14 of the scale from eager float64 at 400). STFT on the signal cast to float64 would be
  nearer still (0.2-0.5x eager's error) but as slow as the float32 STFT off powers of two.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._common import axes_const, norm_axis
from onnxport.translate.ops.complex import COMPLEX_READERS, ComplexAsReal, as_complex, conjugate, part
from onnxport.translate.registry import translates

aten = torch.ops.aten
I64 = ir.DataType.INT64
COMPLEX_READERS.update({aten._fft_c2c.default, aten._fft_c2r.default})


F32 = ir.DataType.FLOAT


def stft_form(n_fft: int, dtype: ir.DataType) -> str:
    """The form of a ``torch.stft`` of ``n_fft`` on ``dtype`` (see the module's docstring):
    ``"basis"`` (the DFT as a Conv with a precomputed basis, ``stft_by_basis``) or ``"STFT"``."""
    power_of_two = n_fft > 0 and n_fft & (n_fft - 1) == 0
    return "basis" if dtype == F32 and not power_of_two else "STFT"


def dft_basis(n_fft: int, onesided: bool, window: np.ndarray | None, scale: float) -> np.ndarray:
    """The real DFT basis ``[2 * bins, n_fft]`` in float64: rows ``cos(2 pi k t / n_fft)`` for the
    bins ``k`` (``0 .. n_fft // 2`` if ``onesided``, else ``0 .. n_fft - 1``), then ``-sin`` of the
    same, times ``window[t]`` (``[n_fft]``, None: ones) and ``scale``. Angles from ``k t mod n_fft``
    exactly, so every entry is float64's cos or sin of an angle in ``[0, 2 pi)``."""
    bins = n_fft // 2 + 1 if onesided else n_fft
    angle = (2 * np.pi / n_fft) * ((np.arange(bins)[:, None] * np.arange(n_fft)[None, :]) % n_fft)
    basis = np.concatenate([np.cos(angle), -np.sin(angle)], axis=0) * scale
    return basis if window is None else basis * window.astype(np.float64)[None, :]


def stft_by_basis(ctx, signal: ir.Value, n_fft: int, hop: int, window: ir.Value | None, win: int,
                  onesided: bool, normalized: bool) -> ir.Value:
    """STFT of the float32 ``signal[B, L]`` without centring, as one Conv with a DFT basis:
    real ``[B, bins, frames, 2]``, ``frames = (L - n_fft) // hop + 1``. ``window`` (``[win]``,
    ``win <= n_fft``, centred in ``n_fft`` by zeros; None: ones) folded into the basis in float64
    when it is a constant, else multiplied into the float32 basis in the graph; ``normalized``
    scales by ``n_fft ** -0.5`` in the basis."""
    bins = n_fft // 2 + 1 if onesided else n_fft
    scale = float(n_fft) ** -0.5 if normalized else 1.0
    left = (n_fft - win) // 2
    known = None if window is None else window.const_value
    if window is None or known is not None:
        w = np.zeros(n_fft)
        w[left:left + win] = 1.0 if window is None else known.numpy().astype(np.float64).reshape(win)
        weight = ctx.const(dft_basis(n_fft, onesided, w, scale).astype(np.float32).reshape(2 * bins, 1, n_fft))
    else:
        w = ctx.cast(window, F32)
        if win < n_fft:
            w = ctx.op.Pad(w, ctx.const([left, n_fft - win - left]), ctx.scalar(0, F32))
        basis = ctx.const(dft_basis(n_fft, onesided, None, scale).astype(np.float32).reshape(2 * bins, 1, n_fft))
        weight = ctx.op.Mul(basis, ctx.op.Reshape(w, ctx.const([1, 1, n_fft])))
    frames = ctx.op.Conv(ctx.op.Unsqueeze(signal, axes_const(ctx, [1])), weight, strides=[hop])  # [B, 2 bins, F]
    shape = ctx.op.Concat(ctx.op.Shape(frames, start=0, end=1), ctx.const([2, bins]),
                          ctx.op.Shape(frames, start=2), axis=0)
    return ctx.op.Transpose(ctx.op.Reshape(frames, shape), perm=[0, 2, 3, 1])  # [B, bins, F, 2]


def dft_17(ctx, v: ir.Value, axis: int, onesided: bool = False) -> ir.Value:
    """Forward unnormalized ONNX DFT of ``v`` (``[..., 1]`` real or ``[..., 2]`` complex) along
    ``axis`` (of ``v``, never its last); ``onesided`` keeps bins ``0 .. n // 2`` (real input). The
    axis an attribute (opset 17 to 19)."""
    out = ctx.op.DFT(v, None, axis=axis, inverse=0, onesided=int(onesided))
    out.type = v.type
    return out


def dft_20(ctx, v: ir.Value, axis: int, onesided: bool = False) -> ir.Value:
    """``dft_17`` with the axis an input (opset 20 on)."""
    out = ctx.op.DFT(v, None, ctx.const(np.array(axis, dtype=np.int64)), inverse=0, onesided=int(onesided))
    out.type = v.type
    return out


def _axes(dim, rank: int) -> list[int]:
    return [norm_axis(d, rank) for d in ([dim] if isinstance(dim, int) else dim)]


def _signal_size(ctx, v: ir.Value, axes: list[int]) -> ir.Value:
    """Product of the sizes of ``v`` along ``axes``, as a 0-d value of v's float type."""
    n = None
    for a in axes:
        d = ctx.dim(v, a)
        n = d if n is None else ctx.op.Mul(n, d)
    return ctx.cast(n, v.dtype)


def _normalize(ctx, v: ir.Value, normalization: int, n: ir.Value) -> ir.Value:
    if normalization == 0:
        return v
    scale = ctx.op.Sqrt(n) if normalization == 1 else n
    return ctx.op.Div(v, scale)


def _c2c(ctx, v: ir.Value, axes: list[int], forward: bool, dft: Callable) -> ir.Value:
    """Unnormalized complex DFT of the carried value ``v`` along ``axes``; the inverse as
    ``conj(DFT(conj(v)))``."""
    if not forward:
        v = conjugate(ctx, v)
    for a in axes:
        v = dft(ctx, v, a)
    return conjugate(ctx, v) if not forward else v


def fft_r2c(ctx, x, dim, normalization, onesided, *, dft: Callable):
    """_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> complex: DFT of a real
    tensor over ``dim``, the last of them one-sided (bins ``0 .. n // 2``) when ``onesided``."""
    if not isinstance(x, ir.Value) or isinstance(x, ComplexAsReal):
        raise TranslationError("_fft_r2c of a complex tensor", hint="use torch.fft.fft on complex tensors")
    axes = _axes(dim, ctx.rank(x))
    v = ctx.op.Unsqueeze(x, axes_const(ctx, [-1]))
    v.type = x.type
    n = _signal_size(ctx, x, axes)
    v = dft(ctx, v, axes[-1], onesided=bool(onesided))
    v = _c2c(ctx, v, axes[:-1], True, dft)
    return as_complex(ctx, _normalize(ctx, v, normalization, n))


def fft_c2c(ctx, z, dim, normalization, forward, *, dft: Callable):
    """_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> complex: forward or
    inverse DFT of a complex tensor over ``dim``."""
    if not isinstance(z, ComplexAsReal):
        raise TranslationError("_fft_c2c of a real tensor",
                               hint="this is a gap in onnxport's FFT translation; report it")
    axes = _axes(dim, z.rank)
    n = _signal_size(ctx, z.value, axes)
    return as_complex(ctx, _normalize(ctx, _c2c(ctx, z.value, axes, bool(forward), dft), normalization, n))


def fft_c2r(ctx, z, dim, normalization, last_dim_size, *, dft: Callable):
    """_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> real: inverse DFT
    over ``dim`` of a one-sided spectrum, the last axis of ``dim`` rebuilt to ``last_dim_size``
    from conjugate symmetry (``X[N - k] = conj(X[k])``); the imaginary parts of the result dropped,
    which is what ignoring the imaginary parts of the DC (and Nyquist) bins means."""
    if not isinstance(z, ComplexAsReal):
        raise TranslationError("_fft_c2r of a real tensor",
                               hint="this is a gap in onnxport's FFT translation; report it")
    axes = _axes(dim, z.rank)
    v = _c2c(ctx, z.value, axes[:-1], False, dft)
    last = axes[-1]
    size = last_dim_size if isinstance(last_dim_size, ir.Value) \
        else ctx.const(np.array(int(last_dim_size), dtype=np.int64))
    half = ctx.op.Add(ctx.op.Div(size, ctx.scalar(2, I64)), ctx.scalar(1, I64))  # N // 2 + 1 bins used
    axis = axes_const(ctx, [last])
    head = ctx.op.Slice(v, ctx.const([0]), ctx.op.Unsqueeze(half, axes_const(ctx, [0])), axis)
    # bins N // 2 + 1 .. N - 1 are conj(X[N - k]): X[N - N // 2 - 1], ..., X[1]
    tail_start = ctx.op.Sub(size, half)
    tail = ctx.op.Slice(v, ctx.op.Unsqueeze(tail_start, axes_const(ctx, [0])), ctx.const([0]), axis, ctx.const([-1]))
    full = ctx.op.Concat(head, conjugate(ctx, tail), axis=last)
    full.type = z.value.type
    # real part of the unnormalized inverse: Re(conj(DFT(conj(X)))) = Re(DFT(conj(X)))
    out = part(ctx, dft(ctx, conjugate(ctx, full), last), 0)
    n = None
    for a in axes[:-1]:
        d = ctx.dim(z.value, a)
        n = d if n is None else ctx.op.Mul(n, d)
    n = size if n is None else ctx.op.Mul(n, size)
    return _normalize(ctx, out, normalization, ctx.cast(n, z.value.dtype))


def _with_dft(fn: Callable, dft: Callable) -> Callable:
    """The translation ``fn`` emitting its DFTs with ``dft`` (``dft_17`` or ``dft_20``)."""

    def translation(ctx, *args, **kwargs):
        return fn(ctx, *args, dft=dft, **kwargs)

    translation.__name__, translation.__qualname__, translation.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return translation


# the DFT's axis is an attribute before opset 20, an input from opset 20 on
for _target, _fn in ((aten._fft_r2c.default, fft_r2c), (aten._fft_c2c.default, fft_c2c),
                     (aten._fft_c2r.default, fft_c2r)):
    translates(_target, opset=(None, 19))(_with_dft(_fn, dft_17))
    translates(_target, opset=(20, None))(_with_dft(_fn, dft_20))
