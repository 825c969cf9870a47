"""Checkpoints: read a state dict safely and load it into a module, listing any key mismatch."""

from __future__ import annotations

import os
import pickle
from typing import Any

import torch

from onnxport.errors import CheckpointError
from onnxport.weights.checkpoint import state_dict_in, unreadable

__all__ = ["load_checkpoint", "load_state", "read_checkpoint", "read_state_dict", "state_dict_in"]

_SHOWN = 8


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Load ``path`` with ``torch.load(weights_only=True)`` and return its state dict.

    A file holding a dict of several things (``{"model": ..., "optimizer": ..., "epoch": 3}``)
    gives its ``model`` (or ``state_dict``, ``model_state_dict``, ``module``) entry.
    Raises ``CheckpointError`` when the file is missing, is not a weights-only torch file, or
    holds no state dict.
    """
    return state_dict_in(read_checkpoint(path), os.fspath(path))


def read_checkpoint(path: str | os.PathLike) -> Any:
    """Load ``path`` with ``torch.load(weights_only=True)`` on the CPU and return what it holds.
    Raises ``CheckpointError`` when the file is missing or is not a weights-only torch file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {path} does not exist", hint="check the --checkpoint path")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as e:
        raise unreadable(path, e) from e
    return obj


def _listed(keys: list[str]) -> str:
    shown = ", ".join(keys[:_SHOWN])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > _SHOWN else "")


def load_checkpoint(model: torch.nn.Module, path: str | os.PathLike) -> torch.nn.Module:
    """Load the checkpoint at ``path`` into ``model`` (strictly) and return the model.

    A ``module.`` prefix on every key (saved from ``DataParallel``) is dropped when the model's
    keys have none. Raises ``CheckpointError`` listing missing keys, unexpected keys and shape
    mismatches (name, checkpoint shape, model shape).
    """
    return load_state(model, read_state_dict(path), os.fspath(path))


def load_state(model: torch.nn.Module, state: dict[str, torch.Tensor], source: str) -> torch.nn.Module:
    """Load the state dict ``state`` (read from ``source``) into ``model`` as ``load_checkpoint`` does."""
    own = model.state_dict()
    if state and all(k.startswith("module.") for k in state) and not any(k.startswith("module.") for k in own):
        state = {k[len("module."):]: v for k, v in state.items()}
    missing = sorted(k for k in own if k not in state)
    unexpected = sorted(k for k in state if k not in own)
    shapes = sorted(f"{k} {tuple(state[k].shape)} vs {tuple(own[k].shape)}" for k in own
                    if k in state and tuple(state[k].shape) != tuple(own[k].shape))
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"missing keys: {_listed(missing)}")
        if unexpected:
            parts.append(f"unexpected keys: {_listed(unexpected)}")
        if shapes:
            parts.append(f"shape mismatches (checkpoint vs model): {_listed(shapes)}")
        raise CheckpointError(f"checkpoint {source} does not fit the model: " + "; ".join(parts),
                              hint="build the model with the arguments it was trained with (--model-arg or [model])")
    model.load_state_dict(state, strict=True)
    return model
