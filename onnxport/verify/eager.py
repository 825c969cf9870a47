"""Eager PyTorch's side of a comparison: the outputs of one call, and the buffers and inputs the
call updated in place, named as the ONNX model names them (``<name>.updated``)."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
from torch.utils import _pytree as pytree

from onnxport.library.transformers.cache_utils import sliding_window_as_full

UPDATED = ".updated"
_NUMBERS = (bool, int, float)


def output_leaves(out: Any) -> list[torch.Tensor]:
    """The outputs of one eager call as tensors, in pytree order: ``None`` dropped (the ONNX model
    has no output for it), Python numbers (a size, a constant) as 0-d tensors of torch's default
    dtype of Python's number (``int64``, ``float64``, ``bool``), as the ONNX model returns them."""
    leaves = []
    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            leaves.append(leaf)
        elif isinstance(leaf, (float, torch.SymFloat)):
            leaves.append(torch.tensor(float(leaf), dtype=torch.float64))
        elif isinstance(leaf, _NUMBERS) or isinstance(leaf, (torch.SymInt, torch.SymBool)):
            leaves.append(torch.tensor(leaf))
    return leaves


def run_eager(module: torch.nn.Module, fresh: bool, args: tuple, kwargs: dict, input_names: list[str],
              updated: list[str]) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Call ``module`` on copies of the inputs (and on a copy of the module when ``fresh``: it
    updates its buffers) without grad; transformers' sliding-window cache layers hold every step,
    as in the export (``onnxport.library.transformers.cache_utils.sliding_window_as_full``).

    Args:
        input_names: the ONNX model's input names, one per tensor of ``(args, kwargs)`` in pytree order.
        updated: the names (without ``.updated``) of the buffers and inputs the ONNX model gives
            back after the call.

    Returns ``(outputs, {name: value after the call})`` for each name of ``updated`` found among
    the module's buffers and parameters or the inputs. Raises what the module raises.
    """
    feed_args, feed_kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (args, kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree notes on deepcopy
        run_module = copy.deepcopy(module) if fresh else module
    with torch.no_grad(), sliding_window_as_full():
        out = run_module(*feed_args, **feed_kwargs)
    state = dict(run_module.named_buffers()) | dict(run_module.named_parameters())
    leaves = [t for t in pytree.tree_leaves((feed_args, feed_kwargs)) if isinstance(t, torch.Tensor)]
    by_input = dict(zip(input_names, leaves))
    after = {}
    for name in updated:
        value = state.get(name, by_input.get(name))
        if isinstance(value, torch.Tensor):
            after[name] = value.detach()
    return output_leaves(out), after
