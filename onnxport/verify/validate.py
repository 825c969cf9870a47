"""Validation: onnxruntime against eager PyTorch on the example, on other sizes and on values the
example does not reach.

``validate(result)`` builds input sets where every dynamic dimension takes other sizes than the
export's example (``onnxport.verify.sizes``: below and above the example, four times it, and at
every shape guard's boundary, within the export's range and constraints), and sets at the
example's sizes with other values (``onnxport.capture.inputs.VALUE_KINDS``: sign-symmetric, zeros,
large, NaN and infinities, integers across their range). It runs eager PyTorch and onnxruntime on
each and compares every output, the buffers and inputs the model updates in place included: dtype
and shape exact, integers and bools exactly, NaN and infinities where eager has them (``compare``).
A float32 output is judged against eager PyTorch run in float64 on the same inputs
(``verify.reference``), relative to eager float32's own distance to it and to the output's scale
(``verify.float64_bound``); where no float64 run can judge it, by the dtype's tolerance, the row
saying why (``Check.basis``). Each row says which kind of input it used (``Check.why``).

Not compared, and listed as such: a NaN/inf set on which eager's outputs are not all finite (the
model defines no result there; how NaN spreads is each runtime's own), and on the sets that make
ties (``verify.ties.TIED_KINDS``) the outputs that are indices chosen among equal values; on any
set, the outputs computed from an ``argmin`` / ``argmax`` / ``topk``... inside the model that differ
from eager's where that op met a tie (``verify.ties.TieWatch``: a gather of the chosen code, the
residual left; the program is run to look for the tie only then). A failed set where the exported
program itself differs from eager is noted so (``verify.traced_path``: the model's code takes
another path when traced).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from typing import Any

import torch
from torch.utils import _pytree as pytree

from onnxport.capture.inputs import (LARGE, VALUE_KINDS, InputSpec, as_input_set, dim_examples, dim_names, elements,
                                     inputs_like_example, sizes_of, specs_from_captured)
from onnxport.capture.patches import exclusive_capture
from onnxport.capture.relations import broken, evaluate, from_guards, missing_hint, root_size
from onnxport.errors import NegativeSizeError, ValidationError
from onnxport.verify.eager import UPDATED, run_eager
from onnxport.verify.judge import judge
from onnxport.verify.reference import Float64Reference, SetRuns
from onnxport.verify.report import EAGER_FAILED, Check, ValidationReport
from onnxport.verify.runtimes import runtime_runner
from onnxport.verify.sizes import validation_sizes
from onnxport.verify.ties import TIED_KINDS, TieWatch, index_outputs
from onnxport.verify.traced_path import traced_path_notes

VALUE_WHY = {
    "symmetric": "sign-symmetric values",
    "zeros": "exact zeros",
    "large": f"large values, {LARGE:g}x the example's spread",
    "special": "NaN and +-inf among the values, compared where eager's outputs are finite",
    "range": "integers across their plausible range",
}


def tensor_leaves(x: Any) -> list[torch.Tensor]:
    """The tensors of a nested structure, in pytree order."""
    return [t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def default_size_sets(result, specs: list[InputSpec] | None = None) -> list[tuple[str, dict]]:
    """``[(why, {dim name: size})]``: below and above the example, four times it (at least 64 on
    sequence-like dims, within an element budget) and at every guard's boundary, within the
    export's ranges and adopted constraints (``onnxport.verify.sizes``)."""
    names = dim_names(result.captured, result.dim_names)
    examples, ranges = dim_examples(result.captured, names)
    specs = specs if specs is not None else specs_from_captured(result.captured, names)
    captured = result.captured
    relations = {**from_guards(result.guards), **(getattr(captured, "relations", None) or {})}
    return validation_sizes(examples, ranges, result.guards, relations=relations,
                            empty=captured.empty_dims if captured is not None else (),
                            sequence=sequence_dims(specs), cost=lambda sizes: elements(specs, sizes))


def default_sizes(result) -> list[dict]:
    """The default size assignments other than the example (dim name -> size)."""
    return [sizes for _, sizes in default_size_sets(result)]


