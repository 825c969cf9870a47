"""Checkpoints read lazily: names, shapes and dtypes from the files' headers, each tensor's data
read only when asked for, one at a time.

Formats (``open_checkpoint``):

* a safetensors file (https://huggingface.co/docs/safetensors): its names, shapes and dtypes
  through ``safetensors.safe_open``; a tensor is read with sequential reads of its bytes, at the
  offset the header gives, into memory of its own: the kernel reads ahead (a weight transposed
  from a memory map would be read from the disk in column order, page by page, several times
  slower), and no page of the file counts in the process's resident memory;
* a sharded safetensors checkpoint: its index (``model.safetensors.index.json``, as
  ``transformers``' ``save_pretrained`` writes it: ``{"weight_map": {name: shard file}}``) or a
  folder holding one; the shards are read where the index says;
* a ``torch.save`` file: ``torch.load(weights_only=True, mmap=True)``: the tensors stay in the
  memory-mapped file until read (its pages, once read, count in the process's resident memory as
  file pages the kernel may reclaim; safetensors files do not stay mapped);
* a folder: its index, else its ``*.safetensors`` files, else ``pytorch_model.bin``;
* a list of any of these files, their names joined (a name in two files is an error).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import pickle
import re
import threading
from typing import Any, Iterable

import torch

from onnxport.errors import CheckpointError

INDEX_SUFFIX = ".safetensors.index.json"
STATE_KEYS = ("model", "state_dict", "model_state_dict", "module")
SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One tensor of a checkpoint: its name, shape, dtype, and the file holding it."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    file: str
    offset: int | None = None  # of the data in a safetensors file, in bytes from the file's start

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        return n


class Checkpoint:
    """A checkpoint opened without reading its tensors (``open_checkpoint`` makes one).

    Attributes:
        source: what was opened (a path, or the paths joined by ``, ``), for messages.
        entries: name -> ``Entry`` (shape, dtype, file), in the files' order.
        reads: how many tensors ``read`` has returned so far (one read per tensor and save is
            what streaming a model costs).
        extras: what a ``torch.save`` file holds beside its state dict when it holds a dict of
            several things (``{"model": state_dict, "epoch": 3, "step": 120}``, as RETURNN and
            training loops save): its entries of Python numbers, strings and booleans
            (``{"epoch": 3, "step": 120}``); empty otherwise.
    """

    def __init__(self, source: str, entries: dict[str, Entry], torch_states: dict[str, dict] | None = None,
                 extras: dict[str, Any] | None = None):
        self.source = source
        self.entries = entries
        self.extras = dict(extras or {})
        self._states = torch_states or {}  # torch.save file -> its memory-mapped state dict
        self._lock = threading.Lock()
        self.reads = 0

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def nbytes(self) -> int:
        """Bytes of all the tensors' data."""
        return sum(e.nbytes for e in self.entries.values())

    def read(self, name: str) -> torch.Tensor:
        """The tensor ``name`` as a new CPU tensor of the checkpoint's shape and dtype, owning its
        memory (nothing else of the checkpoint is read or kept).

        Raises ``CheckpointError`` when the name is not in the checkpoint or its file cannot be read.
        """
        entry = self.entries.get(name)
        if entry is None:
            raise CheckpointError(f"checkpoint {self.source} has no tensor {name!r}")
        try:
            if entry.file in self._states:
                tensor = self._states[entry.file][name].detach().clone()  # out of the mapping
            else:
                tensor = _read_at(entry)
        except (OSError, RuntimeError, ValueError) as e:
            raise CheckpointError(f"cannot read tensor {name!r} from {entry.file}: {type(e).__name__}: {e}",
                                  hint="check the file is complete (copy or save it again)") from e
        if tuple(tensor.shape) != entry.shape or tensor.dtype != entry.dtype:
            raise CheckpointError(f"tensor {name!r} of {entry.file} reads as {tensor.dtype} {tuple(tensor.shape)}, "
                                  f"its header says {entry.dtype} {entry.shape}", hint="the file changed or is damaged")
        with self._lock:
            self.reads += 1
        return tensor

    def __repr__(self) -> str:
        return f"Checkpoint({self.source!r}, tensors={len(self)}, bytes={self.nbytes})"


