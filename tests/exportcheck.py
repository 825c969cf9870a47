"""The one export-and-compare helper every test uses."""

from __future__ import annotations

from typing import Any

import onnx
import pytest
import torch

import onnxport


def check_export(
    model: torch.nn.Module,
    args: Any,
    dynamic_shapes: Any = None,
    *,
    kwargs: dict | None = None,
    sizes: list[dict] | None = None,
    inputs: list | None = None,
    values: list[str] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    expect_inputs: dict[str, list] | None = None,
    expect_outputs: dict[str, list] | None = None,
    min_sets: int | None = None,
    **export_kwargs: Any,
) -> onnxport.ExportResult:
    """Export ``model``, check the ONNX model (full check), run onnxruntime against eager PyTorch
    on the example, on other sizes of every dynamic dimension and on other values (``values``: the
    value kinds, default all that apply), and check dim names.

    ``expect_inputs`` / ``expect_outputs`` map ONNX value names to expected dims (ints and
    dim_param strings). With dynamic dimensions, at least three input sets must have run.
    """
    model = model.eval() if isinstance(model, torch.nn.Module) else model
    if isinstance(args, torch.Tensor):
        args = (args,)
    result = onnxport.to_onnx(model, tuple(args), kwargs, dynamic_shapes=dynamic_shapes, **export_kwargs)
    onnx.checker.check_model(result.model_proto, full_check=True)
    report = result.validate(sizes=sizes, inputs=inputs, values=values, atol=atol, rtol=rtol)
    assert report.ok, f"\n{report}\n{result}"
    labels = {c.inputs for c in report.checks}
    has_dynamic = any(not isinstance(d, int) for v in result.model.graph.inputs for d in (v.shape or []))
    needed = min_sets if min_sets is not None else (3 if has_dynamic else 1)
    assert len(labels) >= needed, f"only {sorted(labels)} were compared"
    for expect, values in ((expect_inputs, result.model.graph.inputs), (expect_outputs, result.model.graph.outputs)):
        if expect:
            got = {v.name: [d if isinstance(d, int) else str(d) for d in v.shape] for v in values}
            for name, dims in expect.items():
                assert name in got, f"no ONNX value {name!r}; have {sorted(got)}"
                assert got[name] == list(dims), f"{name}: dims {got[name]} != expected {list(dims)}"
    return result


def assert_right_at_widths(result: onnxport.ExportResult, model: torch.nn.Module, widths, rows: int = 2) -> list:
    """onnxruntime matches eager PyTorch (rtol = atol = 1e-6) on ``x`` of shape ``(rows, w)``, the model's one
    input with its axis 1 the dim ``w``, at each width of ``widths`` the export's constraints allow; returns
    the widths compared."""
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(result.model_proto.SerializeToString())
    name = session.get_inputs()[0].name
    compared = [w for w in widths if all(g.holds({"w": w}) for g in result.constraints)]
    assert compared, f"the constraints {result.constraints} allow none of the widths {list(widths)}"
    for w in compared:
        x = torch.randn(rows, w)
        np.testing.assert_allclose(session.run(None, {name: x.numpy()})[0], model(x).numpy(), rtol=1e-6, atol=1e-6,
                                   err_msg=f"w={w}")
    return compared


def import_source(tmp_path, monkeypatch, name: str, source: str, installed: bool = True) -> Any:
    """The module ``name`` made of ``source``: an installed package's (``<tmp>/site-packages/<name>``) or,
    with ``installed=False``, a project's; imported for the test, removed from ``sys.modules`` after."""
    import importlib
    import sys

    folder = tmp_path / ("site-packages" if installed else "project") / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(source)
    monkeypatch.syspath_prepend(str(folder.parent))
    monkeypatch.delitem(sys.modules, name, raising=False)  # imported while exported, removed after
    return importlib.import_module(name)


def count_ops(result: onnxport.ExportResult, op_type: str) -> int:
    """Nodes of ``op_type`` in the main graph, subgraphs and local functions."""
    import onnx_ir as ir

    n = sum(1 for node in ir.traversal.RecursiveGraphIterator(result.model.graph) if node.op_type == op_type)
    for f in result.model.functions.values():
        n += sum(1 for node in ir.traversal.RecursiveGraphIterator(f) if node.op_type == op_type)
    return n


DTYPES = [torch.float32, torch.int64, torch.bool]


def make_tensor(shape, dtype: torch.dtype) -> torch.Tensor:
    """Random values of ``dtype``: normal floats, ints in [-50, 50), bools."""
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype == torch.int64:
        return torch.randint(-50, 50, shape)
    return torch.randn(shape)


class Fn(torch.nn.Module):
    """A module computing ``fn(x)``: one tiny model per op case."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Fn2(torch.nn.Module):
    """A module computing ``fn(a, b)``."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a, b):
        return self.fn(a, b)


# control-flow bodies as local functions or inlined, with and without the optimizer
MODES = [pytest.param(inline, opt, id=f"{'inline' if inline else 'functions'}-{'opt' if opt else 'noopt'}")
         for inline, opt in ((False, True), (True, True), (False, False), (True, False))]
