"""``to_onnx``: capture -> decompose -> translate -> optimize -> finalize, nothing else."""

from __future__ import annotations

import time
import warnings
from typing import Any

import torch

from onnxport.result import ExportResult

MIN_OPSET = 18
MAX_OPSET = 23  # the newest opset whose operators onnxport emits and tests


def to_onnx(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: Any = (),
    kwargs: dict | None = None,
    *,
    dynamic_shapes: Any = None,
    input_names: list[str] | None = None,
    output_names: list[str] | None = None,
    opset: int = 20,
    optimize: bool = True,
    inline: bool = False,
    strict: bool = False,
    verbose: bool = False,
    rewrite_control_flow: bool = False,
    other_axes: str = "static",
) -> ExportResult:
    """Export a PyTorch model to ONNX, keeping dynamic dimensions symbolic under the user's names.

    Args:
        model: a ``torch.nn.Module`` (put in eval mode by the caller) or a
            ``torch.export.ExportedProgram``.
        args: example positional inputs: tensors, Python scalars, nested tuples/lists/dicts.
        kwargs: example keyword inputs.
        dynamic_shapes: as ``torch.export.export`` takes it (``Dim`` objects, dicts, tuples/lists,
            ``Dim.AUTO``/``Dim.DYNAMIC``), plus plain strings as dimension names
            (``{"x": {0: "batch", 2: "time"}}``). A name used twice is the same dimension.
        input_names, output_names: names of the flat tensor inputs/outputs of the ONNX model.
            Default: forward() parameter names (``x``, nested ``batch_ids``) and ``output``,
            ``output_0``..., dict keys or attribute names of the returned structure.
        opset: ONNX default-domain opset (18 or newer; default 20).
        optimize: run the optimization pipeline (constant folding, CSE, dead code...).
        inline: inline control-flow bodies instead of calling local functions.
        strict: capture with torch.export's strict (TorchDynamo) mode.
        verbose: print one progress line per step with its duration.
        rewrite_control_flow: rewrite Python loops/branches over dynamic sizes into
            scan/cond/while_loop before capture (when available).
        other_axes: ``"static"`` (default, torch.export's rule: an axis ``dynamic_shapes`` does not
            name keeps the example's size) or ``"auto"`` (such axes are ``Dim.AUTO``: dynamic where
            the model allows it, named ``<input>_dim<axis>``, static where it does not).

    Returns:
        ``ExportResult`` with ``.model`` (onnx_ir.Model), ``.model_proto``, ``.save()``, ``.validate()``.

    Raises:
        DynamicShapesError, SpecializationError, CaptureError, UnsupportedOpError,
        TranslationError, ControlFlowError (all ``onnxport.ExportError``).

    Every condition on sizes the trace relies on is decided over the declared sizes (see
    ``onnxport.guards``): proved ones are dropped, torch's 0/1 specializations kept (validation
    looks there), conditions a dimension named without a range needs are adopted with a warning
    (``result.constraints``), and conditions cutting an explicit ``Dim`` range are refused.

    Semantics: torch.export (https://pytorch.org/docs/stable/export.html) for capture; each ATen
    overload translated per the ONNX operator specs of the target opset.
    """
    from onnxport import capture as capture_mod
    from onnxport.errors import ExportError
    from onnxport.translate import registry
    from onnxport.translate.program import build_model

    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ExportError(f"opset {opset} is not supported",
                          hint=f"use an opset from {MIN_OPSET} to {MAX_OPSET} (default 20)")
    if isinstance(model, torch.nn.Module) and model.training:
        warnings.warn("the model is in training mode: dropout and batch norm export their training behaviour; "
                      "call model.eval() before to_onnx for inference", UserWarning, stacklevel=2)
    timings: dict[str, float] = {}

    def step(name: str, t0: float) -> None:
        timings[name] = time.perf_counter() - t0
        if verbose:
            print(f"[onnxport] {name}: {timings[name]:.2f}s", flush=True)

    if isinstance(model, torch.export.ExportedProgram) and not args and not kwargs and model.example_inputs:
        args, kwargs = model.example_inputs
    if isinstance(args, torch.Tensor):
        args = (args,)
    args = tuple(args)
    module = model
    rewrite_notes: list = []
    if rewrite_control_flow and isinstance(model, torch.nn.Module):
        from onnxport.rewrite import rewrite_module

        t0 = time.perf_counter()
        model = rewrite_module(model, args, kwargs or {})
        rewrite_notes = list(getattr(model, "onnxport_rewrite_notes", []))
        step("rewrite", t0)
    t0 = time.perf_counter()
    captured = capture_mod.capture(model, args, kwargs, dynamic_shapes, strict=strict,
                                   rewritten=rewrite_control_flow, other_axes=other_axes)
    step("capture", t0)
    t0 = time.perf_counter()
    captured.program = capture_mod.decompose(captured.program, registry.lookup)
    step("decompose", t0)
    t0 = time.perf_counter()
    ir_model = build_model(captured, opset=opset, input_names=input_names, output_names_=output_names,
                           options={"inline": inline})
    step("translate", t0)
    if optimize:
        from onnxport.optimize.pipeline import optimize as run_passes

        t0 = time.perf_counter()
        run_passes(ir_model, opset)
        step("optimize", t0)
    t0 = time.perf_counter()
    from onnxport.finalize import finalize

    finalize(ir_model, inline=inline, constraints=[str(g) for g in captured.constraints])
    step("finalize", t0)
    if isinstance(module, torch.export.ExportedProgram):
        module = module.module()
    result = ExportResult(ir_model, program=captured.program, module=module, example=(args, dict(kwargs or {})),
                          captured=captured, timings=timings)
    result.dim_names = dict(ir_model.meta.get("dim_names", {}))
    result.rewrite_notes = rewrite_notes  # what rewrite_control_flow left as written, and why
    return result
