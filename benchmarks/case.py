"""``Case``: one benchmark model, its example inputs, its dynamic shapes and other input sets."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch


@dataclasses.dataclass
class Case:
    """One benchmark model.

    Attributes:
        model: the eval-mode module.
        args: example positional inputs for the export.
        dynamic_shapes: as ``onnxport.to_onnx`` takes it.
        others: other input sets (other sizes of the dynamic dimensions, consistent with each other:
            lengths never exceed the time size) for the error check; empty: compare.py grows every
            dynamic dimension of ``args``.
        onnxport_kwargs: extra keyword arguments of ``onnxport.to_onnx`` (e.g. ``rewrite_control_flow``).
    """

    model: torch.nn.Module
    args: tuple
    dynamic_shapes: Any
    others: list[tuple] = dataclasses.field(default_factory=list)
    onnxport_kwargs: dict = dataclasses.field(default_factory=dict)
