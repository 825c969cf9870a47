"""Writing a model to disk: both files of a model change together or not at all.

``save_model(model, path, external_data)`` writes into a temporary folder next to ``path``
(``.onnxport-<pid>-XXXX``), then moves the result into place:

* inline: the ``.onnx`` file replaces the old one in one ``os.replace``;
* with external data: the weights go to ``<name>.onnx.<token>.data``, a name new to each save.
  That file is moved into place first (no existing model reads it), then the new ``.onnx`` that
  references it replaces the old one (the switch), then the data files named after ``<name>.onnx``
  that the new model does not read are removed (the old model's, and those of saves killed before
  their switch). At every moment the ``.onnx`` at ``path`` reads the weights it was saved with.

A save that fails removes what it wrote; the old model stays. A save killed mid-way leaves its
temporary folder, and possibly a data file no ``.onnx`` references: the next save into the same
folder removes the temporary folders of processes that are gone (``remove_stale_temporaries``)
and the unreferenced data files of ``path``, except one a save still running has claimed.

Every file written here (``save_model``, and ``write_file`` for the other files of an export: JSON,
copied tokenizer files) gets the mode a plain ``open()`` would give a new file: 0o666 less the
process's umask (POSIX ``open(2)``), or what a default ACL of the folder says; a file replaced takes
the new file's mode. Each is created as ``open()`` creates files, so the kernel applies the umask:
``save_model``'s by ``onnx_ir``'s own ``open()`` in its temporary folder, ``write_file``'s
temporary file with ``os.open(..., O_CREAT | O_EXCL, 0o666)``, never ``tempfile.mkstemp`` (mode
0o600, which the rename would keep). The umask is therefore never read: ``os.umask`` reads it only
by setting it, process-wide, a race with any other thread creating a file meanwhile.

A model loaded from ``path`` with its weights left in the old data file (``onnx_ir.load``) no
longer finds them once a new save at ``path`` has removed that file: load it fully first.

The choice of external data (``needs_external_data``) compares the size the serialized model would
have (weights, graph, functions, names) with protobuf's 2 GiB limit, not the weights alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import tempfile
import threading
import time
from typing import Any, BinaryIO, Callable

import onnx
import onnx_ir as ir

from onnxport.errors import SaveError

PROTOBUF_LIMIT = 2**31 - 1  # bytes: protobuf cannot serialize a message larger than this
TEMP_PREFIX = ".onnxport-"
OWNER_FILE = "owner"
FOREIGN_TEMP_AGE = 24 * 3600  # seconds after which a temporary folder of another host counts as stale
_PER_INITIALIZER = 64  # bytes of tensor header and value info per initializer, beyond name and dims
_EXTERNAL_SAVE = threading.Lock()


# ------------------------------------------------------------------------------ size
def serialized_size(model: ir.Model) -> int:
    """An upper bound, in bytes, of the size of ``model`` serialized inline as one ``ModelProto``.

    The graph's nodes (with their attributes, constants and subgraphs), inputs, outputs and the
    local functions are serialized; each initializer counts its data bytes (``nbytes``, read
    from its dtype and shape without materializing the tensor), its name twice and its dims.
    """
    g = model.graph
    view = ir.GraphView(g.inputs, g.outputs, nodes=list(g), name=g.name, doc_string=g.doc_string)
    size = ir.serde.serialize_graph(view).ByteSize() + 1024  # model header, opsets, metadata
    size += sum(ir.serde.serialize_function(f).ByteSize() + 16 for f in model.functions.values())
    size += sum(len(k) + len(v) + 16 for k, v in model.metadata_props.items())
    for value in g.initializers.values():
        tensor = value.const_value
        if tensor is None:
            continue
        dims = len(tensor.shape) if tensor.shape is not None else 0
        size += tensor.nbytes + 2 * len(value.name or "") + 11 * dims + _PER_INITIALIZER
    return size


def needs_external_data(model: ir.Model, limit: int = PROTOBUF_LIMIT) -> bool:
    """True when ``model`` serialized inline would exceed ``limit`` bytes (protobuf's 2 GiB)."""
    return serialized_size(model) > limit


# ------------------------------------------------------------------------------ saving
def save_model(model: ir.Model, path: str | os.PathLike, external_data: bool) -> str:
    """Write ``model`` to ``path`` (with its weights in ``<name>.onnx.<token>.data`` beside it when
    ``external_data``), so that the file at ``path`` is always a complete model: the old one until
    the switch, the new one after. Returns ``path``.

    Raises ``SaveError`` when the directory does not exist, ``path`` is a directory, or writing
    fails; the old model (if any) is then left as it was and nothing new remains.
    """
    path = os.path.abspath(os.fspath(path))
    directory, base = os.path.split(path)
    if not os.path.isdir(directory):
        raise SaveError(f"cannot save the model to {path}: the directory {directory} does not exist",
                        hint="create the directory first (os.makedirs)")
    if os.path.isdir(path):
        raise SaveError(f"cannot save the model to {path}: it is a directory", hint="give the path of an .onnx file")
    remove_stale_temporaries(directory)
    placed = None  # the data file this save moved into place, removed again if the switch fails
    try:
        tmp = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=directory)
    except OSError as e:
        raise SaveError(f"cannot save the model to {path}: {type(e).__name__}: {e}",
                        hint="check that the directory is writable") from e
    try:
        _write_owner(tmp, [])
        tmp_model = os.path.join(tmp, base)
        data_name = None
        if external_data:
            staging = os.path.join(tmp, base + ".data")
            with _EXTERNAL_SAVE:  # ir.save swaps the initializers for a moment: one such save at a time
                ir.save(model, tmp_model, external_data=base + ".data")
            data_name = f"{base}.{secrets.token_hex(8)}.data"  # a name no existing model reads
            if not _relocate(tmp_model, base + ".data", data_name):  # every tensor small enough to stay inline
                data_name = None
            else:
                _write_owner(tmp, [data_name])  # claimed before it appears, so no other save removes it
                _fsync(staging)
                os.replace(staging, os.path.join(directory, data_name))
                placed = os.path.join(directory, data_name)
        else:
            ir.save(model, tmp_model)
        _fsync(tmp_model)
        os.replace(tmp_model, path)  # the switch: from here on, path is the new model
        placed = None
        _fsync_dir(directory)
        stale = set(_data_candidates(directory, base)) - {data_name} - _claimed(directory, tmp)
        for name in stale:  # the data of the model just replaced, and of saves killed before their switch
            with contextlib.suppress(OSError):
                os.remove(os.path.join(directory, name))
    except BaseException as e:  # noqa: BLE001 - any failure or interruption: the old model stays, nothing new remains
        if placed is not None:
            with contextlib.suppress(OSError):
                os.remove(placed)
        if not isinstance(e, Exception):
            raise
        raise SaveError(f"could not save the model to {path}: {type(e).__name__}: {e}",
                        hint="check the disk has space and the directory is writable; the previous file "
                             "(if any) is unchanged") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def write_file(path: str | os.PathLike, fill: Callable[[BinaryIO], Any]) -> str:
    """Write the file at ``path`` whole or not at all: ``fill(f)`` writes into a new temporary file
    beside it (``.onnxport-<token>.tmp``), which is flushed to disk and then moved over ``path`` in
    one ``os.replace``. The file has the mode a plain ``open(path, "wb")`` gives a new file (0o666
    less the umask; see the module docstring). Returns the absolute path.

    Raises ``SaveError`` when the file cannot be created or written (its directory missing or not
    writable, the disk full); the temporary file is then removed and a file already at ``path`` is
    left as it was. An error ``fill`` raises that is no ``OSError`` is raised as it is, after the
    same cleanup.
    """
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    tmp = None
    try:
        tmp, fd = _create_temporary(directory)
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise SaveError(f"cannot write {path}: {type(e).__name__}: {e}",
                        hint="check that the directory exists and is writable and that the disk has space") from e
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp)
    return path