def open_checkpoint(source: str | os.PathLike | Iterable[str | os.PathLike]) -> Checkpoint:
    """Open the checkpoint at ``source`` (a file, a folder, an index, or a list of files; see the
    module docstring) reading only its headers.

    Raises:
        CheckpointError: a path does not exist, a file is neither safetensors nor a weights-only
            torch file, an index names a shard that is missing, or two files hold the same name.
    """
    if isinstance(source, (str, os.PathLike)):
        paths = _expand(os.fspath(source))
        label = os.fspath(source)
    else:
        paths = [p for s in source for p in _expand(os.fspath(s))]
        label = ", ".join(os.fspath(s) for s in source)
    entries: dict[str, Entry] = {}
    states: dict[str, dict] = {}
    extras: dict[str, Any] = {}
    for path, names in paths:
        if path.endswith(".safetensors"):
            found = _safetensors_entries(path, names)
        else:
            states[path], beside = _torch_state(path)
            found = {k: Entry(k, tuple(v.shape), v.dtype, path) for k, v in states[path].items()}
            extras = {**beside, **extras}  # the first file's win
        for name, entry in found.items():
            if name in entries:
                raise CheckpointError(f"tensor {name!r} is in two files of checkpoint {label}: "
                                      f"{entries[name].file} and {entry.file}",
                                      hint="give each shard once (or the index, which says which shard holds it)")
            entries[name] = entry
    return Checkpoint(label, entries, states, extras)


# ------------------------------------------------------------------------------ files
def _expand(path: str) -> list[tuple[str, set[str] | None]]:
    """``[(file, names it holds per an index, or None for all)]`` of one given path."""
    if os.path.isdir(path):
        index = sorted(glob.glob(os.path.join(path, "*" + INDEX_SUFFIX)))
        if index:
            return _index(index[0])
        shards = sorted(glob.glob(os.path.join(path, "*.safetensors")))
        if shards:
            return [(s, None) for s in shards]
        for name in ("pytorch_model.bin", "model.pt", "model.pth"):
            if os.path.isfile(os.path.join(path, name)):
                return [(os.path.join(path, name), None)]
        raise CheckpointError(f"folder {path} holds no checkpoint (no *{INDEX_SUFFIX}, *.safetensors or "
                              "pytorch_model.bin)", hint="give the checkpoint's file or its index")
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {path} does not exist", hint="check the path of the weights")
    if path.endswith(".json"):
        return _index(path)
    return [(path, None)]


def _index(path: str) -> list[tuple[str, set[str] | None]]:
    """The shards of a sharded safetensors checkpoint, each with the names the index puts in it."""
    try:
        with open(path) as f:
            weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"index {path} cannot be read as a sharded checkpoint's index: {type(e).__name__}: {e}",
                              hint='the index is JSON with a "weight_map": {tensor name: shard file}') from e
    folder = os.path.dirname(os.path.abspath(path))
    shards: dict[str, set[str]] = {}
    for name, shard in weight_map.items():
        shards.setdefault(os.path.join(folder, shard), set()).add(name)
    missing = sorted(s for s in shards if not os.path.isfile(s))
    if missing:
        raise CheckpointError(f"index {path} names shard(s) that do not exist: {', '.join(missing)}",
                              hint="copy every shard beside the index")
    return sorted(shards.items())


def _safetensors_entries(path: str, names: set[str] | None) -> dict[str, Entry]:
    from safetensors import safe_open

    try:
        with safe_open(path, framework="pt") as f:  # checks the header and the data's extent
            keys = list(f.keys())
            offsets = _data_offsets(path)
            out = {}
            for key in keys:
                if names is not None and key not in names:
                    continue
                piece = f.get_slice(key)
                dtype = SAFETENSORS_DTYPES.get(piece.get_dtype())
                if dtype is None:
                    raise CheckpointError(f"tensor {key!r} of {path} has dtype {piece.get_dtype()}, which onnxport "
                                          f"does not read", hint=f"save it as one of {', '.join(SAFETENSORS_DTYPES)}")
                out[key] = Entry(key, tuple(int(d) for d in piece.get_shape()), dtype, path, offsets[key])
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - safetensors raises its own SafetensorError
        raise CheckpointError(f"{path} cannot be read as a safetensors file: {type(e).__name__}: {e}",
                              hint="check the file is complete (copy or save it again)") from e
    if names is not None and names - set(out):
        lost = sorted(names - set(out))
        raise CheckpointError(f"shard {path} lacks tensor(s) its index puts there: {', '.join(lost[:8])}",
                              hint="the index and the shards come from different saves: copy them again together")
    return out


