"""Sizes an operator takes as a Python bool or float, kept where the user's code passes them.

``F.scaled_dot_product_attention`` takes ``is_causal`` / ``enable_gqa`` as bools and ``scale`` as a
float. While torch.export traces, a model may pass values computed from sizes:

- ``is_causal=q.shape[2] > 1`` hands the operator a ``SymBool``, and its argument parser refuses it
  ("argument 'is_causal' must be bool, not SymBool"): the model cannot be captured at all. Such a
  flag is decided as the user's own ``if`` would be, at the user's line
  (``guards.record.deciding``): the trace follows the example's side, and a decision torch took from
  its default minimum of 2 alone (``n > 1``) is recorded, so that the export runs size 1 against eager
  PyTorch and exports it on its own where it differs (``onnxport.pieces``).
- ``scale=num_tokens ** -0.5`` (Florence-2's channel attention) hands it a ``SymFloat``, which torch
  specializes: the export would hold at the example's size only. The scale is applied to the query
  instead, ``sdpa(q * scale, k, v, scale=1.0)``, the same scores ``scale * q @ k^T``, so it stays a
  function of the sizes in the graph.

Eager execution is unchanged. Semantics: PyTorch's ``scaled_dot_product_attention``
(https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html).
"""

from __future__ import annotations

import torch

from onnxport.capture.guards.record import deciding, user_frame
from onnxport.capture.patches import Patch, SetAttribute, always, register

FLAGS = ("is_causal", "enable_gqa")  # scaled_dot_product_attention's bool keywords


def _kept(original):
    def scaled_dot_product_attention(*args, **kwargs):
        symbolic = [k for k in FLAGS if isinstance(kwargs.get(k), torch.SymBool)]
        if symbolic:
            with deciding(user_frame()):
                kwargs.update({k: bool(kwargs[k]) for k in symbolic})
        if isinstance(kwargs.get("scale"), (torch.SymFloat, torch.SymInt)):  # scale is keyword-only
            if args:
                args = (args[0] * kwargs["scale"], *args[1:])
            else:
                kwargs["query"] = kwargs["query"] * kwargs["scale"]
            kwargs["scale"] = 1.0
        return original(*args, **kwargs)

    return scaled_dot_product_attention


def _changes() -> list:
    return [SetAttribute(torch.nn.functional, "scaled_dot_product_attention", _kept)]


SIZE_ARGUMENTS = register(Patch(
    "sizes as attention arguments", _changes,
    "torch.nn.functional.scaled_dot_product_attention: a SymBool is_causal / enable_gqa (is_causal=n > 1) is "
    "decided at the user's line, as the user's own if would be, instead of failing the trace; a SymFloat scale "
    "(scale=n ** -0.5) scales the query instead of being specialized", when=always, order=12))
