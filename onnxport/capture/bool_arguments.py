"""Size conditions an operator takes as a Python bool, decided where the user's code passes them.

``F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1)`` hands the operator a
``SymBool`` while torch.export traces, and the operator's argument parser refuses it ("argument
'is_causal' must be bool, not SymBool"): the model cannot be captured at all. ``BOOL_ARGUMENTS``
decides such an argument as the user's own ``if`` would be decided, at the user's line
(``guards.record.deciding``): the trace follows the example's side, and a decision torch took from its
default minimum of 2 alone (``n > 1``) is recorded, so that the export runs size 1 against eager
PyTorch and exports it on its own where it differs (``onnxport.pieces``). Eager execution is unchanged.
Semantics: PyTorch's ``scaled_dot_product_attention`` (https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html).
"""

from __future__ import annotations

import torch

from onnxport.capture.guards.record import deciding, user_frame
from onnxport.capture.patches import Patch, SetAttribute, always, register

FLAGS = ("is_causal", "enable_gqa")  # scaled_dot_product_attention's bool keywords


def _decided(original):
    def scaled_dot_product_attention(*args, **kwargs):
        symbolic = [k for k in FLAGS if isinstance(kwargs.get(k), torch.SymBool)]
        if symbolic:
            with deciding(user_frame()):
                kwargs.update({k: bool(kwargs[k]) for k in symbolic})
        return original(*args, **kwargs)

    return scaled_dot_product_attention


def _changes() -> list:
    return [SetAttribute(torch.nn.functional, "scaled_dot_product_attention", _decided)]


BOOL_ARGUMENTS = register(Patch(
    "size conditions as bool arguments", _changes,
    "torch.nn.functional.scaled_dot_product_attention: a SymBool is_causal / enable_gqa (is_causal=n > 1) is "
    "decided at the user's line, as the user's own if would be, instead of failing the trace", when=always, order=12))
