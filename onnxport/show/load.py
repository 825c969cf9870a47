"""Turn anything a user may want to look at into an ``onnx_ir.Model`` or ``onnx_ir.Function``.

Accepted inputs: ``onnx.ModelProto``, ``onnx_ir.Model``, ``onnxport.ExportResult``,
``onnx.FunctionProto``, ``onnx_ir.Function``, ``onnx.GraphProto``, ``onnx_ir.Graph``, serialized
model bytes, or a path (``str`` / ``os.PathLike``) to an ``.onnx`` file.

The result is always a fresh copy: rendering never changes the caller's model. With
``infer_shapes=True`` the copy carries the dtypes and shapes found by ONNX shape inference
(``onnx.shape_inference.infer_shapes``) on intermediate values of the graph and its subgraphs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Union

import onnx
import onnx_ir as ir

from onnxport.errors import ShowInputError


@dataclass
class Loaded:
    """What a renderer draws.

    Attributes:
        root: the ``onnx_ir.Model``, or the ``onnx_ir.Function`` when a lone function was given.
        notes: remarks to show the reader (for example why shape inference was skipped).
    """

    root: Union[ir.Model, ir.Function]
    notes: list[str] = field(default_factory=list)

    @property
    def model(self) -> ir.Model | None:
        return self.root if isinstance(self.root, ir.Model) else None

    @property
    def functions(self) -> list[ir.Function]:
        """Local functions of the model, or the lone function."""
        if isinstance(self.root, ir.Function):
            return [self.root]
        return list(self.root.functions.values())


def load(obj: Any, *, infer_shapes: bool = False) -> Loaded:
    """Normalize ``obj`` to an ``onnx_ir.Model`` (or ``onnx_ir.Function``), as a copy.

    Args:
        obj: any input listed in the module docstring.
        infer_shapes: run ONNX shape inference on the copy. A failure of inference is not an
            error: the model is shown without inferred shapes and ``Loaded.notes`` says why.

    Raises:
        ShowInputError: ``obj`` is of no accepted type, or the path does not exist or is not an
            ONNX file.
    """
    notes: list[str] = []
    if isinstance(obj, (onnx.FunctionProto, ir.Function)):
        proto = obj if isinstance(obj, onnx.FunctionProto) else ir.serde.serialize_function(obj)
        function = ir.serde.deserialize_function(proto)
        _sort(function, notes)
        return Loaded(function, notes)
    proto = _model_proto(obj)
    if infer_shapes:
        proto = _inferred(proto, notes)
    model = ir.serde.deserialize_model(proto)
    for graph in [model.graph, *model.functions.values()]:
        _sort(graph, notes)
    return Loaded(model, notes)


def _sort(graph: ir.Graph | ir.Function, notes: list[str]) -> None:
    """Topological order (stable: a sorted graph keeps its order), subgraphs included."""
    try:
        graph.sort()
    except ValueError as e:  # a cycle: show the nodes as stored
        notes.append(f"{graph.name or 'the graph'} is not acyclic ({e}); its nodes are shown in stored order")


def _model_proto(obj: Any) -> onnx.ModelProto:
    if isinstance(obj, onnx.ModelProto):
        return obj
    if isinstance(obj, ir.Model):
        return ir.serde.serialize_model(obj)
    if hasattr(obj, "model_proto") and isinstance(getattr(obj, "model", None), ir.Model):  # ExportResult
        return obj.model_proto
    if isinstance(obj, (onnx.GraphProto, ir.Graph)):  # a lone graph: opsets of the graph, else opset 20
        opsets = dict(obj.opset_imports) if isinstance(obj, ir.Graph) else {}
        graph = obj if isinstance(obj, onnx.GraphProto) else ir.serde.serialize_graph(obj)
        return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid(d, v)
                                                            for d, v in (opsets or {"": 20}).items()])
    if isinstance(obj, (bytes, bytearray)):
        try:
            proto = onnx.load_from_string(bytes(obj))
        except Exception as e:  # noqa: BLE001 - any decoding failure means "not a model"
            raise ShowInputError("the bytes given are not a serialized ONNX model",
                                 hint="pass a path, an onnx.ModelProto or an onnxport.ExportResult",
                                 detail=str(e)) from e
        return _checked(proto, "the bytes given")
    if isinstance(obj, (str, os.PathLike)):
        return _load_path(os.fspath(obj))
    raise ShowInputError(
        f"cannot show an object of type {type(obj).__name__}",
        hint="pass an onnx.ModelProto, onnx_ir.Model, onnxport.ExportResult, onnx.FunctionProto, "
             "onnx_ir.Function or the path of an .onnx file")


def _load_path(path: str) -> onnx.ModelProto:
    if not os.path.isfile(path):
        raise ShowInputError(f"no such file: {path}", hint="give the path of an existing .onnx file")
    if os.path.getsize(path) == 0:
        raise ShowInputError(f"{path} is empty (0 bytes), not an ONNX model",
                             hint="save the model again: a save that was interrupted or failed leaves such a file")
    try:
        proto = onnx.load(path)
    except Exception as e:  # noqa: BLE001 - protobuf decode errors have many types
        raise ShowInputError(f"{path} is not a readable ONNX model: {type(e).__name__}",
                             hint="check the file is an ONNX model (and its .data file is beside it)",
                             detail=str(e)) from e
    return _checked(proto, path)


def _checked(proto: onnx.ModelProto, source: str) -> onnx.ModelProto:
    """``proto`` when it is a model (an IR version and a graph); protobuf reads many byte strings
    as an empty or partial message without complaint."""
    if proto.ir_version <= 0 or not proto.HasField("graph"):
        raise ShowInputError(f"{source} is not an ONNX model: it holds no IR version or no graph",
                             hint="give an .onnx file written by an ONNX exporter")
    return proto


def _inferred(proto: onnx.ModelProto, notes: list[str]) -> onnx.ModelProto:
    """``onnx.shape_inference.infer_shapes`` on a copy, strict first so that an inconsistency is
    reported in ``notes``, then lenient so that the other values still get shapes; on failure of
    both the proto itself."""
    if proto.ByteSize() >= 2**31 - 1:
        notes.append("shape inference skipped: the model is larger than 2 GB")
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    try:
        return onnx.shape_inference.infer_shapes(copy, check_type=True, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001 - inference raises several error types
        notes.append(f"shape inference failed: {_first_line(e)}")
    try:
        return onnx.shape_inference.infer_shapes(copy, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001
        notes.append("shapes are the stored ones")
        return proto


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
