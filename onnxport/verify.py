"""Verification: onnxruntime against eager PyTorch on the example and on other sizes.

``validate(result)`` builds input sets where every dynamic dimension takes other sizes than the
export's example (within torch.export's range constraints), runs eager PyTorch and onnxruntime on
each, and compares every output (dtype-aware tolerance, NaN-aware, shapes exact).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import tempfile
import warnings
from typing import Any

import numpy as np
import sympy
import torch
from torch.utils import _pytree as pytree

from onnxport.errors import ValidationError
from onnxport.sizes import validation_sizes
from onnxport.translate import symbolic

_TOL = {  # (atol, rtol) per torch dtype
    torch.float32: (1e-4, 1e-3),
    torch.float64: (1e-7, 1e-6),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


@dataclasses.dataclass
class Check:
    """One output compared on one input set."""

    inputs: str  # label of the input set ("example", "sizes 2")
    sizes: str  # "batch=3, time=17"
    output: str
    shape: tuple
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""
    why: str = ""  # why these sizes: "minimum", "above the example", "kept guard (time // 4) != 1"
    rejected: bool = False  # eager PyTorch refused these generated sizes: reported, not compared


@dataclasses.dataclass
class ValidationReport:
    """Every comparison made; ``ok`` is True when at least one comparison ran and every comparison
    passed (generated sizes eager PyTorch itself rejects are listed in ``rejected``, not failures)."""

    checks: list[Check]

    @property
    def ok(self) -> bool:
        compared = [c for c in self.checks if not c.rejected]
        return bool(compared) and all(c.ok for c in compared)

    @property
    def rejected(self) -> list[Check]:
        """Generated size sets eager PyTorch refused (the model does not take them)."""
        return [c for c in self.checks if c.rejected]

    @property
    def max_abs(self) -> float:
        vals = [c.max_abs for c in self.checks if not math.isnan(c.max_abs)]
        return max(vals) if vals else float("nan")

    def to_dict(self) -> dict:
        return {"ok": self.ok, "checks": [dataclasses.asdict(c) for c in self.checks]}

    def __str__(self) -> str:
        head = ("inputs", "sizes", "output", "shape", "max abs", "max rel", "pass")
        rows = [head] + [(c.inputs, c.sizes + (f" ({c.why})" if c.why else ""), c.output,
                          "x".join(map(str, c.shape)) or "()", f"{c.max_abs:.2e}", f"{c.max_rel:.2e}",
                          ("eager rejects" if c.rejected else "ok" if c.ok else "FAIL") + (f" {c.note}" if c.note else ""))
                         for c in self.checks]
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
        lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        failed = [c for c in self.checks if not c.ok and not c.rejected]
        if failed and all(c.why == "minimum" for c in failed):
            lines.append("note: only the minimum sizes fail: torch.export traces a model assuming dynamic sizes >= 2 "
                         "(its 0/1 specialization) unless an example has size 1; export with an example of size 1 on "
                         "those dims, or declare Dim(name, min=2)")
        return "\n".join(lines)

    __repr__ = __str__


# ------------------------------------------------------------------------------ input generation
def _symbol_examples(result) -> tuple[dict, dict, dict]:
    """symbol -> example size, symbol -> (min, max), symbol -> user name."""
    program = result.program
    from torch.export.graph_signature import InputKind

    examples: dict = {}
    derived: list = []
    flat = pytree.tree_leaves(result.example)
    user = [s for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    for spec, leaf in zip(user, flat):
        val = nodes[spec.arg.name].meta.get("val")
        if isinstance(val, torch.Tensor) and isinstance(leaf, torch.Tensor):
            for d, real in zip(val.shape, leaf.shape):
                expr = symbolic.expr_of(d)
                if isinstance(expr, sympy.Symbol):
                    examples[expr] = int(real)
                elif isinstance(expr, sympy.Expr) and len(expr.free_symbols) == 1:
                    derived.append((expr, int(real)))
    for expr, real in derived:  # derived dims (4*h, h + 1): solve for the root symbol's example
        (sym,) = expr.free_symbols
        if sym not in examples:
            roots = [r for r in sympy.solve(sympy.Eq(expr, real), sym) if getattr(r, "is_Integer", False)]
            if roots:
                examples[sym] = int(roots[0])
    ranges = {}
    for sym, vr in program.range_constraints.items():
        lo = int(vr.lower) if getattr(vr.lower, "is_Integer", False) else 0
        hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else 1 << 30
        ranges[sym] = (lo, hi)
    for sym, var in getattr(result.captured, "variables", {}).items():  # what the export holds for
        ranges[sym] = (var.lo, var.hi if var.hi is not None else 1 << 30)
    names = {}
    namer = result.dim_names
    for sym in examples:
        names[sym] = namer.get(sym, str(sym))
    return examples, ranges, names


def default_sizes(result) -> list[dict]:
    """The default size assignments other than the example (symbol -> size); see
    ``onnxport.sizes.validation_sizes``."""
    return [sizes for _, sizes in default_size_sets(result)]


def default_size_sets(result) -> list[tuple[str, dict]]:
    """``[(why, {symbol: size})]``: below and above the example and at every guard's boundary,
    within the export's ranges and adopted constraints."""
    examples, ranges, names = _symbol_examples(result)
    return validation_sizes(examples, ranges, names, result.guards)


