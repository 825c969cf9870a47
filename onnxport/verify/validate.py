"""Validation: onnxruntime against eager PyTorch on the example and on other sizes.

``validate(result)`` builds input sets where every dynamic dimension takes other sizes than the
export's example (``onnxport.verify.sizes``: below and above the example and at every shape
guard's boundary, within the export's range and constraints), runs eager PyTorch and onnxruntime on
each, and compares every output (dtype-aware tolerance, NaN-aware, shapes exact).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import tempfile
import warnings
from typing import Any

import torch
from torch.utils import _pytree as pytree

from onnxport.capture.caches import sliding_window_as_full
from onnxport.capture.relations import broken, evaluate, from_guards, missing_hint
from onnxport.errors import ValidationError
from onnxport.verify.compare import compare, to_numpy
from onnxport.capture.inputs import dim_examples, dim_names, inputs_like_example
from onnxport.verify.report import Check, ValidationReport
from onnxport.verify.runner import OrtRunner
from onnxport.verify.sizes import validation_sizes


def tensor_leaves(x: Any) -> list[torch.Tensor]:
    """The tensors of a nested structure, in pytree order."""
    return [t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def output_leaves(x: Any) -> list[torch.Tensor]:
    """A model's outputs in pytree order: its tensors, and each Python number as the 0-d tensor the
    export returns for it (int64, float64 or bool)."""
    out = []
    for leaf in pytree.tree_leaves(x):
        if isinstance(leaf, torch.Tensor):
            out.append(leaf)
        elif isinstance(leaf, (bool, int, float)):
            out.append(torch.tensor(leaf, dtype=torch.float64 if isinstance(leaf, float) else None))
    return out


def default_size_sets(result) -> list[tuple[str, dict]]:
    """``[(why, {dim name: size})]``: below and above the example and at every guard's boundary,
    within the export's ranges and adopted constraints (``onnxport.verify.sizes``)."""
    names = dim_names(result.captured, result.dim_names)
    examples, ranges = dim_examples(result.captured, names)
    captured = result.captured
    relations = {**from_guards(result.guards), **(getattr(captured, "relations", None) or {})}
    return validation_sizes(examples, ranges, result.guards, relations=relations,
                            empty=captured.empty_dims if captured is not None else ())


def default_sizes(result) -> list[dict]:
    """The default size assignments other than the example (dim name -> size)."""
    return [sizes for _, sizes in default_size_sets(result)]


def validate(result, inputs: Any = None, sizes: Any = None, *, atol: float | None = None,
             rtol: float | None = None, include_example: bool = True) -> ValidationReport:
    """Compare onnxruntime with eager PyTorch.

    Args:
        result: an ``ExportResult`` (needs its module or program and example inputs).
        inputs: extra input sets, each ``(args, kwargs)`` or an args tuple, compared too.
        sizes: size assignments to try, each a dict ``{dim name: size}`` (unnamed dims at their
            example size); default: ``default_size_sets``.
        atol, rtol: tolerances overriding the dtype defaults (float32: 1e-4 / 1e-3).

    Returns a ``ValidationReport`` (``.ok``, printable table). Raises ``ValidationError`` when the
    model cannot be loaded by onnxruntime, or ``sizes`` name unknown dims, leave the export's range
    or break its adopted constraints.
    """
    module = result.module if result.module is not None else result.program.module()
    with contextlib.ExitStack() as stack:
        if result.weights_bytes() > result.external_data_threshold:
            # over protobuf's 2 GB: onnxruntime reads the model from a file with external weights
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="onnxport-validate-"))
            runner = OrtRunner(result.save(os.path.join(tmp, "model.onnx"), external_data=True))
        else:
            runner = OrtRunner(result.model_proto)
        return _compare_sets(result, module, runner, inputs, sizes, atol, rtol, include_example)


def _compare_sets(result, module, runner, inputs, sizes, atol, rtol, include_example) -> ValidationReport:
    names = [v.name for v in result.model.graph.outputs if not v.name.endswith(".updated")]
    dims = dim_names(result.captured, result.dim_names)
    examples, _ = dim_examples(result.captured, dims)
    sets: list[tuple[str, str, str, tuple]] = []  # label, sizes, why, (args, kwargs)
    if include_example:
        sets.append(("example", _fmt_sizes(examples), "", result.example))
    size_sets = default_size_sets(result) if sizes is None else [("", _resolve_sizes(result, s, examples, dims))
                                                                 for s in sizes]
    by_label = {}
    for i, (why, s) in enumerate(size_sets):
        sets.append((f"sizes {i + 1}", _fmt_sizes(s), why, inputs_like_example(result.captured, dims, s, seed=i + 1)))
        by_label[f"sizes {i + 1}"] = s
    for i, extra in enumerate(inputs or []):
        sets.append((f"inputs {i + 1}", "", "", _input_set(extra)))

    checks: list[Check] = []
    mutates = any(s.kind.name != "USER_OUTPUT" for s in result.program.graph_signature.output_specs) \
        if result.program is not None else True
    for label, size_text, why, (args, kwargs) in sets:
        generated = label.startswith("sizes")
        try:
            expected = _eager(module, mutates, args, kwargs)
        except Exception as e:  # noqa: BLE001 - eager refusing these inputs is reported, not raised
            resorted = _lengths_sorted(args, kwargs) if generated else None
            try:
                if resorted is None:
                    raise e
                expected = _eager(module, mutates, *resorted)
                args, kwargs = resorted  # the model asks for lengths sorted longest first
                why = (why + "; " if why else "") + "lengths sorted, as the model requires"
            except Exception:  # noqa: BLE001
                checks.append(Check(label, size_text, "*", (), float("nan"), float("nan"), False,
                                    f"eager PyTorch failed on these inputs: {type(e).__name__}: "
                                    f"{str(e).splitlines()[0][:160] if str(e) else ''}", why, rejected=generated))
                continue
        try:
            got = runner.run(tensor_leaves((args, kwargs)))
        except Exception as e:  # noqa: BLE001 - a runtime failure is a failed check, reported
            checks.append(Check(label, size_text, "*", (), float("nan"), float("nan"), False,
                                f"onnxruntime failed: {str(e).splitlines()[0][:200]}", why))
            continue
        got = got[:len(names)]
        if len(got) != len(expected):
            checks.append(Check(label, size_text, "*", (), float("nan"), float("nan"), False,
                                f"{len(got)} ONNX outputs for {len(expected)} eager outputs", why))
            continue
        for name, e, g in zip(names, expected, got):
            ma, mr, ok, note = compare(to_numpy(e), g, e.dtype, atol, rtol)
            checks.append(Check(label, size_text, name, tuple(e.shape), ma, mr, ok, note, why))
    return ValidationReport(tuple(_relation_notes(checks, examples, by_label, result.captured)))


