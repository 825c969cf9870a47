"""One step of the ONNX recurrent operators (onnx.ai/onnx/operators: LSTM, GRU, RNN), as the
nodes of a Scan body, for ``targets.recurrent_lengths``.

A cell takes ``op`` (``op("Add", a, b)`` makes a node, returns its output), ``const`` (an array
-> an initializer), the step's input ``x_t [B, I]``, its states (``h``; ``h, c`` for the LSTM) and the
direction's weights prepared outside the loop: ``w [I, G*H]`` and ``r [H, G*H]`` transposed, and
the biases ``wb``, ``rb`` (``[G*H]`` each) of the operator's ``B``. It returns the new states, the
first being the step's output ``h``. Gate orders and equations are the specification's:

* LSTM, gates ``i, o, f, c`` (sigmoid, tanh, tanh): ``c' = f*c + i*g``, ``h' = o*tanh(c')``;
* GRU, gates ``z, r, h`` with ``linear_before_reset=1`` (PyTorch's form):
  ``h~ = tanh(x Wh + wbh + r * (h Rh + rbh))``, ``h' = (1 - z) * h~ + z * h``;
* RNN: ``h' = f(x W + h R + wb + rb)``, ``f`` its activation (Tanh or Relu).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
STATES = {"LSTM": 2, "GRU": 1, "RNN": 1}


def lstm(op: Callable, const: Callable, x_t, states: list, w, r, wb, rb, activation: str) -> list:
    """``[h', c']`` of one LSTM step."""
    h, c = states
    gates = op("Add", op("Add", op("MatMul", x_t, w), op("MatMul", h, r)), op("Add", wb, rb))
    i, o, f, g = op("Split", gates, axis=1, num_outputs=4, outputs=4)
    i, o, f, g = op("Sigmoid", i), op("Sigmoid", o), op("Sigmoid", f), op("Tanh", g)
    c_new = op("Add", op("Mul", f, c), op("Mul", i, g))
    return [op("Mul", o, op("Tanh", c_new)), c_new]


def gru(op: Callable, const: Callable, x_t, states: list, w, r, wb, rb, activation: str) -> list:
    """``[h']`` of one GRU step (``linear_before_reset=1``)."""
    (h,) = states
    xz, xr, xh = op("Split", op("Add", op("MatMul", x_t, w), wb), axis=1, num_outputs=3, outputs=3)
    hz, hr, hh = op("Split", op("Add", op("MatMul", h, r), rb), axis=1, num_outputs=3, outputs=3)
    z, reset = op("Sigmoid", op("Add", xz, hz)), op("Sigmoid", op("Add", xr, hr))
    candidate = op("Tanh", op("Add", xh, op("Mul", reset, hh)))
    one = const(np.ones((), x_t.dtype.numpy()))
    return [op("Add", op("Mul", op("Sub", one, z), candidate), op("Mul", z, h))]


def rnn(op: Callable, const: Callable, x_t, states: list, w, r, wb, rb, activation: str) -> list:
    """``[h']`` of one RNN step, its activation ``Tanh`` or ``Relu``."""
    (h,) = states
    pre = op("Add", op("Add", op("MatMul", x_t, w), op("MatMul", h, r)), op("Add", wb, rb))
    return [op(activation, pre)]


CELLS = {"LSTM": lstm, "GRU": gru, "RNN": rnn}
