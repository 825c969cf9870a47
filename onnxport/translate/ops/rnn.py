"""Recurrent layers: lstm, gru, rnn_tanh, rnn_relu (``.input`` overloads) on ONNX LSTM, GRU and RNN.

Semantics: ``torch.nn.LSTM`` / ``GRU`` / ``RNN`` (PyTorch docs) on the ONNX LSTM, GRU and RNN
operators (opset 14+ spec): one ONNX node per layer, ``direction="bidirectional"`` for
bidirectional layers, time-major ``layout=0`` (a batch_first input is transposed).

Weights come from the flat ``params`` list, per layer and direction ``w_ih, w_hh[, b_ih, b_hh]``:

- LSTM gates are ``i, f, g, o`` in PyTorch and ``i, o, f, c`` in ONNX;
- GRU gates are ``r, z, n`` in PyTorch and ``z, r, h`` in ONNX, with ``linear_before_reset=1``
  (PyTorch applies the hidden bias before multiplying by ``r``);
- ONNX ``B`` is ``[Wb, Rb]`` concatenated, and W/R/B stack the directions on a first axis.

Element types: the ONNX operators allow float16/float/double, but onnxruntime's CPU kernels run
float only; other types are exported as they are (no silent precision change).

Capture: torch decomposes ``aten.lstm.input`` (and gru, rnn) into a Python loop over time while
tracing, which pins the time dimension to the example's size. ``keep_recurrent_ops`` (entered around
torch.export by onnxport's capture) keeps these ops whole in the graph with a shape-only kernel, so
batch and time stay symbolic.

Packed sequences: torch.export cannot capture a PackedSequence (its ``batch_sizes`` are data
computed from the lengths; nn.LSTM then sizes its zero state from ``batch_sizes[0]``).
``rnn_packed.py`` captures the common pattern ``pack_padded_sequence -> nn.LSTM/GRU/RNN ->
pad_packed_sequence`` as one op with ONNX ``sequence_lens``; any other packing reaches
``torch._VF._pack_padded_sequence``, which ``keep_recurrent_ops`` makes raise an
``UnsupportedOpError``; the ``.data`` overloads raise one too if met.
"""

from __future__ import annotations


import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import TranslationError, UnsupportedOpError
from onnxport.capture.patches import Patch, SetAttribute, SetKernel, register
from onnxport.capture.tracing import translating
from onnxport.translate.ops.rnn_projected import is_projected, lstm_projected
from onnxport.translate.registry import translates

aten = torch.ops.aten

# PyTorch gate chunk order -> ONNX gate chunk order
_LSTM_ORDER = (0, 3, 1, 2)  # i f g o -> i o f c
_GRU_ORDER = (1, 0, 2)  # r z n -> z r h
_RNN_ORDER = (0,)