def _relation_notes(checks: list[Check], examples: dict, by_label: dict, captured) -> list[Check]:
    """The failed checks of size sets eager accepted, noted with the relations between dims that
    hold at the example and at every set that passed but not at the failed set: a relation the
    model may need that the export was not told (``onnxport.capture.relations``)."""
    relations = getattr(captured, "relations", None) or {}
    failed = {c.inputs for c in checks if not c.ok and not c.rejected}
    passed = [by_label[label] for label in by_label if label not in failed
              and any(c.inputs == label and not c.rejected for c in checks)]
    out = []
    for c in checks:
        if c.inputs in failed and c.inputs in by_label and not c.ok:
            text = missing_hint(examples, by_label[c.inputs], relations, holding=passed)
            if text:
                c = dataclasses.replace(c, note=f"{c.note}; {text}" if c.note else text)
        out.append(c)
    return out


def _eager(module, mutates: bool, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """Eager outputs on copies of the inputs (and of the module when it mutates its buffers), so
    every input set starts fresh; transformers' sliding-window cache layers hold every step, as in
    the export (``onnxport.capture.caches.sliding_window_as_full``)."""
    feed_args, feed_kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (args, kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree notes on deepcopy
        run_module = copy.deepcopy(module) if mutates else module
    with torch.no_grad(), sliding_window_as_full():
        return output_leaves(run_module(*feed_args, **feed_kwargs))


def _lengths_sorted(args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """The inputs with every 1-D integer tensor (sequence lengths) sorted longest first, as
    ``pack_padded_sequence(enforce_sorted=True)`` requires; None when there is none to sort."""
    found = []

    def sort(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 1 and not t.dtype.is_floating_point and t.dtype != torch.bool and t.numel() > 1:
            found.append(t)
            return torch.sort(t, descending=True).values
        return t

    out = pytree.tree_map_only(torch.Tensor, sort, (args, kwargs))
    return out if found else None


def _input_set(extra: Any) -> tuple[tuple, dict]:
    """An extra input set as ``(args, kwargs)``: accepts a tensor, an args tuple/list, or (args, kwargs)."""
    if isinstance(extra, torch.Tensor):
        return (extra,), {}
    if isinstance(extra, tuple) and len(extra) == 2 and isinstance(extra[0], (tuple, list)) and isinstance(extra[1], dict):
        return tuple(extra[0]), dict(extra[1])
    if isinstance(extra, (tuple, list)):
        return tuple(extra), {}
    raise ValidationError(f"an input set must be a tensor, an args tuple or (args, kwargs), not {type(extra).__name__}",
                          hint="e.g. inputs=[(x2,), ((x3, lengths3), {})]")


def _resolve_sizes(result, sizes: dict, examples: dict, dims: dict) -> dict:
    """``{dim name: size}`` completed with the example's sizes; names, ranges and constraints checked."""
    unknown = [k for k in sizes if k not in examples]
    if unknown:
        raise ValidationError(f"sizes name {unknown}, which are not dynamic dimensions of the model",
                              hint=f"the model's dynamic dimensions are {sorted(examples) or 'none'}")
    _, ranges = dim_examples(result.captured, dims)
    relations = getattr(result.captured, "relations", None) or {}
    out = dict(examples)
    for name, value in sizes.items():
        lo, hi = ranges.get(name, (0, 1 << 30))
        if not lo <= int(value) <= hi:
            raise ValidationError(f"size {value} for {name!r} is outside the range [{lo}, {hi}] the export allows",
                                  hint=f"choose {name} within [{lo}, {hi}] or widen the Dim's min/max at export")
        out[name] = int(value)
    if relations:
        free = {n: v for n, v in out.items() if n not in relations}
        completed = evaluate({n: e for n, e in relations.items() if n in out}, free)
        given = {n: v for n, v in sizes.items() if n in relations}
        wrong = broken(relations, {**completed, **given})
        if wrong:
            raise ValidationError(f"sizes {_fmt_sizes({**completed, **given})} break the relation {'; '.join(wrong)} "
                                  "the export declares", hint="give the independent dims only; related ones are computed")
        out = completed
    broken_guards = [g for g in result.constraints if not g.holds(out)]
    if broken_guards:
        raise ValidationError(f"sizes {_fmt_sizes(out)} break the export's constraint "
                              f"{'; '.join(str(g) for g in broken_guards)}",
                              hint="choose sizes that satisfy result.constraints (the export holds only there)")
    return out


def _fmt_sizes(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())
