"""The model's parameters and buffers matched with a checkpoint by qualified name, before anything
is traced or written: every tensor the ONNX model needs gets its source (the checkpoint, read at
save time, or the module when it holds real values), or the export stops naming every mismatch."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import onnx_ir as ir
import torch

from onnxport.errors import CheckpointError
from onnxport.weights.checkpoint import Checkpoint

_SHOWN = 12


@dataclasses.dataclass(frozen=True)
class Weights:
    """Where each tensor of a model on the meta device comes from.

    Attributes:
        checkpoint: the ``Checkpoint`` the values are read from.
        sources: the module's qualified name (each name of a tied tensor) -> the checkpoint name
            holding its value.
        dtypes: qualified name -> the dtype the ONNX initializer has (the module's; a checkpoint
            tensor of another dtype is cast to it only with ``cast=True``).
        computed: the buffers absent from the checkpoint whose values the module computed when it
            was built (rotary tables, position ids), used as they are.
    """

    checkpoint: Checkpoint
    sources: dict[str, str]
    dtypes: dict[str, torch.dtype]
    computed: tuple[str, ...] = ()

    def __contains__(self, name: str) -> bool:
        return name in self.sources

    def read(self, name: str) -> torch.Tensor:
        """The value of the module's tensor ``name``, read from the checkpoint (cast to the module's
        dtype when it differs). ``CheckpointError`` when the file cannot be read."""
        tensor = self.checkpoint.read(self.sources[name])
        return tensor if tensor.dtype == self.dtypes[name] else tensor.to(self.dtypes[name])

    def lazy(self, name: str) -> ir.LazyTensor:
        """An ``onnx_ir.LazyTensor`` of ``name``: dtype and shape known now, its data read from the
        checkpoint each time it is asked for (when the model is saved), never kept."""
        entry = self.checkpoint.entries[self.sources[name]]
        return ir.LazyTensor(lambda: ir_tensor(self.read(name), name), dtype=ir_dtype(self.dtypes[name]),
                             shape=ir.Shape(entry.shape), name=name)


def ir_dtype(dtype: torch.dtype) -> ir.DataType:
    """The ONNX data type of a torch dtype."""
    if dtype == torch.bfloat16:
        return ir.DataType.BFLOAT16
    return ir.DataType.from_numpy(np.dtype(torch.empty((), dtype=dtype).numpy().dtype))


def ir_tensor(t: torch.Tensor, name: str) -> ir.Tensor:
    """``t`` (CPU) as an ``onnx_ir.Tensor`` sharing its memory; bfloat16 through its bits."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return ir.tensor(t.view(torch.uint16).numpy().view(ir.DataType.BFLOAT16.numpy()), name=name)
    return ir.tensor(t.numpy(), name=name)


def on_meta(module: torch.nn.Module) -> list[str]:
    """Qualified names of ``module``'s parameters and buffers on the meta device (no values)."""
    return [n for n, t in _named_tensors(module).items() if t.is_meta]


def bind(module: torch.nn.Module, checkpoint: Checkpoint, *, cast: bool = False) -> Weights:
    """Match ``module``'s parameters and persistent buffers with ``checkpoint`` by qualified name
    (``module.state_dict()``'s names; a tied tensor may be in the checkpoint under any of its names).

    Args:
        module: the model, its parameters (some or all) on the meta device.
        checkpoint: from ``open_checkpoint``.
        cast: cast a checkpoint tensor of another floating dtype to the module's dtype as it is
            read (build the model in the dtype the ONNX model should have, e.g.
            ``model.to(torch.float16)`` on the meta device).

    A buffer absent from the checkpoint is taken from the module when it holds values (computed
    in ``__init__``; build the model under ``onnxport.weights.empty_weights()`` so that buffers
    are computed while parameters stay on the meta device).

    Raises:
        CheckpointError: listing every name missing from the checkpoint (a parameter, or a buffer
            left on the meta device), unexpected in it, of another shape, or of another dtype
            (without ``cast``); nothing is read or written.
    """
    persistent = module.state_dict(keep_vars=True)
    tensors = _named_tensors(module)
    aliases: dict[int, list[str]] = {}
    for name, t in persistent.items():
        aliases.setdefault(id(t), []).append(name)
    sources, dtypes, computed = {}, {}, []
    missing, meta_buffers, shapes, kinds = [], [], [], []
    params = {n for n, _ in module.named_parameters(remove_duplicate=False)}
    for name, t in persistent.items():
        held = [a for a in aliases[id(t)] if a in checkpoint]
        if not held:
            if t.is_meta or name in params:
                (missing if name in params else meta_buffers).append(name)
            else:
                computed.append(name)
            continue
        entry = checkpoint.entries[held[0]]
        if entry.shape != tuple(t.shape):
            shapes.append(f"{entry.name} {entry.shape} vs {tuple(t.shape)}")
        elif entry.dtype != t.dtype and not (cast and entry.dtype.is_floating_point and t.dtype.is_floating_point):
            kinds.append(f"{entry.name} {_dt(entry.dtype)} vs {_dt(t.dtype)}")
        sources[name], dtypes[name] = entry.name, t.dtype
    for name, t in tensors.items():  # non-persistent buffers: no checkpoint has them
        if name not in persistent and t.is_meta:
            meta_buffers.append(name)
    claimed = {aliases_name for names in aliases.values() for aliases_name in names}
    unexpected = sorted(k for k in checkpoint.entries if k not in claimed)
    parts = []
    if missing:
        parts.append(f"missing from the checkpoint: {_listed(sorted(missing))}")
    if meta_buffers:
        parts.append(f"buffers on the meta device and not in the checkpoint: {_listed(sorted(meta_buffers))}")
    if unexpected:
        parts.append(f"unexpected in the checkpoint: {_listed(unexpected)}")
    if shapes:
        parts.append(f"other shape (checkpoint vs model): {_listed(sorted(shapes))}")
    if kinds:
        parts.append(f"other dtype (checkpoint vs model): {_listed(sorted(kinds))}")
    if parts:
        hints = []
        if meta_buffers:
            hints.append("build the model under onnxport.weights.empty_weights(), which leaves only parameters on "
                         "the meta device and computes buffers as __init__ does")
        if kinds:
            hints.append("build the model in the checkpoint's dtype (model.to(dtype) on the meta device), or pass "
                         "cast_weights=True to cast each tensor as it is written")
        if missing or unexpected or shapes:
            hints.append("build the model with the configuration the checkpoint was saved from")
        raise CheckpointError(f"checkpoint {checkpoint.source} does not fit the model: " + "; ".join(parts),
                              hint="; ".join(hints))
    if computed:
        warnings.warn(f"buffers saved with the model's state (persistent) are not in checkpoint {checkpoint.source}: "
                      f"{_listed(sorted(computed))}; the export uses the values the model's __init__ computed for them, "
                      "which is right for tables __init__ derives (position ids, rotary frequencies) and wrong for "
                      "state learned in training (BatchNorm's running statistics): save those with the checkpoint",
                      UserWarning, stacklevel=4)
    return Weights(checkpoint, sources, dtypes, tuple(computed))


def _named_tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(module.named_parameters(remove_duplicate=False)),
            **dict(module.named_buffers(remove_duplicate=False))}


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... ({len(names)} in all)" if len(names) > _SHOWN else "")
