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
        prefix: the one-component prefix (``'m.'``) the names were matched across, ``''`` when
            the module's names are the checkpoint's.
        prefix_in: whose names carry ``prefix``: ``'model'`` (the checkpoint's ``0.weight`` is
            the module's ``m.0.weight``) or ``'checkpoint'`` (its ``model.0.weight`` is the
            module's ``0.weight``); ``''`` without one.
    """

    checkpoint: Checkpoint
    sources: dict[str, str]
    dtypes: dict[str, torch.dtype]
    computed: tuple[str, ...] = ()
    prefix: str = ""
    prefix_in: str = ""

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

    When the names differ and one prefix of one dotted component makes every name fit (the model
    wraps the checkpoint's model, ``m.0.weight`` for the checkpoint's ``0.weight``, or the
    checkpoint's names carry a wrapper the model lacks, ``model.0.weight`` for ``0.weight``), the
    tensors are bound across it with a ``UserWarning`` naming it; the checkpoint's own names are
    those read. Semantics of ``transformers``' ``from_pretrained``, which loads a checkpoint across
    the model's ``base_model_prefix`` in either direction; unlike it, only a prefix that makes
    every name fit is taken (the names left over are an error, not weights left initialized).

    Raises:
        CheckpointError: listing every name missing from the checkpoint (a parameter, or a buffer
            left on the meta device), unexpected in it, of another shape, or of another dtype
            (without ``cast``); when a prefix makes some of the names fit but not all, or more than
            one prefix would fit, the error names the prefix(es) and lists the mismatches left
            across it. Nothing is read or written.
    """
    persistent = module.state_dict(keep_vars=True)
    params = {n for n, _ in module.named_parameters(remove_duplicate=False)}
    aliases: dict[int, list[str]] = {}
    for name, t in persistent.items():
        aliases.setdefault(id(t), []).append(name)
    tensors = _named_tensors(module)
    non_persistent_meta = [n for n, t in tensors.items() if n not in persistent and t.is_meta]

    def match(prefix: str = "", in_model: bool = True) -> _Match:
        return _match(persistent, params, aliases, checkpoint, prefix, in_model)

    found = match()
    fits: list[_Match] = []
    partial: list[_Match] = []  # the candidates binding the most tensors, more than the names as they are
    if found.missing or found.unexpected:
        for prefix, in_model in _prefixes(persistent, checkpoint):
            candidate = match(prefix, in_model)
            if candidate.fits:
                if all(candidate.sources != other.sources for other in fits):  # a tied wrapper: the same binding
                    fits.append(candidate)
            elif candidate.bound > max([found.bound] + [m.bound for m in partial]):
                partial = [candidate]
            elif partial and candidate.bound == partial[0].bound:
                partial.append(candidate)
    if len(fits) > 1 or (not fits and len(partial) > 1):
        said = " or ".join(f"{m.prefix!r} ({m.where})" for m in fits or partial)
        fit = "fits the model" if fits else f"fits {partial[0].bound} of the model's {len(persistent)} names"
        raise CheckpointError(f"checkpoint {checkpoint.source} {fit} across more than one prefix of its names: "
                              f"{said}; onnxport does not choose",
                              hint=f"save the checkpoint with the names of the model you export (for the first: "
                                   f"{(fits or partial)[0].rename_hint}), or build the model the checkpoint was "
                                   "saved from")
    if fits or partial:
        found = (fits or partial)[0]
    meta_buffers = found.meta_buffers + non_persistent_meta
    shapes, kinds = [], []
    for name, source in found.sources.items():
        entry, t = checkpoint.entries[source], persistent[name]
        if entry.shape != tuple(t.shape):
            shapes.append(f"{entry.name} {entry.shape} vs {tuple(t.shape)}")
        elif entry.dtype != t.dtype and not (cast and entry.dtype.is_floating_point and t.dtype.is_floating_point):
            kinds.append(f"{entry.name} {_dt(entry.dtype)} vs {_dt(t.dtype)}")
    parts = []
    if found.missing:
        parts.append(f"missing from the checkpoint: {_listed(sorted(found.missing))}")
    if meta_buffers:
        parts.append(f"buffers on the meta device and not in the checkpoint: {_listed(sorted(meta_buffers))}")
    if found.unexpected:
        parts.append(f"unexpected in the checkpoint: {_listed(sorted(found.unexpected))}")
    if shapes:
        parts.append(f"other shape (checkpoint vs model): {_listed(sorted(shapes))}")
    if kinds:
        parts.append(f"other dtype (checkpoint vs model): {_listed(sorted(kinds))}")
    if parts:
        hints = []
        if found.prefix and not found.fits:
            hints.append(f"across the prefix {found.prefix!r} the checkpoint holds part of the model, or the model "
                         "part of the checkpoint: export the model the checkpoint was saved from, or save the "
                         "checkpoint from the model you export (its state_dict())")
        if meta_buffers:
            hints.append("build the model under onnxport.weights.empty_weights(), which leaves only parameters on "
                         "the meta device and computes buffers as __init__ does")
        if kinds:
            hints.append("build the model in the checkpoint's dtype (model.to(dtype) on the meta device), or pass "
                         "cast_weights=True to cast each tensor as it is written")
        if (found.missing or found.unexpected or shapes) and not (found.prefix and not found.fits):
            hints.append("build the model with the configuration the checkpoint was saved from")
        across = ""
        if found.prefix:
            across = (f"{found.where}; bound across it: " if found.fits else
                      f"{found.where}, which fits {found.bound} of the model's {len(persistent)} names; across it, ")
        raise CheckpointError(f"checkpoint {checkpoint.source} does not fit the model: " + across + "; ".join(parts),
                              hint="; ".join(hints))
    if found.prefix:
        model_name, checkpoint_name = found.example
        warnings.warn(f"checkpoint {checkpoint.source}: {found.where} (the model's {model_name} is the checkpoint's "
                      f"{checkpoint_name}); bound across it", UserWarning, stacklevel=4)
    if found.computed:
        warnings.warn(f"buffers saved with the model's state (persistent) are not in checkpoint {checkpoint.source}: "
                      f"{_listed(sorted(found.computed))}; the export uses the values the model's __init__ computed "
                      "for them, which is right for tables __init__ derives (position ids, rotary frequencies) and "
                      "wrong for state learned in training (BatchNorm's running statistics): save those with the "
                      "checkpoint", UserWarning, stacklevel=4)
    return Weights(checkpoint, found.sources, {n: persistent[n].dtype for n in found.sources},
                   tuple(found.computed), found.prefix, found.prefix and ("model" if found.in_model else "checkpoint"))


@dataclasses.dataclass
class _Match:
    """The module's tensors matched with the checkpoint's names, as they are (``prefix`` empty) or
    across a prefix the model's names carry (``in_model``) or the checkpoint's do."""

    prefix: str
    in_model: bool
    sources: dict[str, str]  # the module's name -> the checkpoint's name
    missing: list[str]
    meta_buffers: list[str]
    computed: list[str]
    unexpected: list[str]  # the checkpoint's names no tensor of the module claims

    @property
    def fits(self) -> bool:
        """Every parameter is found and every name of the checkpoint claimed (shapes, dtypes and
        buffers left on the meta device are checked apart)."""
        return not self.missing and not self.unexpected

    @property
    def bound(self) -> int:
        return len(self.sources)

    @property
    def example(self) -> tuple[str, str]:
        """One (the module's name, the checkpoint's name) pair."""
        return min(self.sources.items()) if self.sources else ("", "")

    @property
    def where(self) -> str:
        if self.in_model:
            return f"the checkpoint's names lack the model's prefix {self.prefix!r}"
        return f"the checkpoint's names carry a prefix {self.prefix!r} the model's names lack"

    @property
    def rename_hint(self) -> str:
        if self.in_model:
            return f"{{{self.prefix!r} + name: t for name, t in state.items()}}"
        return f"{{name.removeprefix({self.prefix!r}): t for name, t in state.items()}}"


def _match(persistent: dict[str, torch.Tensor], params: set[str], aliases: dict[int, list[str]],
           checkpoint: Checkpoint, prefix: str, in_model: bool) -> _Match:
    """The module's persistent tensors matched with the checkpoint's names read across ``prefix``:
    the checkpoint's name ``n`` stands for the module's ``prefix + n`` (``in_model``), or the
    checkpoint's ``prefix + n`` for the module's ``n`` (its names without the prefix stand for
    none)."""
    if not prefix:
        names = {n: n for n in checkpoint.entries}
    elif in_model:
        names = {prefix + n: n for n in checkpoint.entries}
    else:
        names = {n[len(prefix):]: n for n in checkpoint.entries if n.startswith(prefix)}
    sources, missing, meta_buffers, computed = {}, [], [], []
    for name, t in persistent.items():
        held = [a for a in aliases[id(t)] if a in names]
        if held:
            sources[name] = names[held[0]]
        elif name in params:
            missing.append(name)
        elif t.is_meta:
            meta_buffers.append(name)
        else:
            computed.append(name)
    claimed = {names[n] for n in persistent if n in names}
    unexpected = [n for n in checkpoint.entries if n not in claimed]
    return _Match(prefix, in_model, sources, missing, meta_buffers, computed, unexpected)


def _prefixes(persistent: dict[str, torch.Tensor], checkpoint: Checkpoint) -> list[tuple[str, bool]]:
    """The one-component prefixes (``'m.'``) that make at least one name fit: ``(prefix, True)``
    for a prefix of the module's names the checkpoint's lack, ``(prefix, False)`` for one of the
    checkpoint's names the module's lack; in the order first met."""
    found: dict[tuple[str, bool], None] = {}
    for names, others, in_model in ((persistent, checkpoint.entries, True), (checkpoint.entries, persistent, False)):
        for name in names:
            head, dot, rest = name.partition(".")
            if dot and rest in others:
                found[(head + ".", in_model)] = None
    return list(found)


def _named_tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(module.named_parameters(remove_duplicate=False)),
            **dict(module.named_buffers(remove_duplicate=False))}


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... ({len(names)} in all)" if len(names) > _SHOWN else "")
