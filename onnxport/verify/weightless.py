"""Validation of a model whose weights stay on disk, without eager PyTorch: onnxruntime runs the
saved model (its external data read from the file) on the input sets validation uses, and each
output is checked against what the model declares: its dtype, every dimension (a named one at the
size the set gives it, an expression over names evaluated), and no NaN or infinity in a float
output. Nothing is compared with eager PyTorch, and each row says so."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import sympy

from onnxport.capture.patches import exclusive_capture
from onnxport.verify.report import Check, ValidationReport
from onnxport.verify.runner import OrtRunner
from onnxport.verify.validate import _fmt_sizes, _input_sets, tensor_leaves

BASIS = "no eager: runs, dtype and shape as declared, finite"
NOT_COMPARED = "not compared with eager PyTorch (weights on disk; validate(load_eager=True) loads them)"


def check_without_eager(result, sizes=None, inputs=None) -> ValidationReport:
    """Run the saved model in onnxruntime on the example and on other sizes of every dynamic
    dimension (``validate``'s size sets, or ``sizes``: ``[{dim name: size}]``), and check each
    output's dtype, shape (``dim_param``s resolved with the set's sizes) and finiteness.

    Args:
        result: an ``ExportResult`` exported from its checkpoint (``result.weights``).
        sizes: size assignments instead of the default sets.
        inputs: extra input sets, each ``(args, kwargs)`` or an args tuple, run too (their
            outputs' named dims are not resolved: only fixed dims, dtype and finiteness checked).

    Returns a ``ValidationReport`` whose rows have ``basis`` ``BASIS`` and a note saying they
    were not compared with eager PyTorch; ``ok`` when every output ran as declared.
    Raises ``ValidationError`` when onnxruntime cannot load the model or ``sizes`` are invalid.
    The model is saved to a temporary folder with external data (written tensor by tensor).
    """
    declared = {v.name: v for v in result.model.graph.outputs}
    checks: list[Check] = []
    with exclusive_capture(), tempfile.TemporaryDirectory(prefix="onnxport-validate-") as tmp:
        runner = OrtRunner(result.save(os.path.join(tmp, "model.onnx"), external_data=True))
        sets = _input_sets(result, inputs, sizes, [], True, None)
        for label, dims, why, _, (args, kwargs) in sets:
            size_text = _fmt_sizes(dims) if dims is not None else ""
            try:
                got = runner.run(tensor_leaves((args, kwargs)))
            except Exception as e:  # noqa: BLE001 - a runtime failure is a failed check, reported
                checks.append(Check(label, size_text, "*", (), float("nan"), float("nan"), False,
                                    f"onnxruntime failed: {str(e).splitlines()[0][:200]}", why, basis=BASIS))
                continue
            for name, array in zip(runner.output_names, got):
                problems = _problems(declared.get(name), np.asarray(array), dims or {})
                checks.append(Check(label, size_text, name, tuple(np.shape(array)), float("nan"), float("nan"),
                                    not problems, "; ".join(problems) if problems else NOT_COMPARED, why,
                                    basis=BASIS))
    return ValidationReport(tuple(checks))


def _problems(value, array: np.ndarray, dims: dict) -> list[str]:
    """What in ``array`` differs from the declared output ``value`` (an ``onnx_ir.Value``)."""
    out = []
    if value is None:
        return ["output not declared by the model"]
    if value.dtype is not None:
        itemsize = value.dtype.itemsize
        if array.dtype.itemsize != itemsize:
            out.append(f"dtype {array.dtype} where {value.dtype.name.lower()} is declared")
    if value.shape is not None:
        if len(value.shape) != array.ndim:
            out.append(f"rank {array.ndim} where {len(value.shape)} is declared")
        else:
            for axis, (dim, size) in enumerate(zip(value.shape, array.shape)):
                want = _expected(dim, dims)
                if want is not None and want != size:
                    out.append(f"axis {axis} ({dim}) is {size}, {want} expected")
    if value.dtype is not None and value.dtype.is_floating_point() and array.dtype.kind == "f" \
            and not np.isfinite(array).all():
        out.append(f"{int((~np.isfinite(array)).sum())} NaN or infinite values")
    return out


def _expected(dim, dims: dict) -> int | None:
    """The size a declared dimension has for ``dims`` ({name: size}); None when it cannot be told."""
    if isinstance(dim, int):
        return dim
    text = getattr(dim, "value", None)
    if text is None:
        return None
    if text in dims:
        return int(dims[text])
    try:
        expr = sympy.sympify(text, locals={n: sympy.Symbol(n) for n in dims})
        value = expr.subs({sympy.Symbol(n): v for n, v in dims.items()})
    except (sympy.SympifyError, TypeError, ValueError, SyntaxError):
        return None
    return int(value) if value.is_integer else None
