"""Inputs int8-static calibrates its activation ranges on: the user's, or generated like the example.

onnxruntime's ``quantize_static`` reads input feeds from a ``CalibrationDataReader``; this module
makes the feeds, each a dict ONNX input name -> NumPy array, from ``(args, kwargs)`` input sets
flattened as the export flattened its example (tensors in pytree order).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from onnxport.capture.inputs import as_input_set, dim_examples, dim_names, inputs_like_example
from onnxport.errors import ValidationError

GENERATED_SETS = 8  # input sets generated when the user gives none


def feeds(input_names: list[str], input_set: tuple[tuple, dict]) -> dict[str, np.ndarray]:
    """The onnxruntime feed of one ``(args, kwargs)`` set: its tensors in pytree order, by name.

    Raises ``ValidationError`` when the set has another number of tensors than the model inputs."""
    tensors = [t for t in pytree.tree_leaves(input_set) if isinstance(t, torch.Tensor)]
    if len(tensors) != len(input_names):
        raise ValidationError(f"an input set holds {len(tensors)} tensors, the model takes {len(input_names)} "
                              f"({', '.join(input_names)})", hint="give input sets shaped like the export's example")
    return {n: t.detach().cpu().numpy() for n, t in zip(input_names, tensors)}


def input_sets(result, given: Any = None, count: int = GENERATED_SETS) -> tuple[list[tuple[tuple, dict]], str]:
    """``(sets, description)``: the user's input sets, or ``count`` sets generated like the example
    (its sizes, its values' mean and spread, integers in their range; ``capture.inputs``)."""
    if given is not None:
        sets = [as_input_set(s, "calibration=[(x1,), (x2,)] or [((ids,), {'attention_mask': mask})]") for s in given]
        if not sets:
            raise ValidationError("no calibration inputs given", hint="pass a list of input sets, or None to generate")
        return sets, f"given inputs ({len(sets)} sets)"
    if result.captured is None:
        raise ValidationError("no example to generate calibration inputs from (a model loaded from a file)",
                              hint="pass calibration=[...] input sets")
    names = dim_names(result.captured, result.dim_names)
    examples, _ = dim_examples(result.captured, names)
    sets = [inputs_like_example(result.captured, names, examples, seed=1000 + i) for i in range(count)]
    return sets, f"generated example-like inputs ({count} sets)"


class Reader:
    """onnxruntime's ``CalibrationDataReader`` protocol over prepared feeds (``get_next`` /
    ``rewind``)."""

    def __init__(self, all_feeds: list[dict[str, np.ndarray]]):
        self._feeds, self._i = list(all_feeds), 0

    def get_next(self) -> dict | None:
        if self._i >= len(self._feeds):
            return None
        self._i += 1
        return self._feeds[self._i - 1]

    def rewind(self) -> None:
        self._i = 0
