"""LSTM with projections (``nn.LSTM(proj_size=P)``, LSTMP) as an ONNX Scan over the cell.

Semantics: ``torch.nn.LSTM`` with ``proj_size > 0`` (PyTorch docs; Sak et al. 2014, "Long
Short-Term Memory Based Recurrent Neural Network Architectures for Large Vocabulary Speech
Recognition"): per layer and direction, with gates in PyTorch's order i, f, g, o,

    gates = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)               c: [B, H]
    h_t = (sigmoid(o) * tanh(c_t)) W_hr^T                           h: [B, P]

ONNX's LSTM operator has no projection, so each layer is one ``Scan`` (ONNX Scan spec) carrying
``(h, c)`` of each direction: the input products ``x_t W_ih^T + b_ih + b_hh`` of every step are
computed before it in one MatMul, the reverse direction reads its inputs and writes its outputs
backwards (``scan_input_directions`` / ``scan_output_directions`` = 1), and the layer's output
``[T, B, dirs * P]`` feeds the next layer. The weights are captured by the Scan body.

Packed sequences (``rnn_packed.py``) pass each sequence's length: a mask ``t < length`` is scanned
with the inputs, and a step past a sequence's end leaves its state as it was and outputs zero.
Forward, the final state is the one of the last valid step; backward, each sequence starts from
its initial state at its own last valid step, as ``pack_padded_sequence`` runs it.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.errors import TranslationError
from onnxport.translate import bodies

_BOOL = ir.DataType.BOOL


def is_projected(params, has_biases: bool, num_layers: int, bidirectional: bool) -> bool:
    """Whether the flat LSTM ``params`` hold a projection ``w_hr`` per layer and direction (five
    tensors each with biases, three without)."""
    per = 5 if has_biases else 3
    return len(params) == num_layers * (2 if bidirectional else 1) * per


def _cell(sub, h, c, xw, w_hh_t, w_hr_t, valid, zero):
    """One step of one direction; returns (h_t, c_t, output_t)."""
    op = sub.op
    gates = op.Add(xw, op.MatMul(h, w_hh_t))
    i, f, g, o = op.Split(gates, axis=1, num_outputs=4, _outputs=4)
    c_new = op.Add(op.Mul(op.Sigmoid(f), c), op.Mul(op.Sigmoid(i), op.Tanh(g)))
    h_new = op.MatMul(op.Mul(op.Sigmoid(o), op.Tanh(c_new)), w_hr_t)
    if valid is None:
        return h_new, c_new, h_new
    return op.Where(valid, h_new, h), op.Where(valid, c_new, c), op.Where(valid, h_new, zero)


def _typed(value: ir.Value, dtype: ir.DataType, dims: list) -> ir.Value:
    value.type, value.shape = ir.TensorType(dtype), ir.Shape(dims)
    return value


def lstm_projected(ctx, x, hx, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
                   bidirectional: bool, batch_first: bool, lengths=None):
    """LSTM layers with projections as one Scan per layer; returns (output, h_n, c_n).

    Args:
        x: float[T, B, I] (``[B, T, I]`` when ``batch_first``).
        hx: ``(h0, c0)``: float[layers*dirs, B, P] and float[layers*dirs, B, H].
        params: per layer and direction ``w_ih[4H, I], w_hh[4H, P], (b_ih[4H], b_hh[4H],) w_hr[P, H]``.
        lengths: optional int64[B], each sequence's valid steps (packed sequences), time-major ``x``.

    Returns output float[T, B, dirs*P] (zero past each length), h_n and c_n as ``hx``.

    Raises:
        TranslationError: dropout in training mode (random).
    """
    if train and dropout:
        raise TranslationError(f"lstm with dropout={dropout} in training mode is random",
                               hint="export the model in eval mode (model.eval())")
    op = ctx.op
    dirs = 2 if bidirectional else 1
    per = 5 if has_biases else 3
    hidden, proj = params[0].shape[0] // 4, params[per - 1].shape[0]
    dtype = x.dtype
    h0, c0 = hx
    if batch_first:
        x = op.Transpose(x, perm=[1, 0, 2])
    mask = None
    if lengths is not None:
        steps = op.Range(ctx.const(np.array(0, np.int64)), ctx.dim(x, 0), ctx.const(np.array(1, np.int64)))
        mask = op.Unsqueeze(op.Less(op.Unsqueeze(steps, ctx.const([1])),
                                    op.Unsqueeze(ctx.cast(lengths, ir.DataType.INT64), ctx.const([0]))),
                            ctx.const([2]))  # [T, B, 1]
    h_n, c_n = [], []
    for layer in range(num_layers):
        inits, scanned, weights = [], [], []
        for d in range(dirs):
            base = (layer * dirs + d) * per
            w_ih, w_hh, w_hr = params[base], params[base + 1], params[base + per - 1]
            xw = op.MatMul(x, op.Transpose(w_ih, perm=[1, 0]))
            if has_biases:
                xw = op.Add(xw, op.Add(params[base + 2], params[base + 3]))
            index = ctx.const(np.array(layer * dirs + d, np.int64))
            inits += [op.Gather(h0, index, axis=0), op.Gather(c0, index, axis=0)]
            scanned.append(xw)
            weights.append((op.Transpose(w_hh, perm=[1, 0]), op.Transpose(w_hr, perm=[1, 0])))
        if mask is not None:
            scanned += [mask] * dirs

        def body(sub, ins, weights=weights):
            states, xws, valid = ins[:2 * dirs], ins[2 * dirs:3 * dirs], ins[3 * dirs:] or [None] * dirs
            zero = sub.const(np.array(0, dtype=dtype.numpy()))
            steps = [_cell(sub, states[2 * d], states[2 * d + 1], xws[d], *weights[d], valid[d], zero)
                     for d in range(dirs)]
            new_states = [v for h, c, _ in steps
                          for v in (_typed(h, dtype, [None, proj]), _typed(c, dtype, [None, hidden]))]
            return new_states + [_typed(y, dtype, [None, proj]) for _, _, y in steps]

        state_types = [(dtype, [None, proj]), (dtype, [None, hidden])] * dirs
        scan_types = [(dtype, [None, 4 * hidden])] * dirs + [(_BOOL, [None, 1])] * (dirs if mask is not None else 0)
        graph = bodies.subgraph(ctx, "lstm_projected", state_types + scan_types, body)
        directions = list(range(dirs)) * (2 if mask is not None else 1)
        outs = op.Scan(*inits, *scanned, body=graph, num_scan_inputs=len(scanned),
                       scan_input_directions=directions if bidirectional else None,
                       scan_output_directions=list(range(dirs)) if bidirectional else None, _outputs=3 * dirs)
        for d in range(dirs):
            h_n.append(op.Unsqueeze(outs[2 * d], ctx.const([0])))
            c_n.append(op.Unsqueeze(outs[2 * d + 1], ctx.const([0])))
        ys = outs[2 * dirs:]
        x = ys[0] if dirs == 1 else op.Concat(*ys, axis=2)
    if batch_first:
        x = op.Transpose(x, perm=[1, 0, 2])

    def concat(vs):
        return vs[0] if len(vs) == 1 else op.Concat(*vs, axis=0)

    return x, concat(h_n), concat(c_n)