def make_inputs(result, sizes: dict, seed: int = 0) -> tuple[tuple, dict]:
    """Inputs like the example but with every dynamic dimension resized per ``sizes``."""
    program = result.program
    from torch.export.graph_signature import InputKind

    examples, _, _ = _symbol_examples(result)
    gen = torch.Generator().manual_seed(seed)
    flat, spec = pytree.tree_flatten(result.example)
    user = [s for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    by_example_size = {}
    for sym, e in examples.items():
        by_example_size.setdefault(e, sym)
    new_flat = []
    for s, leaf in zip(user, flat):
        val = nodes[s.arg.name].meta.get("val")
        if not isinstance(leaf, torch.Tensor) or not isinstance(val, torch.Tensor):
            new_flat.append(leaf)
            continue
        shape = []
        for d in val.shape:
            expr = symbolic.expr_of(d)
            if isinstance(expr, (int, np.integer)) or (hasattr(expr, "is_number") and expr.is_number):
                shape.append(int(expr))
            else:
                shape.append(int(expr.xreplace({k: sympy.Integer(v) for k, v in sizes.items()})))
        new_flat.append(_random_like(leaf, shape, gen, sizes, by_example_size))
    for leaf in flat[len(user):]:
        new_flat.append(leaf)
    return tuple(pytree.tree_unflatten(new_flat, spec))


def _random_like(t: torch.Tensor, shape: list[int], gen, sizes, by_example_size) -> torch.Tensor:
    if t.dtype.is_floating_point:
        scale = float(t.float().std()) if t.numel() > 1 else 1.0
        scale = scale if math.isfinite(scale) and scale > 0 else 1.0
        return (torch.randn(shape, generator=gen) * scale + float(t.float().mean() if t.numel() else 0)).to(t.dtype)
    if t.dtype == torch.bool:
        if t.numel() and bool(t.all()):
            return torch.ones(shape, dtype=torch.bool)
        out = torch.rand(shape, generator=gen) > 0.5
        if out.dim() >= 2 and out.shape[-1] >= 2:
            # masks: no row all True or all False (a fully masked row is an edge case of its own,
            # where eager's fast paths and its regular path disagree)
            out[..., 0], out[..., -1] = False, True
        return out
    if t.dtype.is_complex:
        return torch.randn(shape, generator=gen, dtype=t.dtype)
    if t.numel() == 0:
        return torch.zeros(shape, dtype=t.dtype)
    lo, hi = int(t.min()), int(t.max())
    sym = by_example_size.get(hi) if t.dim() == 1 and lo >= 1 else None
    if sym is not None and sym in sizes:  # looks like lengths of a dynamic axis
        n = sizes[sym]
        out = torch.randint(1, n + 1, shape, generator=gen, dtype=t.dtype)
        if out.numel():
            out[torch.randint(0, out.numel(), (1,), generator=gen)] = n
        return out
    out = torch.randint(lo, hi + 1, shape, generator=gen, dtype=t.dtype)
    if lo <= 0 <= hi and not bool((t == 0).any()):
        out[out == 0] = 1 if hi >= 1 else -1  # no zeros where the example has none (divisors)
    return out


# ------------------------------------------------------------------------------ running
def _tensor_leaves(x: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.contiguous().numpy()


class OrtRunner:
    """An onnxruntime session over a model proto or a saved file; ``run(inputs) -> list[np.ndarray]``."""

    def __init__(self, proto, threads: int = 1):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            source = proto if isinstance(proto, str) else proto.SerializeToString()
            self.session = ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001
            text = str(e)
            hint = "run onnx.checker.check_model(model, full_check=True) to locate the problem"
            if "NOT_IMPLEMENTED" in text and not isinstance(proto, str) and _uses_bfloat16(proto):
                hint = ("the model is valid ONNX but onnxruntime's CPU provider has no bfloat16 kernel for this "
                        "operator: validate a float32 export (model.float()) or run on a provider with bfloat16 support")
            raise ValidationError(f"onnxruntime could not load the model: {text.splitlines()[0][:300]}",
                                  hint=hint) from e
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, tensors: list[torch.Tensor]) -> list[np.ndarray]:
        feeds = {n: to_numpy(t) for n, t in zip(self.input_names, tensors)}
        return self.session.run(None, feeds)


def _uses_bfloat16(proto) -> bool:
    bf16 = 16  # onnx.TensorProto.BFLOAT16
    g = proto.graph
    return any(v.type.tensor_type.elem_type == bf16 for v in list(g.input) + list(g.output)) or \
        any(t.data_type == bf16 for t in g.initializer)


def compare(expected: np.ndarray, got: np.ndarray, dtype: torch.dtype, atol=None, rtol=None) -> tuple[float, float, bool, str]:
    """(max abs error, max relative error, ok, note) of one output."""
    if tuple(expected.shape) != tuple(got.shape):
        return float("nan"), float("nan"), False, f"shape {tuple(got.shape)} != {tuple(expected.shape)}"
    if expected.size == 0:
        return 0.0, 0.0, True, ""
    d_atol, d_rtol = _TOL.get(dtype, (0.0, 0.0))
    atol = d_atol if atol is None else atol
    rtol = d_rtol if rtol is None else rtol
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        diff = np.abs(expected.astype(np.float64) - got.astype(np.float64))
        m = float(diff.max())
        return m, m, m == 0, ""
    e = expected.astype(np.float64)
    g = got.astype(np.float64)
    nan_e, nan_g = np.isnan(e), np.isnan(g)
    if (nan_e != nan_g).any():
        return float("nan"), float("nan"), False, "NaN mismatch"
    both_inf = np.isinf(e) & (e == g)
    mask = ~(nan_e | both_inf)
    if not mask.any():
        return 0.0, 0.0, True, ""
    diff = np.abs(e[mask] - g[mask])
    max_abs = float(diff.max())
    rel = diff / np.maximum(np.abs(e[mask]), 1e-12)
    max_rel = float(rel.max())
    ok = bool(np.all(diff <= atol + rtol * np.abs(e[mask])))
    return max_abs, max_rel, ok, ""


def validate(result, inputs: Any = None, sizes: Any = None, *, atol: float | None = None,
             rtol: float | None = None, include_example: bool = True) -> "ValidationReport":
    """Compare onnxruntime with eager PyTorch.

    Args:
        result: an ``ExportResult`` (needs its module or program and example inputs).
        inputs: extra input sets, each ``(args, kwargs)`` or an args tuple, compared too.
        sizes: size assignments to try, each a dict ``{dim name: size}``; default: two assignments
            other than the example's (``default_sizes``).
        atol, rtol: tolerances overriding the dtype defaults (float32: 1e-4 / 1e-3).

    Returns a ``ValidationReport`` (``.ok``, printable table). Raises ``ValidationError`` when the
    model cannot be loaded by onnxruntime or the module is missing.
    """
    module = result.module if result.module is not None else result.program.module()
    with contextlib.ExitStack() as stack:
        if result._weights_bytes() > result.external_data_threshold:
            # over protobuf's 2 GB: onnxruntime reads the model from a file with external weights
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="onnxport-validate-"))
            runner = OrtRunner(result.save(os.path.join(tmp, "model.onnx"), external_data=True))
        else:
            runner = OrtRunner(result.model_proto)
        return _compare_sets(result, module, runner, inputs, sizes, atol, rtol, include_example)


