"""Packed sequences: ``pack_padded_sequence -> nn.LSTM/GRU/RNN -> pad_packed_sequence`` as ONNX
LSTM/GRU/RNN with ``sequence_lens``.

Semantics: ``torch.nn.utils.rnn.pack_padded_sequence`` / ``pad_packed_sequence`` (PyTorch docs):
each sequence runs over its first ``lengths[b]`` steps only (both directions), the final states are
taken at each sequence's last valid step, and the padded outputs hold ``padding_value``. The ONNX
recurrent operators give the same with ``sequence_lens`` (outputs past a sequence's length are 0).

torch.export cannot trace a PackedSequence (its sizes are data). While onnxport captures,
``PADDED_SEQUENCES`` (a registered capture patch) replaces
``torch.nn.utils.rnn.pack_padded_sequence`` by a function returning a ``PaddedSequence`` (the padded
time-major batch and its lengths), the ``forward`` of nn.LSTM, GRU and RNN run such an input as the
op ``onnxport::padded_rnn``, and ``pad_packed_sequence`` turns it back into a padded tensor. Outside
capture nothing changes; ``onnxport::padded_rnn`` itself runs PyTorch's packed implementation, so an
ExportedProgram keeps eager semantics.
"""

from __future__ import annotations

import dataclasses
import types

import onnx_ir as ir
import torch
from torch import Tensor
from torch.nn.utils import rnn as rnn_utils

from onnxport.translate.ops.rnn import _GRU_ORDER, _LSTM_ORDER, _RNN_ORDER, _recurrent
from onnxport.capture.patches import Patch, SetAttribute, SetCode, register
from onnxport.capture.tracing import translating
from onnxport.translate.ops.rnn_projected import is_projected, lstm_projected
from onnxport.translate.registry import translates

def _copy(fn):
    """A separate function object with ``fn``'s code, unaffected when ``fn.__code__`` is swapped."""
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


_PACK = _copy(rnn_utils.pack_padded_sequence)
_PAD = _copy(rnn_utils.pad_packed_sequence)
_MODES = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}