def _data_offsets(path: str) -> dict[str, int]:
    """Where each tensor's data starts in the safetensors file at ``path``, in bytes from the start
    of the file: the format's header is an 8-byte little-endian length, then that many bytes of
    JSON giving each tensor's ``data_offsets`` from the end of the header."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return {k: 8 + n + int(v["data_offsets"][0]) for k, v in header.items() if k != "__metadata__"}


_CHUNK = 64 * 2**20  # bytes per read() call


def _read_at(entry: Entry) -> torch.Tensor:
    """The tensor of ``entry`` read from its safetensors file (little-endian, as the format stores
    it) with sequential reads into a new tensor."""
    tensor = torch.empty(entry.shape, dtype=entry.dtype)
    if entry.nbytes == 0:
        return tensor
    view = memoryview(tensor.reshape(-1).view(torch.uint8).numpy())
    with open(entry.file, "rb", buffering=0) as f:
        f.seek(entry.offset)
        done = 0
        while done < entry.nbytes:
            got = f.readinto(view[done:done + _CHUNK])
            if not got:
                raise OSError(f"{entry.file} ends {entry.nbytes - done} bytes before the end of tensor {entry.name!r}")
            done += got
    return tensor


def _torch_state(path: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The state dict of a ``torch.save`` file, memory-mapped (``weights_only=True, mmap=True``),
    and the plain values saved beside it (``Checkpoint.extras``)."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as e:
        raise unreadable(path, e) from e
    state = state_dict_in(obj, path)
    beside = {}
    if isinstance(obj, dict) and not _is_state_dict(obj):
        beside = {k: v for k, v in obj.items() if isinstance(k, str) and isinstance(v, (bool, int, float, str))}
    return state, beside


# ------------------------------------------------------------------------------ torch.save contents
def _is_state_dict(obj: Any) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(isinstance(v, torch.Tensor) for v in obj.values())


def state_dict_in(obj: Any, path: str) -> dict[str, torch.Tensor]:
    """The state dict in a loaded checkpoint ``obj``: ``obj`` itself when it maps names to
    tensors, else its ``model`` (or ``state_dict``, ``model_state_dict``, ``module``) entry;
    ``CheckpointError`` when there is none."""
    if _is_state_dict(obj):
        return dict(obj)
    if isinstance(obj, dict):
        for key in STATE_KEYS:
            if _is_state_dict(obj.get(key)):
                return dict(obj[key])
        keys = ", ".join(repr(k) for k in list(obj)[:8])
        raise CheckpointError(f"checkpoint {path} holds a dict ({keys}) with no state dict under "
                              f"{' / '.join(STATE_KEYS)}", hint="save the model's state_dict() under the key 'model'")
    raise CheckpointError(f"checkpoint {path} holds a {type(obj).__name__}, not a state dict",
                          hint="save it with torch.save(model.state_dict(), path)")


_REFUSED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def unreadable(path: str, e: Exception) -> CheckpointError:
    """The error for a checkpoint ``torch.load(weights_only=True)`` refused or could not read: a
    short first line naming the cause (the refused class, a damaged file), torch's text as detail."""
    text = str(e)
    refused = _REFUSED_GLOBAL.search(text)
    if refused:
        name = refused.group(1)
        return CheckpointError(
            f"checkpoint {path} holds a pickled {name} object, which weights-only loading refuses",
            hint="save only tensors: torch.save(model.state_dict(), path); if you trust the file, load it with "
                 "torch.load(path, weights_only=False) and save its state_dict()", detail=text)
    if "central directory" in text or "zip archive" in text or isinstance(e, EOFError):
        return CheckpointError(f"checkpoint {path} is damaged or truncated (not a complete torch.save file)",
                               hint="save or copy it again", detail=text)
    return CheckpointError(f"checkpoint {path} cannot be read with torch.load(weights_only=True)",
                           hint="save it with torch.save(model.state_dict(), path)",
                           detail=f"{type(e).__name__}: {text}")
