"""Find the first place where an exported ONNX model stops computing what PyTorch computes.

Every ONNX value that holds the result of an FX node carries ``metadata_props["fx_node"]``.
``find_divergence`` runs the exported program node by node in PyTorch (``torch.fx.Interpreter``)
and the ONNX model in onnxruntime with those values exposed as extra outputs, then walks the FX
graph in order and reports the first node whose values differ beyond tolerance.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import onnx
import torch
from torch.utils import _pytree as pytree

from onnxport.errors import ValidationError, user_source_line
from onnxport.metadata import FX_NODE_KEY
from onnxport.verify.compare import compare, to_numpy
from onnxport.verify.runner import OrtRunner


@dataclasses.dataclass
class Divergence:
    """The first FX node whose ONNX value differs from PyTorch's."""

    fx_node: str  # FX node name (``relu_1``)
    target: str  # ATen overload (``aten.relu.default``)
    onnx_value: str  # name of the ONNX value holding its result
    onnx_node: str  # "OpType name" of the ONNX node producing it
    where: str | None  # the user's source line
    max_abs: float
    note: str
    checked: int  # FX nodes compared before and including this one

    def __str__(self) -> str:
        where = f"\n  at {self.where}" if self.where else ""
        return (f"first divergence at FX node {self.fx_node} ({self.target}) -> ONNX {self.onnx_node} "
                f"output {self.onnx_value!r}: max abs error {self.max_abs:.3g} {self.note}".rstrip()
                + where + f"\n  ({self.checked - 1} earlier nodes matched)")


def _value_labels(proto: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    """fx node name -> (ONNX value name, producing node description) for the main graph."""
    producers = {}
    for node in proto.graph.node:
        for out in node.output:
            producers[out] = f"{node.op_type} {node.name}".strip()
    labels = {}
    for vi in list(proto.graph.value_info) + list(proto.graph.output):
        for prop in vi.metadata_props:
            if prop.key == FX_NODE_KEY and prop.value not in labels:
                labels[prop.value] = (vi.name, producers.get(vi.name, "?"))
    return labels


def find_divergence(model: torch.nn.Module | None, onnx_model: Any, inputs: Any, *,
                    atol: float | None = None, rtol: float | None = None) -> Divergence | None:
    """Return the first FX node / ONNX node pair whose values differ, or None when all match.

    Args:
        model: the eager module (used only when ``onnx_model`` is not an ExportResult).
        onnx_model: an ``onnxport.ExportResult`` (preferred: it carries the exported program whose
            node names the ONNX model records) or an ``onnx.ModelProto`` / path exported by onnxport.
        inputs: an args tuple, or ``(args, kwargs)``.
        atol, rtol: tolerances (dtype defaults of ``onnxport.verify``).

    Raises ``ValidationError`` when the ONNX model carries no FX node labels (not exported by onnxport).
    """
    if isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[1], dict):
        args, kwargs = inputs
    else:
        args, kwargs = (tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)), {}
    if hasattr(onnx_model, "model_proto") and getattr(onnx_model, "program", None) is not None:
        program, proto = onnx_model.program, onnx_model.model_proto
    else:
        proto = onnx.load(onnx_model) if isinstance(onnx_model, str) else onnx_model
        program = torch.export.export(model, args, kwargs)
    labels = _value_labels(proto)
    if not labels:
        raise ValidationError("the ONNX model records no FX node labels",
                              hint="export it with onnxport.to_onnx to compare it node by node")
    values = _run_fx(program, args, kwargs)
    exposed = onnx.ModelProto()
    exposed.CopyFrom(proto)
    have = {o.name for o in exposed.graph.output}
    wanted = [(fx, name) for fx, (name, _) in labels.items() if fx in values]
    vi_by_name = {vi.name: vi for vi in exposed.graph.value_info}
    for _, name in wanted:
        if name not in have and name in vi_by_name:
            exposed.graph.output.append(vi_by_name[name])
            have.add(name)
    runner = OrtRunner(exposed)
    flat = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    outputs = dict(zip(runner.output_names, runner.run(flat)))
    checked = 0
    nodes = {n.name: n for n in program.graph.nodes}
    for node in program.graph.nodes:
        if node.name not in labels or node.name not in values:
            continue
        name, producer = labels[node.name]
        if name not in outputs:
            continue
        expected = values[node.name]
        if not isinstance(expected, torch.Tensor):
            continue
        checked += 1
        ma, _, ok, note = compare(to_numpy(expected), np.asarray(outputs[name]), expected.dtype, atol, rtol)
        if not ok:
            return Divergence(node.name, str(node.target), name, producer, user_source_line(nodes[node.name]),
                              ma, note, checked)
    return None


def _run_fx(program: torch.export.ExportedProgram, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Values of every node of the exported program's graph on the given inputs."""
    module = program.module()
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n.name] = out
            return out

    flat = pytree.tree_leaves((args, kwargs))
    with torch.no_grad():
        Recorder(module).run(*flat)
    return values


def validate_file(path: str, reference: Any, *, atol: float | None = None, rtol: float | None = None,
                  divergence: bool = False, runtime: str | None = None) -> tuple[Any, Divergence | None]:
    """Validate the ONNX model in the file ``path`` against ``reference``, an ``ExportResult`` of
    the same PyTorch model (its program, module and example inputs), and on a mismatch find the
    first divergence when ``divergence``. ``runtime`` runs the file (``verify.runtimes``); default:
    the runtime of the target the file records (``onnxport.target``: OpenVINO for an ``openvino``
    model, onnxruntime otherwise).

    Returns ``(ValidationReport, Divergence or None)``. Raises ``ValidationError`` when the file
    cannot be read.
    """
    import onnx_ir as ir

    try:
        loaded = ir.load(path)
    except Exception as e:  # noqa: BLE001
        raise ValidationError(f"cannot read {path}: {type(e).__name__}: {e}",
                              hint="give the path of an .onnx file") from e
    candidate = reference.replace(model=loaded)
    report = candidate.validate(atol=atol, rtol=rtol, runtime=runtime)
    found = None
    if not report.ok and divergence:
        found = find_divergence(reference.module, candidate, reference.example, atol=atol, rtol=rtol)
    return report, found