# --------------------------------------------------------------------------- capture
def _lstm_shapes(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    h, c = hx
    dirs = 2 if bidirectional else 1
    return input.new_empty((*input.shape[:2], dirs * h.shape[-1])), h.new_empty(h.shape), c.new_empty(c.shape)


def _gru_shapes(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    dirs = 2 if bidirectional else 1
    return input.new_empty((*input.shape[:2], dirs * hx.shape[-1])), hx.new_empty(hx.shape)


_SHAPE_KERNELS = {
    aten.lstm.input: _lstm_shapes,
    aten.gru.input: _gru_shapes,
    aten.rnn_tanh.input: _gru_shapes,
    aten.rnn_relu.input: _gru_shapes,
}

_PACKED_HINT = ("call it as torch.nn.utils.rnn.pack_padded_sequence(...) followed by "
                "torch.nn.utils.rnn.pad_packed_sequence(..., total_length=T) around an nn.LSTM/GRU/RNN "
                "(exported with ONNX sequence_lens), rather than a name imported from torch.nn.utils.rnn "
                "or a PackedSequence used otherwise")


def _packed_unsupported(*args, **kwargs):
    raise UnsupportedOpError(
        "pack_padded_sequence cannot be captured by torch.export: a PackedSequence's batch_sizes are data "
        "computed from the lengths, so the recurrent layer's sizes become data-dependent",
        hint=_PACKED_HINT)


def _recurrent_changes() -> list:
    return [SetAttribute(torch._VF, "_pack_padded_sequence", lambda _original: _packed_unsupported),
            *(SetKernel(op, fn) for op, fn in _SHAPE_KERNELS.items())]


KEEP_RECURRENT_OPS = register(Patch(
    "recurrent ops kept whole", _recurrent_changes,
    "aten.lstm/gru/rnn_*.input kept whole while torch.export traces: their Python decompositions "
    "(CompositeImplicitAutograd and Autograd kernels, which loop over time) replaced by kernels computing only "
    "the output shapes; torch._VF._pack_padded_sequence raises UnsupportedOpError. Eager execution does not use "
    "these kernels (they are consulted only by torch's Python dispatcher during tracing)", when=translating, order=26))


# --------------------------------------------------------------------------- weights
def _reorder(ctx, w: ir.Value, order: tuple[int, ...]) -> ir.Value:
    """Reorder the gate chunks of ``w`` (first axis) and add a leading direction axis."""
    n = len(order)
    if w.const_value is not None:
        arr = w.const_value.numpy()
        chunks = np.split(arr, n, axis=0)
        return ctx.const(np.concatenate([chunks[i] for i in order], axis=0)[None])
    parts = ctx.op.Split(w, axis=0, num_outputs=n, _outputs=n) if n > 1 else (w,)
    cat = ctx.op.Concat(*[parts[i] for i in order], axis=0) if n > 1 else w
    return ctx.op.Unsqueeze(cat, ctx.const(np.array([0], dtype=np.int64)))


def _stack_dirs(ctx, values: list[ir.Value]) -> ir.Value:
    if len(values) == 1:
        return values[0]
    if all(v.const_value is not None for v in values):
        return ctx.const(np.concatenate([v.const_value.numpy() for v in values], axis=0))
    return ctx.op.Concat(*values, axis=0)


def _layer_weights(ctx, params, layer: int, dirs: int, has_biases: bool, order):
    """ONNX (W, R, B) of one layer from the flat PyTorch params."""
    per = 4 if has_biases else 2
    ws, rs, bs = [], [], []
    for d in range(dirs):
        base = (layer * dirs + d) * per
        w_ih, w_hh = params[base], params[base + 1]
        ws.append(_reorder(ctx, w_ih, order))
        rs.append(_reorder(ctx, w_hh, order))
        if has_biases:
            b_ih, b_hh = _reorder(ctx, params[base + 2], order), _reorder(ctx, params[base + 3], order)
            if b_ih.const_value is not None and b_hh.const_value is not None:
                bs.append(ctx.const(np.concatenate([b_ih.const_value.numpy(), b_hh.const_value.numpy()], axis=1)))
            else:
                bs.append(ctx.op.Concat(b_ih, b_hh, axis=1))
    return _stack_dirs(ctx, ws), _stack_dirs(ctx, rs), (_stack_dirs(ctx, bs) if has_biases else None)


def _slice0(ctx, x: ir.Value, start: int, stop: int) -> ir.Value:
    return ctx.op.Slice(x, ctx.const(np.array([start], dtype=np.int64)), ctx.const(np.array([stop], dtype=np.int64)),
                        ctx.const(np.array([0], dtype=np.int64)))


def _check(kind: str, params, has_biases, num_layers, dropout, train, bidirectional, gates: int):
    per = 4 if has_biases else 2
    dirs = 2 if bidirectional else 1
    if train and dropout:
        raise TranslationError(f"{kind} with dropout={dropout} in training mode is random",
                               hint="export the model in eval mode (model.eval())")
    if len(params) != num_layers * dirs * per:
        raise TranslationError(
            f"{kind} with {len(params)} weight tensors for {num_layers} layer(s) x {dirs} direction(s), "
            f"expected {num_layers * dirs * per}",
            hint="pass the layer's own flat weights (nn.LSTM/GRU/RNN._flat_weights)")
    hidden = params[1].shape[-1]
    if params[1].shape[0] != gates * hidden:
        raise TranslationError(f"{kind}: hidden weight of shape {list(params[1].shape)} is not [{gates}*H, H]",
                               hint="pass the layer's own flat weights (nn.LSTM/GRU/RNN._flat_weights)")
    return dirs, hidden


def _recurrent(ctx, onnx_op: str, x, states, params, has_biases, num_layers, bidirectional, batch_first,
               order, extra_attrs, sequence_lens=None):
    """Run ``num_layers`` ONNX recurrent nodes; returns (output, [final state per state input]).

    ``sequence_lens``: optional int32[B] valid lengths (ONNX ``sequence_lens``)."""
    dirs = 2 if bidirectional else 1
    hidden = params[1].shape[-1]
    if batch_first:
        x = ctx.op.Transpose(x, perm=[1, 0, 2])
    finals: list[list[ir.Value]] = [[] for _ in states]
    direction = "bidirectional" if bidirectional else "forward"
    n_out = 1 + len(states)
    for layer in range(num_layers):
        w, r, b = _layer_weights(ctx, params, layer, dirs, has_biases, order)
        init = [_slice0(ctx, s, layer * dirs, (layer + 1) * dirs) for s in states]
        outs = getattr(ctx.op, onnx_op)(x, w, r, b, sequence_lens, *init, hidden_size=int(hidden), direction=direction,
                                        _outputs=n_out, **extra_attrs)
        y = outs[0]  # [T, dirs, B, H]
        for i in range(len(states)):
            finals[i].append(outs[1 + i])
        x = ctx.op.Reshape(ctx.op.Transpose(y, perm=[0, 2, 1, 3]),
                           ctx.const(np.array([0, 0, dirs * hidden], dtype=np.int64)))
    if batch_first:
        x = ctx.op.Transpose(x, perm=[1, 0, 2])
    last = [f[0] if len(f) == 1 else ctx.op.Concat(*f, axis=0) for f in finals]
    return x, last


@translates(aten.lstm.input)
def lstm(ctx, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """aten::lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers,
    float dropout, bool train, bool bidirectional, bool batch_first) -> (output, h_n, c_n).

    input: float[T, B, I] (or [B, T, I] when batch_first); hx: (h0, c0) each
    float[layers*dirs, B, H]. With projections (proj_size P > 0: a ``w_hr`` per layer and
    direction, h0 float[layers*dirs, B, P]) a Scan over the cell (``rnn_projected.py``). Raises
    TranslationError for dropout in training mode.
    """
    if is_projected(params, has_biases, num_layers, bidirectional):
        return lstm_projected(ctx, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                              batch_first)
    _check("lstm", params, has_biases, num_layers, dropout, train, bidirectional, 4)
    out, (h, c) = _recurrent(ctx, "LSTM", input, list(hx), params, has_biases, num_layers, bidirectional,
                             batch_first, _LSTM_ORDER, {})
    return out, h, c


@translates(aten.gru.input)
def gru(ctx, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """aten::gru.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers,
    float dropout, bool train, bool bidirectional, bool batch_first) -> (output, h_n).

    ONNX GRU with ``linear_before_reset=1`` (PyTorch's n = tanh(W_in x + b_in + r * (W_hn h + b_hn))).
    """
    _check("gru", params, has_biases, num_layers, dropout, train, bidirectional, 3)
    out, (h,) = _recurrent(ctx, "GRU", input, [hx], params, has_biases, num_layers, bidirectional, batch_first,
                           _GRU_ORDER, {"linear_before_reset": 1})
    return out, h


def _rnn(activation: str):
    def fn(ctx, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        _check(f"rnn_{activation.lower()}", params, has_biases, num_layers, dropout, train, bidirectional, 1)
        acts = [activation] * (2 if bidirectional else 1)
        out, (h,) = _recurrent(ctx, "RNN", input, [hx], params, has_biases, num_layers, bidirectional,
                               batch_first, _RNN_ORDER, {"activations": acts})
        return out, h

    fn.__name__ = f"rnn_{activation.lower()}"
    fn.__doc__ = (f"aten::rnn_{activation.lower()}.input(...) -> (output, h_n): Elman RNN with {activation} "
                  "on ONNX RNN.")
    return fn


translates(aten.rnn_tanh.input)(_rnn("Tanh"))
translates(aten.rnn_relu.input)(_rnn("Relu"))


@translates(aten.lstm.data, aten.gru.data, aten.rnn_tanh.data, aten.rnn_relu.data)
def packed_sequence(ctx, *args, **kwargs):
    """The PackedSequence overloads: not exportable (see the module docstring)."""
    raise UnsupportedOpError("recurrent layer on a PackedSequence (pack_padded_sequence) cannot be exported: "
                             "its sizes depend on the lengths' values", hint=_PACKED_HINT)