def sequence_dims(specs: list[InputSpec]) -> set[str]:
    """Dim names on another axis than the first of some input: time, sequence, height, width."""
    return {d for s in specs for axis, d in enumerate(s.dims) if isinstance(d, str) and axis > 0}


def value_kinds(specs: list[InputSpec], kinds: Any = None, program: Any = None) -> list[str]:
    """The value kinds worth a set for these inputs: float kinds when an input is floating point,
    ``"range"`` when an integer input is not lengths. By default, only ``"range"`` for a program
    with a data-dependent loop (``while_loop``): a loop such as ``while x.max() > bound`` may never
    end on values of another sign, zeros or NaN, in eager PyTorch as in onnxruntime (give such a
    model ``inputs`` of your own)."""
    explicit = kinds is not None
    kinds = list(VALUE_KINDS if kinds is None else kinds)
    unknown = [k for k in kinds if k not in VALUE_KINDS]
    if unknown:
        raise ValidationError(f"values {unknown} are not value kinds", hint=f"choose among {list(VALUE_KINDS)}")
    if not explicit and program is not None and has_while_loop(program):
        kinds = [k for k in kinds if k == "range"]
    floats = any(s.dtype.is_floating_point for s in specs)
    ints = any(not s.dtype.is_floating_point and not s.dtype.is_complex and s.dtype != torch.bool
               and s.lengths_of is None for s in specs)
    return [k for k in kinds if (k == "range" and ints) or (k != "range" and floats)]


def has_while_loop(program) -> bool:
    """Whether the program (its control-flow bodies included) holds a ``while_loop``."""
    loop = getattr(torch.ops.higher_order, "while_loop", None)
    for module in program.graph_module.modules():
        graph = getattr(module, "graph", None)
        if isinstance(graph, torch.fx.Graph) and any(n.op == "call_function" and n.target is loop for n in graph.nodes):
            return True
    return False


def validate(result, inputs: Any = None, sizes: Any = None, *, values: Any = None, atol: float | None = None,
             rtol: float | None = None, include_example: bool = True,
             specs: list[InputSpec] | None = None, runtime: str = "onnxruntime",
             explain: bool = True) -> ValidationReport:
    """Compare onnxruntime (or another ``runtime``) with eager PyTorch.

    Args:
        result: an ``ExportResult`` (needs its module or program and example inputs).
        inputs: extra input sets, each ``(args, kwargs)`` or an args tuple, compared too.
        sizes: size assignments to try, each a dict ``{dim name: size}`` (unnamed dims at their
            example size); default: ``default_size_sets``.
        values: value kinds tried at the example's sizes (``onnxport.capture.inputs.VALUE_KINDS``:
            ``"symmetric"``, ``"zeros"``, ``"large"``, ``"special"``, ``"range"``); default all
            that apply to the model's inputs, ``[]`` for none.
        atol, rtol: tolerances of ``|ONNX - eager| <= atol + rtol |eager|`` per element, judging
            every floating output instead of the float64 reference (defaults by dtype, float32:
            1e-4 / 1e-3, for the outputs no float64 run judges).
        include_example: compare on the example inputs too.
        specs: how to make each input (``InputSpec`` by input name), instead of from the example
            (a config's declarations: integer ranges, lengths, padding).
        runtime: what runs the ONNX model (``verify.runtimes``): ``"onnxruntime"`` (default),
            ``"openvino"`` (CPU, float32 forced) or ``"reference"`` (``onnx.reference``). The
            report names it (``ValidationReport.runtime``), and a runtime that computes a valid
            model wrongly fails there like any other difference from eager PyTorch.
        explain: on a failed set, run the exported program to say whether the model's code takes
            another path when traced (``verify.traced_path``); False where a failure is expected
            and only ``ok`` is read (the export's own trials of sizes and sides).

    Returns a ``ValidationReport`` (``.ok``, printable table, one row per output and input set,
    ``why`` saying which sizes or values the set used, ``basis`` what judged it: the float64
    reference, exact equality, or a dtype tolerance and why; ``verify.judge``). Eager PyTorch runs
    once more per set in float64 (a float64 copy of the module, made once) and, for an output that
    does not meet the bound at first, once more in float32 on the inputs moved by one ulp
    (``verify.reference``). Raises ``ValidationError`` when the model cannot be loaded by the
    runtime (or OpenVINO is not installed), ``sizes`` name unknown dims, leave the export's range or break its adopted
    constraints, ``values`` names an unknown kind, or ``specs`` leave an input of the model out.

    Runs under the capture lock (``capture.patches.exclusive_capture``): an export in another
    thread changes the modules it traces while it runs, so neither runs beside the other.
    """
    module = result.module if result.module is not None else result.program.module()
    with contextlib.ExitStack() as stack:
        stack.enter_context(exclusive_capture())
        if result.needs_external_data():
            # over protobuf's 2 GiB: onnxruntime reads the model from a file with external weights
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="onnxport-validate-"))
            runner = runtime_runner(runtime, result.save(os.path.join(tmp, "model.onnx"), external_data=True))
        else:
            runner = runtime_runner(runtime, result.model_proto)
        sets = _input_sets(result, inputs, sizes, values, include_example, specs)
        report = _compare_sets(result, module, runner, sets, atol, rtol)
        checks = list(report.checks)
        if explain:
            checks = traced_path_notes(checks, result.program, module, sets)
    examples, _ = dim_examples(result.captured, dim_names(result.captured, result.dim_names))
    by_label = {label: s for label, s, *_ in sets if label.startswith("sizes")}
    return ValidationReport(tuple(_relation_notes(checks, examples, by_label, result.captured)), runtime=runner.label)


