"""A real copy of a model on the meta device, its values read from the checkpoint (for running it in
eager PyTorch, which needs every weight in memory)."""

from __future__ import annotations

import copy

import torch

from onnxport.errors import CheckpointError
from onnxport.weights.binding import Weights, on_meta


def materialize(module: torch.nn.Module, weights: Weights, *, in_place: bool = False) -> torch.nn.Module:
    """A deep copy of ``module`` (cheap: its meta tensors hold no data) whose parameters and
    buffers bound to the checkpoint are read from it (``Weights.read``, one tensor at a time,
    assigned without a second copy); buffers it computed itself are kept. ``module`` is unchanged.

    With ``in_place=True``, ``module`` itself gets the values and is returned (no copy: for a
    model built with values of its own, which the checkpoint's replace, as ``load_state_dict``
    would; its parameters keep their ``requires_grad``).

    Needs memory for all the weights. Raises ``CheckpointError`` when a tensor stays on the meta
    device (a non-persistent buffer with no values) or a file cannot be read.
    """
    real = module if in_place else copy.deepcopy(module)
    read: dict[str, torch.Tensor] = {}  # a tensor tied under several names is read once and stays tied
    state = {}
    for name, source in weights.sources.items():
        if source not in read:
            read[source] = weights.read(name)
        state[name] = read[source]
    real.load_state_dict(state, strict=False, assign=True)
    if not in_place:
        for param in real.parameters():
            param.requires_grad_(False)
    left = on_meta(real)
    if left:
        raise CheckpointError(f"the model keeps tensors on the meta device after loading {weights.checkpoint.source}: "
                              f"{', '.join(left[:12])}", hint="build the model under onnxport.weights.empty_weights()")
    return real.eval()
