"""Accuracy of a quantized model against eager PyTorch's float model, in the user's terms.

A quantized model is not expected to match float outputs to float32 tolerance; it is judged by
what the user reads from its outputs, with the tolerance the quantization states
(``result.quantization.tolerance``, ``onnxport.quantize.AccuracyTolerance``):

- a **classifier-like** output (``"classes"``: scores over its last axis, computed by a final
  projection ``MatMul``/``Gemm``, or named so by the user) by its **top-1 agreement**: the fraction
  of rows (every position of every input set) whose argmax equals eager's;
- a **hidden-state** output (``"hidden"``: any other float output) by its **cosine similarity** with
  eager's, row by row over the last axis, averaged per input set; the least set average is judged;
- an integer or bool output (``"exact"``) must equal eager's.

Each row also gives the largest absolute error against eager's float output. Input sets: the
example, one set at each default validation size (``default_size_sets``) and the user's ``inputs``.

For decoders, ``generation_agreement`` compares greedy decoding in onnxruntime with the model's own
``generate``: each step fed eager's tokens so far (teacher forcing), the fraction of steps whose
token is eager's is the **greedy-token agreement**; free decoding gives the first step where the
two sequences diverge.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import onnx
import torch
from torch.utils import _pytree as pytree

from onnxport.capture.inputs import dim_examples, dim_names, inputs_like_example
from onnxport.capture.patches import exclusive_capture
from onnxport.errors import ValidationError
from onnxport.verify.eager import UPDATED, run_eager
from onnxport.verify.runner import OrtRunner

# what lies between a final projection and a classifier-like output
_PASS_THROUGH = {"Reshape", "Squeeze", "Unsqueeze", "Identity", "Add", "Softmax", "LogSoftmax", "Cast", "Flatten"}
_PROJECTIONS = {"MatMul", "Gemm", "MatMulNBits", "DynamicQuantizeMatMul", "MatMulInteger", "QGemm", "QLinearMatMul"}
_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}


def output_kinds(proto: onnx.ModelProto, given: dict[str, str] | None = None) -> dict[str, str]:
    """Output name -> ``"classes"``, ``"hidden"`` or ``"exact"`` (module docstring); ``given``
    names win. An output is classifier-like when walking back from it through reshapes, casts,
    bias additions and softmax reaches a projection (``MatMul``, ``Gemm`` or their quantized
    forms) and its last axis is static and longer than 1."""
    given = dict(given or {})
    producer = {o: n for n in proto.graph.node for o in n.output}
    out = {}
    for vi in proto.graph.output:
        if vi.name in given:
            out[vi.name] = given[vi.name]
            continue
        t = vi.type.tensor_type
        if t.elem_type not in _FLOATS:
            out[vi.name] = "exact"
            continue
        dims = t.shape.dim
        last = dims[-1].dim_value if dims and dims[-1].HasField("dim_value") else 0
        node, kind = producer.get(vi.name), "hidden"
        while node is not None and last > 1:
            if node.op_type in _PROJECTIONS:
                kind = "classes"
                break
            if node.op_type not in _PASS_THROUGH:
                break
            node = producer.get(node.input[0])
        out[vi.name] = kind
    return out


def cosine_rows(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row (over the last axis) of two arrays of one shape; rows where
    both are zero count as 1."""
    e = expected.reshape(-1, expected.shape[-1] if expected.ndim else 1).astype(np.float64)
    g = got.reshape(e.shape).astype(np.float64)
    num = (e * g).sum(-1)
    den = np.linalg.norm(e, axis=-1) * np.linalg.norm(g, axis=-1)
    both_zero = (np.abs(e).sum(-1) == 0) & (np.abs(g).sum(-1) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return np.where(both_zero, 1.0, cos)


@dataclasses.dataclass(frozen=True)
class AccuracyCheck:
    """One output of one input set, quantized against eager's float output."""

    inputs: str  # "example", "sizes 2", "inputs 1"
    sizes: str
    output: str
    kind: str  # "classes", "hidden", "exact"
    shape: tuple
    max_abs: float
    cosine: float  # mean over rows of the last axis
    top1: float  # fraction of rows with eager's argmax (classes), NaN otherwise
    rows: int  # rows compared (for pooling top-1 over sets)
    note: str = ""


@dataclasses.dataclass(frozen=True)
class AccuracyReport:
    """Every output of every input set, and the verdict per output against the tolerance.

    ``ok``: every output meets the tolerance: pooled top-1 agreement >= ``top1`` for ``classes``
    outputs, the least set-mean cosine >= ``cosine`` for ``hidden`` ones, exact equality for
    ``exact`` ones."""

    checks: tuple[AccuracyCheck, ...]
    top1_min: float
    cosine_min: float
    quantization: str = ""

    def summary(self) -> dict[str, dict]:
        """Output name -> ``{"kind", "top1" (pooled), "cosine" (least set mean), "max_abs", "ok"}``."""
        out: dict[str, dict] = {}
        for c in self.checks:
            s = out.setdefault(c.output, {"kind": c.kind, "agree": 0.0, "rows": 0, "cosine": 1.0, "max_abs": 0.0,
                                          "failed": False})
            if c.note:
                s["failed"] = True
                continue
            s["agree"] += (c.top1 if not np.isnan(c.top1) else 0.0) * c.rows
            s["rows"] += c.rows
            s["cosine"] = min(s["cosine"], c.cosine)
            s["max_abs"] = max(s["max_abs"], c.max_abs)
        for s in out.values():
            agree = s.pop("agree")
            s["top1"] = agree / s["rows"] if s["rows"] and s["kind"] == "classes" else float("nan")
            if s["kind"] == "classes":
                s["ok"] = not s["failed"] and s["top1"] >= self.top1_min
            elif s["kind"] == "hidden":
                s["ok"] = not s["failed"] and s["cosine"] >= self.cosine_min
            else:
                s["ok"] = not s["failed"] and s["max_abs"] == 0.0
            s.pop("failed")
        return out

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(s["ok"] for s in self.summary().values())

    def to_dict(self) -> dict:
        return {"ok": self.ok, "tolerance": {"top1": self.top1_min, "cosine": self.cosine_min},
                "quantization": self.quantization, "outputs": self.summary(),
                "checks": [dataclasses.asdict(c) for c in self.checks]}

    def __str__(self) -> str:
        head = ("inputs", "sizes", "output", "kind", "shape", "max abs", "cosine", "top-1", "note")
        rows = [head] + [(c.inputs, c.sizes, c.output, c.kind, "x".join(map(str, c.shape)) or "()", f"{c.max_abs:.2e}",
                          f"{c.cosine:.5f}", "-" if np.isnan(c.top1) else f"{c.top1:.4f}", c.note) for c in self.checks]
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
        lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        if self.quantization:
            lines.insert(0, f"quantization: {self.quantization}")
        for name, s in self.summary().items():
            measure = (f"top-1 agreement {s['top1']:.4f} (>= {self.top1_min:g})" if s["kind"] == "classes" else
                       f"cosine {s['cosine']:.5f} (>= {self.cosine_min:g})" if s["kind"] == "hidden" else
                       "exact" if s["ok"] else "differs")
            lines.append(f"{name}: {measure}, max abs {s['max_abs']:.2e}: {'ok' if s['ok'] else 'FAIL'}")
        lines.append("accuracy within tolerance" if self.ok else "ACCURACY BELOW TOLERANCE")
        return "\n".join(lines)

    __repr__ = __str__


def _leaves(x: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def _sets(result, inputs: Any, sizes: Any, include_example: bool = True) -> list[tuple[str, str, tuple]]:
    """``(label, sizes text, (args, kwargs))``: the example (unless not ``include_example``), the
    default sizes (or ``sizes``), ``inputs``."""
    from onnxport.capture.inputs import as_input_set
    from onnxport.verify.validate import default_size_sets

    out = [("example", "", result.example)] if include_example else []
    if result.captured is not None:
        names = dim_names(result.captured, result.dim_names)
        examples, _ = dim_examples(result.captured, names)
        size_sets = default_size_sets(result) if sizes is None else [("given sizes", {**examples, **s}) for s in sizes]
        for i, (_, s) in enumerate(size_sets):
            made = inputs_like_example(result.captured, names, s, seed=i + 1)
            out.append((f"sizes {i + 1}", ", ".join(f"{k}={v}" for k, v in s.items()), made))
    for i, extra in enumerate(inputs or []):
        out.append((f"inputs {i + 1}", "", as_input_set(extra)))
    return out


def compare_output(name: str, kind: str, expected: torch.Tensor, got: np.ndarray, label: str,
                   sizes: str) -> AccuracyCheck:
    """One ``AccuracyCheck``: max abs error, cosine by rows, top-1 agreement for ``classes``."""
    e = expected.detach().float().numpy() if expected.is_floating_point() else expected.detach().numpy()
    shape = tuple(expected.shape)
    if tuple(got.shape) != shape:
        return AccuracyCheck(label, sizes, name, kind, shape, float("nan"), float("nan"), float("nan"), 0,
                             f"shape {tuple(got.shape)} != {shape}")
    if e.size == 0:
        return AccuracyCheck(label, sizes, name, kind, shape, 0.0, 1.0, float("nan") if kind != "classes" else 1.0, 0)
    diff = np.abs(e.astype(np.float64) - got.astype(np.float64))
    max_abs = float(np.nanmax(diff)) if diff.size else 0.0
    if kind == "exact":
        return AccuracyCheck(label, sizes, name, kind, shape, max_abs, float("nan"), float("nan"), int(e.size))
    cos = cosine_rows(e, got)
    top1, rows = float("nan"), int(cos.size)
    if kind == "classes":
        agree = e.reshape(-1, e.shape[-1]).argmax(-1) == got.reshape(-1, e.shape[-1]).argmax(-1)
        top1 = float(agree.mean())
    note = "" if np.isfinite(max_abs) else "non-finite values"
    return AccuracyCheck(label, sizes, name, kind, shape, max_abs, float(cos.mean()), top1, rows, note)


def validate_quantized(result, inputs: Any = None, sizes: Any = None, include_example: bool = True) -> AccuracyReport:
    """Compare the quantized ``result`` (its ``quantization`` set) with eager PyTorch's float model.

    Args:
        result: a quantized ``ExportResult`` with its module (or program) and example.
        inputs: extra input sets (each ``(args, kwargs)``, an args tuple or a tensor): real data
            makes agreement mean most.
        sizes: size assignments ``{dim name: size}`` instead of the default validation sizes.
        include_example: compare on the example inputs too (not for a model whose runtime form
            refuses them: ``onnxport.targets.genai_cpu.check_sizes``).

    Returns an ``AccuracyReport`` judged by ``result.quantization.tolerance``. Raises
    ``ValidationError`` when onnxruntime cannot load the model or an input set is malformed.
    """
    q = result.quantization
    module = result.module if result.module is not None else result.program.module()
    proto = result.model_proto
    kinds = {**output_kinds(proto), **dict(getattr(q, "kinds", ()) or ())}  # the quantization's reading first
    checks = []
    with exclusive_capture():
        runner = OrtRunner(proto)
        users = [n for n in runner.output_names if not n.endswith(UPDATED)]
        for label, sizes_text, (args, kwargs) in _sets(result, inputs, sizes, include_example):
            try:
                expected, _ = run_eager(module, False, args, kwargs, runner.input_names, [])
                got = runner.run(_leaves((args, kwargs)))
            except Exception as e:  # noqa: BLE001 - a set either side refuses is reported, not raised
                for name in users:
                    checks.append(AccuracyCheck(label, sizes_text, name, kinds.get(name, "hidden"), (), float("nan"),
                                                float("nan"), float("nan"), 0, f"failed: {type(e).__name__}: "
                                                f"{str(e).splitlines()[0][:120] if str(e) else ''}"))
                continue
            by_name = dict(zip(runner.output_names, got))
            for name, e in zip(users, expected):
                checks.append(compare_output(name, kinds.get(name, "hidden"), e, by_name[name], label, sizes_text))
    tol = q.tolerance
    return AccuracyReport(tuple(checks), tol.top1, tol.cosine, str(q))


@dataclasses.dataclass(frozen=True)
class GenerationAgreement:
    """Greedy decoding of a quantized decoder against the model's own ``generate``.

    Attributes:
        expected: eager's tokens ``[batch][step]``.
        free: the tokens the quantized model chose decoding on its own.
        forced: the token the quantized model chose at each step when fed eager's tokens so far.
        agreement: the fraction of (row, step) where ``forced`` equals ``expected``.
        first_divergence: the first step where ``free`` differs from ``expected``, or None.
        tolerance: the least agreement that passes.
    """

    expected: tuple
    free: tuple
    forced: tuple
    agreement: float
    first_divergence: int | None
    tolerance: float

    @property
    def ok(self) -> bool:
        return bool(self.expected and self.expected[0]) and self.agreement >= self.tolerance

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"ok": self.ok}

    def __str__(self) -> str:
        head = ("step", "generate", "quantized (fed generate's tokens)", "quantized (free)", "")
        rows = [head]
        steps = len(self.expected[0]) if self.expected else 0
        for t in range(steps):
            exp = [r[t] if t < len(r) else "-" for r in self.expected]
            forced = [r[t] if t < len(r) else "-" for r in self.forced]
            free = [r[t] if t < len(r) else "-" for r in self.free]
            rows.append((str(t), str(exp), str(forced), str(free), "" if forced == exp else "differs"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"greedy-token agreement {self.agreement:.4f} (>= {self.tolerance:g}); first divergence of free "
                     f"decoding: {'none' if self.first_divergence is None else f'step {self.first_divergence}'}")
        lines.append("agreement within tolerance" if self.ok else "AGREEMENT BELOW TOLERANCE")
        return "\n".join(lines)

    __repr__ = __str__


def generation_agreement(model: torch.nn.Module, decoder: Any, prompt_ids: Any, *, attention_mask: Any = None,
                         max_new_tokens: int = 16, tolerance: float = 0.99) -> GenerationAgreement:
    """Greedy-token agreement of a quantized decoder (exported with its cache as inputs and
    outputs, ``onnxport.verify.decoding``) with ``model``'s own greedy ``generate`` over
    ``max_new_tokens`` tokens (module docstring).

    Args:
        model: the transformers model in eval mode; decoder: the quantized model (proto or path).
        prompt_ids: int64 ``[batch, prompt]``; attention_mask: ``[batch, prompt]`` (left padding), ones when None.
        tolerance: the least agreement that passes (``AccuracyTolerance.tokens``).

    Raises ``ValidationError`` as ``check_generation`` does (no generate, not a decoder's layout).
    """
    from onnxport.verify.decoding import greedy
    from onnxport.verify.generation import reference

    if prompt_ids is None:
        raise ValidationError("the decoding check needs prompt_ids", hint="pass prompt_ids=torch.tensor([[...]])")
    prompt = torch.as_tensor(prompt_ids)
    mask = torch.ones_like(prompt) if attention_mask is None else torch.as_tensor(attention_mask)
    expected, _, ids = reference(model, max_new_tokens, {"input_ids": prompt, "attention_mask": mask})
    runner = OrtRunner(decoder)
    free = greedy(runner, prompt.numpy(), max_new_tokens, mask=mask.numpy(), eos=ids["eos"], pad=ids["pad"]).tokens
    forced = greedy(runner, prompt.numpy(), max_new_tokens, mask=mask.numpy(), eos=ids["eos"], pad=ids["pad"],
                    forced=expected).tokens
    steps = min(expected.shape[1], forced.shape[1])
    agreement = float((expected[:, :steps] == forced[:, :steps]).mean()) if steps else 0.0
    first = None
    for t in range(max(expected.shape[1], free.shape[1])):
        if t >= expected.shape[1] or t >= free.shape[1] or not np.array_equal(expected[:, t], free[:, t]):
            first = t
            break

    def rows(a):
        return tuple(tuple(int(v) for v in r) for r in a)

    return GenerationAgreement(rows(expected), rows(free), rows(forced), agreement, first, tolerance)