def _create_temporary(directory: str) -> tuple[str, int]:
    """A new file in ``directory`` with a name no other file has, opened for writing: ``(path,
    descriptor)``. Created with mode 0o666 as ``open()`` creates files, so that the umask applies
    (``tempfile.mkstemp`` would create it 0o600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f"{TEMP_PREFIX}{secrets.token_hex(8)}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name in {directory}")


def referenced_data(path: str) -> list[str]:
    """The external data files (names relative to the model's folder) the ONNX file at ``path``
    reads; ``[]`` when there is no file, it stores its weights inline, or it cannot be read.
    (It parses the file: meant for checks, not for models of several GB stored inline.)"""
    if not os.path.isfile(path):
        return []
    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001 - not a readable model: it references nothing we know of
        return []
    names = set()
    for tensor in _tensors(proto):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location":
                    names.add(entry.value)
    return sorted(n for n in names if os.path.basename(n) == n)


def remove_stale_temporaries(directory: str) -> list[str]:
    """Remove the temporary folders earlier saves left in ``directory`` when killed: those of
    processes no longer running on this host (and those of other hosts older than a day).
    Returns the names removed."""
    removed = []
    for name in _listdir(directory):
        if not name.startswith(TEMP_PREFIX):
            continue
        folder = os.path.join(directory, name)
        if os.path.isdir(folder) and not _alive(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(name)
    return removed


# ------------------------------------------------------------------------------ helpers
_TOKEN = re.compile(r"^[0-9a-f]{16}$")


def _data_candidates(directory: str, base: str) -> list[str]:
    """Files of ``directory`` named as the data of ``base``: ``base.data`` or ``base.<token>.data``."""
    out = []
    for name in _listdir(directory):
        if name == base + ".data":
            out.append(name)
        elif name.startswith(base + ".") and name.endswith(".data") and \
                _TOKEN.match(name[len(base) + 1:-len(".data")]):
            out.append(name)
    return out


def _claimed(directory: str, own: str) -> set[str]:
    """Data file names that saves still running (other than ``own``) are about to reference."""
    names: set[str] = set()
    for name in _listdir(directory):
        folder = os.path.join(directory, name)
        if name.startswith(TEMP_PREFIX) and folder != own and os.path.isdir(folder) and _alive(folder):
            names.update(_read_owner(folder)[2])
    return names


def _write_owner(folder: str, data_names: list[str]) -> None:
    with open(os.path.join(folder, OWNER_FILE), "w") as f:
        f.write("\n".join([socket.gethostname(), str(os.getpid()), *data_names]) + "\n")


def _read_owner(folder: str) -> tuple[str | None, int | None, list[str]]:
    try:
        with open(os.path.join(folder, OWNER_FILE)) as f:
            lines = f.read().splitlines()
        return lines[0], int(lines[1]), lines[2:]
    except (OSError, ValueError, IndexError):
        return None, None, []


def _alive(folder: str) -> bool:
    """Whether the save that made ``folder`` may still be running."""
    host, pid, _ = _read_owner(folder)
    if pid is None:  # no owner file yet (just made) or an older layout: the pid in the name
        m = re.match(re.escape(TEMP_PREFIX) + r"(\d+)-", os.path.basename(folder))
        host, pid = (socket.gethostname(), int(m.group(1))) if m else (None, None)
    if host != socket.gethostname() or pid is None:
        try:
            return time.time() - os.path.getmtime(folder) < FOREIGN_TEMP_AGE
        except OSError:
            return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user has that pid
        return True
    except OSError:
        return True
    return True


def _relocate(model_path: str, old: str, new: str) -> int:
    """Point every external tensor of the ONNX file at ``model_path`` from ``old`` to ``new``;
    returns how many there are."""
    proto = onnx.load(model_path, load_external_data=False)
    moved = 0
    for tensor in _tensors(proto):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value == old:
                entry.value = new
                moved += 1
    if moved:
        with open(model_path, "wb") as f:
            f.write(proto.SerializeToString())
    return moved


def _tensors(proto: onnx.ModelProto):
    from onnx.external_data_helper import _get_all_tensors

    return _get_all_tensors(proto)


def _fsync(path: str) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(directory: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _listdir(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
