"""A RETURNN config file read for export: ``extern_data``, ``model_outputs``, ``get_model``,
``forward_step``, read as RETURNN's ``tools/torch_export_to_onnx.py`` reads them (RETURNN's own
``Config.load_file``, inputs not ``available_for_inference`` left out), and the contract they state
as an onnxport ``ExportConfig`` (inputs, outputs, dims), which the export checks the model against.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from typing import Any, Callable, Iterator

from onnxport.config.schema import DTYPES, DimRange, ExportConfig, TensorDecl
from onnxport.errors import ReturnnError
from onnxport.integrations.returnn_forward import complete_dyn_sizes, raw_input_names, raw_output_names

BATCH_EXAMPLE = 3  # the batch size of the export's example
TIME_EXAMPLE = 50  # the size of every other dynamic dim in the example: long enough for downsampling


@dataclasses.dataclass
class ReturnnConfig:
    """What the export reads from a RETURNN config.

    ``config``: the ``returnn.config.Config``; ``extern_data`` (inference inputs only) and
    ``model_outputs``: RETURNN ``TensorDict`` templates; ``get_model(*, epoch, step, **kwargs)``
    and ``forward_step(*, model, extern_data)``: the config's functions.
    """

    path: str
    config: Any
    extern_data: Any
    model_outputs: Any
    get_model: Callable
    forward_step: Callable

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """RETURNN's global state as its own tools set it for this config: the config as the global
        config, the torch backend, the config's ``behavior_version``. Raises ``ReturnnError`` when
        another ``behavior_version`` was set earlier in this process (RETURNN sets it once)."""
        import returnn.frontend as rf
        from returnn.config import global_config_ctx
        from returnn.util.basic import BehaviorVersion

        version = self.config.int("behavior_version", None)
        try:
            BehaviorVersion.set(version)
        except Exception as e:  # noqa: BLE001 - RETURNN raises a plain Exception here
            raise ReturnnError(f"config {self.path}: behavior_version {version} cannot be set: {e}",
                               hint="export each RETURNN config with its own onnxport process") from e
        with global_config_ctx(self.config):
            rf.select_backend_torch()
            yield


def load_returnn_config(path: str | os.PathLike) -> ReturnnConfig:
    """Read a RETURNN config (Python) with RETURNN's ``Config.load_file``.

    Semantics: ``init``/``main`` of RETURNN's ``tools/torch_export_to_onnx.py``: ``model_outputs``,
    ``get_model``, ``forward_step`` and ``extern_data`` are required; entries of ``extern_data``
    with ``available_for_inference=False`` (targets) are dropped. A dynamic dim without a size
    template gets lengths over the batch (``data:size1``), as RETURNN's engine gives them.

    Raises ``ReturnnError`` naming what is missing or unreadable (and ``ReturnnError`` when
    RETURNN or dm-tree is not installed).
    """
    from onnxport.integrations.returnn_forward import require_returnn

    require_returnn()
    from returnn.config import Config
    from returnn.tensor import TensorDict

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ReturnnError(f"RETURNN config {path} does not exist",
                           hint="check the path of the RETURNN config (onnxport export-returnn CONFIG)")
    config = Config()
    try:
        config.load_file(path)
    except Exception as e:  # noqa: BLE001 - the user's config raised while loading
        raise ReturnnError(f"loading the RETURNN config {path} failed: {type(e).__name__}: {e}",
                           hint="run the config with python to see the full error") from e
    found = {}
    for key, what in (("extern_data", "the model inputs"), ("model_outputs", "the model outputs"),
                      ("get_model", "a function get_model(*, epoch, step, **kwargs)"),
                      ("forward_step", "a function forward_step(*, model, extern_data)")):
        found[key] = config.typed_value(key)
        if found[key] is None:
            raise ReturnnError(f"RETURNN config {path} defines no {key}",
                               hint=f"define {key} ({what}) in the config, as for RETURNN's forward task")
    dicts = {}
    for key in ("extern_data", "model_outputs"):
        tensors = TensorDict()
        try:
            tensors.update(found[key], auto_convert=True)
        except Exception as e:  # noqa: BLE001 - RETURNN's Tensor constructor raised
            raise ReturnnError(f"RETURNN config {path}: {key} cannot be read: {type(e).__name__}: {e}",
                               hint=f"declare each entry of {key} like {{'dims': (batch_dim, time_dim, in_dim), "
                                    "'dtype': 'float32'}") from e
        dicts[key] = tensors
    extern_data = dicts["extern_data"]
    for key, value in list(extern_data.data.items()):
        if not value.available_for_inference:
            del extern_data.data[key]
    if not extern_data.data:
        raise ReturnnError(f"RETURNN config {path}: no entry of extern_data is available for inference",
                           hint="the model's inputs need available_for_inference=True (the default of 'data')")
    complete_dyn_sizes(extern_data)
    complete_dyn_sizes(dicts["model_outputs"])
    for key in ("get_model", "forward_step"):
        if not callable(found[key]):
            raise ReturnnError(f"RETURNN config {path}: {key} is a {type(found[key]).__name__}, not a function")
    return ReturnnConfig(path, config, extern_data, dicts["model_outputs"], found["get_model"], found["forward_step"])


class _DimNames:
    """Dim names for ONNX: ``batch`` for the batch dim, a RETURNN dim's name as an identifier
    (``time`` for ``time:var-unk:data``), one name per dim (``same_as`` dims are one), an int for a
    static dim."""

    def __init__(self) -> None:
        self.by_dim: dict[int, str] = {}
        self.used: set[str] = set()

    def of(self, dim, owner: str, axis: int, fresh_prefix: str | None = None) -> int | str:
        if dim.dimension is not None:
            return int(dim.dimension)
        if dim.is_batch_dim():
            return "batch"
        key = id(dim.get_same_base())
        if key in self.by_dim:
            return self.by_dim[key]
        base = re.sub(r"\W", "_", (dim.name or "").split(":")[0]).strip("_")
        if not base or not base.isidentifier() or base == "batch":
            base = f"{owner}_dim{axis}"
        name = base
        if name in self.used and fresh_prefix:
            name = f"{fresh_prefix}_{base}"
        i = 2
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.by_dim[key] = name
        self.used.add(name)
        return name


def _decl(name: str, tensor, names: _DimNames, fresh_prefix: str | None, where: str) -> TensorDecl:
    dtype = DTYPES.get(str(tensor.dtype))
    if dtype is None:
        raise ReturnnError(f"{where}: {name} has dtype {tensor.dtype!r}, which onnxport does not take as an input",
                           hint=f"use one of {', '.join(sorted(DTYPES))}")
    dims = [names.of(d, name, axis, fresh_prefix) for axis, d in enumerate(tensor.dims)]
    decl = TensorDecl(name, dtype, dims)
    if tensor.sparse_dim is not None and tensor.sparse_dim.dimension:
        decl.low, decl.high = 0, int(tensor.sparse_dim.dimension)  # class indices in 0..dim-1
    return decl


def _with_lengths(tensors, raw_names: list[str], names: _DimNames, fresh_prefix: str | None,
                  where: str) -> dict[str, TensorDecl]:
    """The declarations of ``raw_names``: each tensor, and each ``<name>:size<axis>`` as the lengths
    of that axis (its ``dyn_size_ext``: ``int32[batch]``)."""
    out: dict[str, TensorDecl] = {}
    for raw in raw_names:
        key, sep, size = raw.partition(":size")
        tensor = tensors.data[key]
        if not sep:
            out[raw] = _decl(raw, tensor, names, fresh_prefix, where)
            continue
        dim = tensor.dims[int(size)]
        lengths = _decl(raw, dim.dyn_size_ext, names, fresh_prefix, where)
        lengths.lengths_of = (key, out[key].dims[int(size)])
        out[raw] = lengths
    return out


def export_config(rc: ReturnnConfig, *, sizes: list[dict[str, int]] | None = None, opset: int | None = None,
                  atol: float | None = None, rtol: float | None = None) -> ExportConfig:
    """The contract of ``rc`` as an ``ExportConfig``: the raw inputs (``data``, ``data:size1``) and
    outputs (``output``, ``output:size1``) with RETURNN's names, static dims as ints, dynamic dims
    by name (an output dim that is an input dim carries its name; an output's own dim a name of its
    own), lengths tied to their axis; example sizes ``batch`` = 3, other dynamic dims 50.

    ``sizes``: validation size sets (dim name -> size), default: generated around the example.
    Raises ``ReturnnError`` for a dtype onnxport does not take, or sizes naming unknown dims.
    """
    from onnxport.config.inputs import default_sizes

    names = _DimNames()
    inputs = _with_lengths(rc.extern_data, raw_input_names(rc.extern_data), names, None, f"extern_data of {rc.path}")
    outputs = _with_lengths(rc.model_outputs, raw_output_names(rc.model_outputs), names, "out",
                            f"model_outputs of {rc.path}")
    dims: dict[str, DimRange] = {}
    for decl in inputs.values():
        for d in decl.dims:
            if isinstance(d, str) and d not in dims:
                dims[d] = DimRange(d, 1, 4096, BATCH_EXAMPLE if d == "batch" else TIME_EXAMPLE)
    cfg = ExportConfig(inputs=inputs, outputs=outputs, dims=dims, source=rc.path, atol=atol, rtol=rtol)
    if opset is not None:
        cfg.opset = opset
    if sizes:
        for s in sizes:
            unknown = sorted(set(s) - set(dims))
            if unknown or any(v < 1 for v in s.values()):
                raise ReturnnError(f"validation sizes {s}: {unknown or 'sizes below 1'} are not sizes of the "
                                   f"input dims {sorted(dims)}",
                                   hint="name the dims as the ONNX inputs do, e.g. batch=2,time=40")
        cfg.sizes = [{**cfg.example_sizes(), **s} for s in sizes]
        cfg.sizes_given = True
    else:
        cfg.sizes = default_sizes(cfg)
    return cfg