@torch.library.custom_op("onnxport::padded_rnn", mutates_args=())
def padded_rnn(mode: str, x: Tensor, lengths: Tensor, hx: list[Tensor], params: list[Tensor], has_biases: bool,
               num_layers: int, bidirectional: bool) -> list[Tensor]:
    """A recurrent layer over padded sequences of given lengths (eval mode, no dropout).

    Args:
        mode: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU".
        x: float[T, B, I] time-major padded batch; lengths: int64[B], any order, each in 1..T.
        hx: initial states float[layers*dirs, B, H] (h0, plus c0 for LSTM), in the batch's order.
        params: nn.LSTM/GRU/RNN ``_flat_weights``.

    Returns [output float[T, B, dirs*H] (0 past each length), h_n (, c_n)], batch in input order.
    """
    packed = _PACK(x, lengths.cpu(), enforce_sorted=False)
    sorted_hx = [h.index_select(1, packed.sorted_indices) for h in hx]
    fn = getattr(torch._VF, _MODES[mode])
    state = sorted_hx if mode == "LSTM" else sorted_hx[0]
    out, *states = fn(packed.data, packed.batch_sizes, state, params, has_biases, num_layers, 0.0, False,
                      bidirectional)
    result = rnn_utils.PackedSequence(out, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
    padded, _ = _PAD(result, total_length=x.shape[0])
    return [padded] + [s.index_select(1, packed.unsorted_indices) for s in states]


@padded_rnn.register_fake
def _padded_rnn_fake(mode, x, lengths, hx, params, has_biases, num_layers, bidirectional):
    dirs = 2 if bidirectional else 1
    out = x.new_empty((x.shape[0], x.shape[1], dirs * hx[0].shape[-1]))
    return [out] + [h.new_empty(h.shape) for h in hx]


@dataclasses.dataclass
class PaddedSequence:
    """What ``pack_padded_sequence`` returns during capture: time-major padded data and lengths."""

    data: Tensor  # [T, B, ...]
    lengths: Tensor  # int64[B]


def _pack(input, lengths, batch_first=False, enforce_sorted=True):
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    return PaddedSequence(input.transpose(0, 1) if batch_first else input, lengths)


def _pad(sequence, batch_first=False, padding_value=0.0, total_length=None):
    if not isinstance(sequence, PaddedSequence):
        return _PAD(sequence, batch_first, padding_value, total_length)
    out = sequence.data
    if total_length is None:  # max(lengths) steps: a size the ONNX model computes from the lengths
        steps = sequence.lengths.max().item()
        torch._check(steps >= 0)
        torch._check(steps <= out.shape[0])
        out = out.narrow(0, 0, steps)
    if padding_value != 0:
        frames = torch.arange(out.shape[0], device=out.device).unsqueeze(1)
        valid = (frames < sequence.lengths.unsqueeze(0)).unsqueeze(-1)
        out = out.masked_fill(~valid, padding_value)
    return (out.transpose(0, 1) if batch_first else out), sequence.lengths


def _forward_padded(module, orig_forward):
    def forward(input, hx=None):
        if not isinstance(input, PaddedSequence):
            return orig_forward(input, hx)
        dirs = 2 if module.bidirectional else 1
        x = input.data
        if hx is None:
            zeros = x.new_zeros((module.num_layers * dirs, x.shape[1], module.hidden_size))
            projected = getattr(module, "proj_size", 0) or module.hidden_size
            hx = (x.new_zeros((module.num_layers * dirs, x.shape[1], projected)), zeros) if module.mode == "LSTM" \
                else zeros
        states = list(hx) if module.mode == "LSTM" else [hx]
        out, *final = torch.ops.onnxport.padded_rnn(module.mode, x, input.lengths, states, module._flat_weights,
                                                    module.bias, module.num_layers, module.bidirectional)
        return PaddedSequence(out, input.lengths), (tuple(final) if module.mode == "LSTM" else final[0])

    return forward


def _padded_forward(orig):
    """nn.LSTM/GRU/RNN's ``forward`` running a ``PaddedSequence`` as ``onnxport::padded_rnn``."""

    def forward(self, input, hx=None):
        return _forward_padded(self, lambda i, h: orig(self, i, h))(input, hx)

    return forward


def _padded_changes() -> list:
    # the code of the functions themselves is swapped, so that names imported with
    # ``from torch.nn.utils.rnn import pack_padded_sequence`` are redirected too
    return [SetCode(rnn_utils.pack_padded_sequence, _pack), SetCode(rnn_utils.pad_packed_sequence, _pad),
            *(SetAttribute(cls, "forward", _padded_forward) for cls in (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN))]


PADDED_SEQUENCES = register(Patch(
    "padded sequences", _padded_changes,
    "torch.nn.utils.rnn.pack_padded_sequence / pad_packed_sequence (their code) and nn.LSTM/GRU/RNN.forward: "
    "pack/pad_packed_sequence around a recurrent layer captured as onnxport::padded_rnn (see the module doc)",
    when=translating, order=27))


@translates(torch.ops.onnxport.padded_rnn.default)
def padded_rnn_onnx(ctx, mode, x, lengths, hx, params, has_biases, num_layers, bidirectional):
    """onnxport::padded_rnn on ONNX LSTM/GRU/RNN with ``sequence_lens = int32(lengths)``; an LSTM
    with projections as a Scan over its cell, masked past each length (``rnn_projected.py``)."""
    if mode == "LSTM" and is_projected(params, has_biases, num_layers, bidirectional):
        out, h, c = lstm_projected(ctx, x, hx, params, has_biases, num_layers, 0.0, False, bidirectional, False,
                                   lengths=lengths)
        return [out, h, c]
    seq_lens = ctx.cast(lengths, ir.DataType.INT32)
    if mode == "LSTM":
        op, order, attrs = "LSTM", _LSTM_ORDER, {}
    elif mode == "GRU":
        op, order, attrs = "GRU", _GRU_ORDER, {"linear_before_reset": 1}
    else:
        act = "Tanh" if mode == "RNN_TANH" else "Relu"
        op, order, attrs = "RNN", _RNN_ORDER, {"activations": [act] * (2 if bidirectional else 1)}
    out, finals = _recurrent(ctx, op, x, list(hx), params, has_biases, num_layers, bidirectional, False, order,
                             attrs, sequence_lens=seq_lens)
    return [out, *finals]