def _input_sets(result, inputs, sizes, values, include_example,
                specs) -> list[tuple[str, dict | None, str, str, tuple]]:
    """``(label, {dim name: size} or None, why, value kind, (args, kwargs))`` of every set to compare."""
    dims = dim_names(result.captured, result.dim_names)
    examples, _ = dim_examples(result.captured, dims)
    specs = _named_as_captured(result, specs) if specs is not None else specs_from_captured(result.captured, dims)
    sets = []
    if include_example:  # its sizes those of the inputs run (the user's, where the trace was at others)
        own = dataclasses.replace(result.captured, example=result.example) if result.example is not None else None
        sets.append(("example", dim_examples(own, dims)[0] if own is not None else examples, "the example", "example",
                     result.example))
    size_sets = default_size_sets(result, specs) if sizes is None else \
        [("given sizes", _resolve_sizes(result, s, examples, dims)) for s in sizes]
    for i, (why, s) in enumerate(size_sets):
        try:
            made = inputs_like_example(result.captured, dims, s, seed=i + 1, specs=specs)
        except NegativeSizeError:
            if sizes is not None:  # the user's sizes: said as they are
                raise
            continue  # sizes chosen here at which a related input's size would be negative: no such inputs
        sets.append((f"sizes {i + 1}", s, why, "example", made))
    for i, kind in enumerate(value_kinds(specs, values, result.program)):
        why = VALUE_WHY[kind]
        if kind == "range":
            spans = [f"{s.name} in {lo}..{hi}" for s in specs if s.lengths_of is None and not s.dtype.is_floating_point
                     and s.dtype != torch.bool and not s.dtype.is_complex for lo, hi in [s.plausible_range()]]
            why += f" ({', '.join(spans)})"
        made = inputs_like_example(result.captured, dims, examples, seed=100 + i, values=kind, specs=specs)
        sets.append((f"values {i + 1}", examples, why, kind, made))
    for i, extra in enumerate(inputs or []):
        given = as_input_set(extra)
        sets.append((f"inputs {i + 1}", None, "given inputs" + _outside(result, given, dims), "example", given))
    return sets