def _compare_sets(result, module, runner, inputs, sizes, atol, rtol, include_example) -> "ValidationReport":
    names = [v.name for v in result.model.graph.outputs if not v.name.endswith(".updated")]
    examples, _, user_names = _symbol_examples(result)
    sets: list[tuple[str, str, str, tuple]] = []  # label, sizes, why, (args, kwargs)
    if include_example:
        sets.append(("example", _fmt_sizes(examples, user_names), "", result.example))
    size_sets = default_size_sets(result) if sizes is None else [("", _resolve_sizes(result, s, examples, user_names))
                                                                 for s in sizes]
    for i, (why, s) in enumerate(size_sets):
        sets.append((f"sizes {i + 1}", _fmt_sizes(s, user_names), why, make_inputs(result, s, seed=i + 1)))
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
            got = runner.run(_tensor_leaves((args, kwargs)))
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
    return ValidationReport(checks)


def _eager(module, mutates: bool, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """Eager outputs on copies of the inputs (and of the module when it mutates its buffers), so
    every input set starts fresh."""
    feed_args, feed_kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (args, kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree notes on deepcopy
        run_module = copy.deepcopy(module) if mutates else module
    with torch.no_grad():
        return _tensor_leaves(run_module(*feed_args, **feed_kwargs))


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


def _resolve_sizes(result, sizes: dict, examples: dict, user_names: dict) -> dict:
    """``{dim name: size}`` -> ``{symbol: size}``, unnamed dims at their example size; names and
    ranges checked."""
    by_name = {v: k for k, v in user_names.items()}
    unknown = [k for k in sizes if k not in by_name]
    if unknown:
        raise ValidationError(f"sizes name {unknown}, which are not dynamic dimensions of the model",
                              hint=f"the model's dynamic dimensions are {sorted(by_name) or 'none'}")
    _, ranges, _ = _symbol_examples(result)
    out = dict(examples)
    for name, value in sizes.items():
        sym = by_name[name]
        lo, hi = ranges.get(sym, (0, 1 << 30))
        if not lo <= int(value) <= hi:
            raise ValidationError(f"size {value} for {name!r} is outside the range [{lo}, {hi}] the export allows",
                                  hint=f"choose {name} within [{lo}, {hi}] or widen the Dim's min/max at export")
        out[sym] = int(value)
    named = {user_names.get(k, str(k)): v for k, v in out.items()}
    broken = [g for g in result.constraints if not g.holds(named)]
    if broken:
        raise ValidationError(f"sizes {_fmt_sizes(out, user_names)} break the export's constraint "
                              f"{'; '.join(str(g) for g in broken)}",
                              hint="choose sizes that satisfy result.constraints (the export holds only there)")
    return out


def _fmt_sizes(sizes: dict, names: dict) -> str:
    return ", ".join(f"{names.get(k, k)}={v}" for k, v in sizes.items())
