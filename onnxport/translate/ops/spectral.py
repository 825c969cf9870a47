"""Short-time Fourier transform without complex tensors in the ONNX graph.

Semantics: torch.stft (``aten::stft`` / ``aten::stft.center``) as a Conv with a DFT basis or on ONNX
STFT (opset 17), the form chosen per ``n_fft`` by measured accuracy (``fft.stft_form``). ONNX
has no complex arithmetic, so the complex result is carried as a real tensor with a trailing
axis of 2 (real, imaginary), PyTorch's ``view_as_real`` layout (``complex.ComplexAsReal``); its
readers are those ``complex.py`` translates (``abs``, ``view_as_real``, ``real``, ``imag``...);
any other reader of the complex result, or returning it from the model, is a TranslationError
raised at the stft node.

PyTorch's rules kept: a window shorter than ``n_fft`` is zero-padded on both sides (centred);
no window is a rectangular one; ``normalized`` multiplies by ``n_fft ** -0.5``; ``center`` pads
``n_fft // 2`` on both sides of the signal with ``pad_mode``.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops import fft
from onnxport.translate.ops._common import axes_const
from onnxport.translate.ops.complex import as_complex
from onnxport.translate.ops.pad import pad_nd
from onnxport.translate.registry import translates

aten = torch.ops.aten


def stft_real(ctx, x: ir.Value, n_fft: int, hop_length, win_length, window, normalized: bool,
              onesided, rank: int, dtype: ir.DataType) -> ir.Value:
    """STFT of ``x[B, L]`` (``rank`` 2) or ``[L]`` (1) of element type ``dtype``, without centring:
    real ``[B, n_fft // 2 + 1 (onesided) or n_fft, frames, 2]``, ``frames = (L - n_fft) // hop + 1``."""
    hop = int(hop_length) if hop_length is not None else n_fft // 4
    win = int(win_length) if win_length is not None else n_fft
    if onesided is None:
        onesided = True
    batched = rank == 2
    if rank not in (1, 2):
        raise TranslationError(f"torch.stft input of rank {rank}", hint="pass [batch, length] or [length]")
    if fft.stft_form(n_fft, dtype) == "basis":  # the form chosen per n_fft: fft.py's docstring
        signal = x if batched else ctx.op.Unsqueeze(x, axes_const(ctx, [0]))
        spec = fft.stft_by_basis(ctx, signal, n_fft, hop, window, win, bool(onesided), normalized)
        return spec if batched else ctx.op.Squeeze(spec, axes_const(ctx, [0]))
    signal = ctx.op.Unsqueeze(x, axes_const(ctx, [-1] if batched else [0, 2]))  # [B, L, 1]
    if window is None:
        window = ctx.const(np.ones([win], dtype=dtype.numpy()))
    else:
        window = ctx.cast(window, dtype)
    if win < n_fft:
        left = (n_fft - win) // 2
        window = ctx.op.Pad(window, ctx.const([left, n_fft - win - left]), ctx.scalar(0, dtype))
    spec = ctx.op.STFT(signal, ctx.const(np.array(hop, dtype=np.int64)), window,
                       ctx.const(np.array(n_fft, dtype=np.int64)), onesided=int(bool(onesided)))
    spec = ctx.op.Transpose(spec, perm=[0, 2, 1, 3])  # [B, bins, frames, 2]
    if normalized:
        spec = ctx.op.Mul(spec, ctx.scalar(float(n_fft) ** -0.5, dtype))
    if not batched:
        spec = ctx.op.Squeeze(spec, axes_const(ctx, [0]))
    return spec


@translates(aten.stft.default)
def stft(ctx, x, n_fft, hop_length=None, win_length=None, window=None, normalized=False, onesided=None,
         return_complex=None):
    """aten::stft(input, n_fft, hop_length?, win_length?, window?, normalized, onesided?, return_complex?)
    (torch.stft's centring already applied by a pad before it)."""
    return _stft(ctx, x, n_fft, hop_length, win_length, window, normalized, onesided, return_complex,
                 ctx.rank(x), x.dtype)


def _stft(ctx, x, n_fft, hop_length, win_length, window, normalized, onesided, return_complex, rank, dtype):
    spec = stft_real(ctx, x, n_fft, hop_length, win_length, window, normalized, onesided, rank, dtype)
    if return_complex:
        return as_complex(ctx, spec)
    return spec


@translates(aten.stft.center)
def stft_center(ctx, x, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
                normalized=False, onesided=None, return_complex=None):
    """aten::stft.center: torch.stft with ``center`` padding of ``n_fft // 2`` on both sides."""
    rank, dtype = ctx.rank(x), x.dtype
    if center:
        x = pad_nd(ctx, x, [n_fft // 2, n_fft // 2], pad_mode)
    return _stft(ctx, x, n_fft, hop_length, win_length, window, normalized, onesided, return_complex, rank, dtype)