def _outside(result, given: tuple[tuple, dict], dims: dict) -> str:
    """``; outside the export's constraint ...`` when the sizes of the input set ``given`` break an
    adopted constraint (the export does not hold there), else ``""``."""
    if result.captured is None or not result.constraints:
        return ""
    sizes = sizes_of(result.captured, dims, given)
    broken = [str(c) for c in result.constraints if not c.holds(sizes)]
    if not broken:
        return ""
    shown = "; ".join(b if len(b) <= 120 else b[:117] + "..." for b in broken[:2])
    return f"; outside the export's constraint{'s' if len(broken) > 1 else ''} {shown} (result.constraints)"


def _named_as_captured(result, specs: list[InputSpec]) -> list[InputSpec]:
    """``specs`` named as capture names the inputs they make (a config names them as the ONNX
    inputs, which ``input_names`` may name otherwise than the flat names of the example: a dict
    argument ``raw`` gives ``raw_data``), the lengths input of a padded one too.

    Raises ``ValidationError`` when an input of the model has no spec: its example would be fed
    at every set, the generated sizes and values never reaching it."""
    onnx = [v.name for v in result.model.graph.inputs]
    captured = [i.name for i in result.captured.inputs] if result.captured is not None else onnx
    rename = dict(zip(onnx, captured)) if len(onnx) == len(captured) else {}
    named = [dataclasses.replace(s, name=rename.get(s.name, s.name),
                                 pad=(rename.get(s.pad[0], s.pad[0]), *s.pad[1:]) if s.pad else s.pad) for s in specs]
    missing = sorted(set(captured) - {s.name for s in named})
    if missing:
        raise ValidationError(f"no input declaration makes the model's inputs {missing}: validation would feed their "
                              "example at every size and value", hint=f"declare every input of {onnx}")
    return named


def _compare_sets(result, module, runner, sets, atol, rtol) -> ValidationReport:
    out_names = runner.output_names
    updated = [n[:-len(UPDATED)] for n in out_names if n.endswith(UPDATED)]
    fresh = bool(updated) or (any(s.kind.name != "USER_OUTPUT" for s in result.program.graph_signature.output_specs)
                              if result.program is not None else True)
    indices = index_outputs(result.program)
    ties = TieWatch(result.program) if result.program is not None else None
    watched = ties.outputs if ties else set()  # outputs an index inside the model drives (a gather of the pick)
    reference = Float64Reference(result.module, atol, rtol)
    checks: list[Check] = []
    for label, sizes, why, kind, (args, kwargs) in sets:
        generated = label.startswith(("sizes", "values"))
        size_text = _fmt_sizes(sizes) if sizes is not None else ""

        def failed(note: str, rejected: bool = False) -> None:
            checks.append(Check(label, size_text, "*", (), float("nan"), float("nan"), False, note, why, rejected))

        try:
            expected, after = run_eager(module, fresh, args, kwargs, runner.input_names, updated)
        except Exception as e:  # noqa: BLE001 - eager refusing these inputs is reported, not raised
            resorted = _lengths_sorted(args, kwargs) if generated else None
            try:
                if resorted is None:
                    raise e
                expected, after = run_eager(module, fresh, *resorted, runner.input_names, updated)
                args, kwargs = resorted  # the model asks for lengths sorted longest first
                why = why + "; lengths sorted, as the model requires"
            except Exception:  # noqa: BLE001
                failed(f"{EAGER_FAILED}: {type(e).__name__}: "
                       f"{str(e).splitlines()[0][:160] if str(e) else ''}", rejected=generated)
                continue
        try:
            got = runner.run(tensor_leaves((args, kwargs)))
        except Exception as e:  # noqa: BLE001 - a runtime failure is a failed check, reported
            failed(f"{runner.label} failed: {str(e).splitlines()[0][:200]}")
            continue
        users = [(n, g) for n, g in zip(out_names, got) if not n.endswith(UPDATED)]
        if len(users) != len(expected):
            failed(f"{len(users)} ONNX outputs for {len(expected)} eager outputs")
            continue
        if kind == "special" and not all(bool(torch.isfinite(e).all()) for e in expected if e.is_floating_point()):
            failed("eager's outputs hold NaN or infinities on these inputs (no defined value): not compared",
                   rejected=True)
            continue
        runs = SetRuns(module, reference, fresh, args, kwargs, runner.input_names, updated, len(expected))
        tied = indices if kind in TIED_KINDS else set()
        driven = None  # output -> the op whose tie reached it: the program is run for it only once one differs
        pairs = []
        for i, ((n, g), e) in enumerate(zip(users, expected)):
            if i in tied:
                checks.append(Check(label, size_text, n, tuple(e.shape), float("nan"), float("nan"), False,
                                    "indices among equal values: either is right, not compared", why, True))
                continue
            verdict = judge(e, g, runs, i, kind == "large", atol, rtol) if i in watched else None
            if verdict is not None and not verdict["ok"]:  # equal all the same is compared; differing, a tie?
                driven = ties.tied(args, kwargs) if driven is None else driven
                if i in driven:
                    checks.append(Check(label, size_text, n, tuple(e.shape), float("nan"), float("nan"), False,
                                        f"computed from indices chosen among equal values ({driven[i]}): either "
                                        "choice is right, not compared", why, True))
                    continue
            pairs.append((n, e, g, i, verdict))
        for n, g in zip(out_names, got):
            if n.endswith(UPDATED):
                e = after.get(n[:-len(UPDATED)])
                if e is None:
                    failed(f"{n}: eager PyTorch has no buffer or input {n[:-len(UPDATED)]!r}")
                    continue
                pairs.append((n, e, g, n[:-len(UPDATED)], None))
        for name, e, g, key, verdict in pairs:
            if verdict is None:
                verdict = judge(e, g, runs, key, kind == "large", atol, rtol)
            checks.append(Check(label, size_text, name, tuple(e.shape), why=why, **verdict))
    return ValidationReport(tuple(checks))


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


def _resolve_sizes(result, sizes: dict, examples: dict, dims: dict) -> dict:
    """``{dim name: size}`` completed with the example's sizes; names, ranges and constraints checked.
    A size of a derived form (``"4*T": 36``, an input declared ``4 * Dim("T")``) gives its dim's (``T = 9``)."""
    sizes = _root_sizes(sizes, examples)
    unknown = [k for k in sizes if k not in examples]
    if unknown:
        derived = sorted({d.name for d in getattr(result.captured, "declared", ()) if d.root is not None})
        raise ValidationError(f"sizes name {unknown}, which are not dynamic dimensions of the model",
                              hint=f"the model's dynamic dimensions are {sorted(examples) or 'none'}"
                                   + (f" (sizes of their derived forms {derived} are taken too)" if derived else ""))
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
                                  "the export declares",
                                  hint="give the independent dims only; related ones are computed")
        out = completed
    broken_guards = [g for g in result.constraints if not g.holds(out)]
    if broken_guards:
        raise ValidationError(f"sizes {_fmt_sizes(out)} break the export's constraint "
                              f"{'; '.join(str(g) for g in broken_guards)}",
                              hint="choose sizes that satisfy result.constraints (the export holds only there)")
    return out


def _root_sizes(sizes: dict, examples: dict) -> dict:
    """``sizes`` with each size given to a derived form of a dim (``"4*T": 36``) given to the dim
    (``"T": 9``, ``capture.relations.root_size``); other names kept as they are.

    Raises ``ValidationError`` when no whole size of the dim gives the derived size, or two sizes
    given for one dim disagree."""
    out: dict = {}
    for name, value in sizes.items():
        found = None if name in examples else root_size(str(name), int(value), set(examples))
        if found is None:
            root, size, said = name, value, name
        else:
            root, size = found
            said = f"{name} = {value}"
            if size is None:
                raise ValidationError(f"sizes give {said}, which no whole size of {root!r} makes",
                                      hint=f"give {root!r} its size, or a size of {name} it makes")
        if root in out and int(out[root]) != int(size):
            raise ValidationError(f"sizes give {root!r} two sizes, {out[root]} and {size} ({said})",
                                  hint=f"give {root!r} one size, by its name or one derived form")
        out[root] = size
    return out


def _fmt_sizes(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())
