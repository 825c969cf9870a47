"""What validation reports: one ``Check`` per output and input set, gathered in a ``ValidationReport``,
printed as a table of at most 100 columns with a legend under it (the sets, the columns, the notes)."""

from __future__ import annotations

import dataclasses
import math
import textwrap

from onnxport.verify.float64_bound import CEILING, FLOOR, K
from onnxport.verify.sizes import SIZE_ONE


EAGER_FAILED = "eager PyTorch failed on these inputs"  # the note of a check whose inputs eager refused
FLOAT64 = "float64 reference"  # Check.basis of an output judged against the float64 reference
EXACT = "exact"  # Check.basis of integers and bools: equal or wrong


@dataclasses.dataclass(frozen=True)
class Check:
    """One output compared on one input set."""

    inputs: str  # label of the input set ("example", "sizes 2", "inputs 1")
    sizes: str  # "batch=3, time=17"
    output: str
    shape: tuple
    max_abs: float  # max |onnx - eager| (NaN when not compared)
    max_rel: float  # max_abs / scale (integers: max_abs)
    ok: bool
    note: str = ""
    why: str = ""  # why these sizes: "minimum", "above the example", "kept guard (time // 4) != 1"
    rejected: bool = False  # not compared: eager PyTorch refused these generated inputs, or no answer is defined
    scale: float = float("nan")  # the output's largest magnitude (float64 reference, else eager)
    eager_vs_float64: float = float("nan")  # max |eager float32 - float64 reference| / scale
    onnx_vs_float64: float = float("nan")  # max |onnx - float64 reference| / scale
    limit: float = float("nan")  # the largest onnx_vs_float64 that passes (verify.float64_bound)
    moved: bool = False  # eager_vs_float64 from eager float32 on the inputs moved by one ulp
    basis: str = ""  # FLOAT64, EXACT, or why a dtype tolerance judged the output

    @property
    def eager_refused(self) -> bool:
        """Not compared because eager PyTorch raised on these generated inputs."""
        return self.rejected and self.note.startswith(EAGER_FAILED)


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """Every comparison made; ``ok`` is True when at least one comparison ran and every comparison
    passed (generated inputs eager PyTorch itself rejects, listed in ``rejected``, and outputs with
    no defined answer are in ``not_compared``, not failures). ``runtime``: what ran the ONNX model
    (``verify.runtimes``: ``"onnxruntime"``, ``"OpenVINO 2026.4.1"``...), named in the table's first
    line when it is not onnxruntime, and in the line saying it failed."""

    checks: tuple[Check, ...]
    runtime: str = "onnxruntime"

    @property
    def ok(self) -> bool:
        compared = [c for c in self.checks if not c.rejected]
        return bool(compared) and all(c.ok for c in compared)

    @property
    def rejected(self) -> list[Check]:
        """Generated input sets eager PyTorch refused (the model does not take them)."""
        return [c for c in self.checks if c.eager_refused]

    @property
    def not_compared(self) -> list[Check]:
        """Every check not compared: the sets eager refused, NaN/inf sets where eager's outputs are
        not finite, indices chosen among equal values."""
        return [c for c in self.checks if c.rejected]

    @property
    def max_abs(self) -> float:
        vals = [c.max_abs for c in self.checks if not math.isnan(c.max_abs)]
        return max(vals) if vals else float("nan")

    def to_dict(self) -> dict:
        return {"ok": self.ok, "runtime": self.runtime, "checks": [dataclasses.asdict(c) for c in self.checks]}

    def __str__(self) -> str:
        if self.runtime == "onnxruntime":
            return render(self.checks)
        failed = [c for c in self.checks if not c.ok and not c.rejected]
        head = f"ONNX model run by {self.runtime}, against eager PyTorch"
        if failed:
            head += (f"\nFAILED in {self.runtime}: {len(failed)} of {len(self.checks)} checks differ from eager "
                     f"PyTorch (the ONNX model as {self.runtime} computes it)")
        return head + "\n" + render(self.checks)

    __repr__ = __str__


WIDTH = 100  # columns the table and its legend fit in
HEAD = ("set", "output", "shape", "scale", "ONNX-eager", "eager-f64", "ONNX-f64", "limit", "pass")


def render(checks: tuple[Check, ...]) -> str:
    """The table of ``checks`` (one row per output and input set, at most ``WIDTH`` columns), then
    a legend: each set's sizes and why it was chosen, what the columns mean, the notes."""
    notes: dict[str, int] = {}

    def mark(text: str) -> str:
        return f"[{notes.setdefault(text, len(notes) + 1)}]"

    rows = [HEAD] + [_row(c, mark) for c in checks]
    widths = _fit([max(len(r[i]) for r in rows) for i in range(len(HEAD))])
    lines = ["  ".join(_elide(v, w).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += _legend(checks, notes)
    shortened = {_elide(c.output, widths[1]): c.output for c in checks if len(c.output) > widths[1]}
    if shortened:
        lines += _wrap("outputs shortened: " + "; ".join(f"{k} = {v}" for k, v in shortened.items()), 4)
    failed = [c for c in checks if not c.ok and not c.rejected]
    if failed and all(at_one(c.sizes or "") for c in failed):
        lines += _wrap("note: only sets with a size of 1 fail: torch.export traces a model assuming dynamic sizes >= 2 "
                       "(its 0/1 specialization) unless an example has size 1; export with an example of size 1 on "
                       "those dims, or declare Dim(name, min=2)")
    return "\n".join(lines)


def _row(c: Check, mark) -> tuple[str, ...]:
    floats = c.basis != EXACT and not math.isnan(c.scale)
    scale = f"{c.scale:.2e}" if floats else "-"
    if math.isnan(c.max_abs):
        error = "-"
    else:
        error = f"{c.max_rel:.1e}" if floats else f"{c.max_abs:g}"
    eager = "-" if math.isnan(c.eager_vs_float64) else f"{c.eager_vs_float64:.1e}" + ("*" if c.moved else "")
    onnx = "-" if math.isnan(c.onnx_vs_float64) else f"{c.onnx_vs_float64:.1e}"
    limit = f"{c.limit:.1e}" if c.basis == FLOAT64 else "exact" if c.basis == EXACT else "dtype" if c.basis else "-"
    verdict = "skip" if c.rejected else "ok" if c.ok else "FAIL"
    note = f"eager rejects these inputs, not counted as a failure: {c.note}" if c.eager_refused else c.note
    marks = [mark(note)] if note else []
    if c.basis not in ("", FLOAT64, EXACT):
        marks.append(mark(c.basis))
    return (c.inputs, c.output, "x".join(map(str, c.shape)) or "()", scale, error, eager, onnx, limit,
            " ".join([verdict] + marks))


def _legend(checks: tuple[Check, ...], notes: dict[str, int]) -> list[str]:
    """The lines under the table: the sets, the columns, the notes."""
    sets: dict[str, str] = {}
    for c in checks:
        if c.inputs not in sets:
            why = _marked(c)
            sets[c.inputs] = f"{c.sizes} ({why})" if c.sizes and why else c.sizes or why
    label = max((len(k) for k in sets), default=0)
    lines = [""]
    for name, text in sets.items():
        lines += _wrap(f"{name.ljust(label)}  {text}", indent=label + 2)
    if any(c.basis == FLOAT64 for c in checks):
        lines += _wrap(f"errors: largest |difference| over the output / its scale (largest |value|); f64: eager "
                       f"PyTorch in float64; pass: ONNX-f64 <= limit = {K:g} x eager-f64 + {FLOOR:g}, at most "
                       f"{CEILING:g}; *: eager float32 on the inputs moved by one ulp")
    elif any(c.basis not in ("", EXACT) for c in checks):
        lines += _wrap("errors: largest |ONNX - eager| over the output / scale (its largest |value|)")
    for text, number in notes.items():
        lines += _wrap(f"[{number}] {text}", indent=len(f"[{number}] "))
    return lines


def at_one(sizes: str) -> list[str]:
    """The dims a set's ``sizes`` text holds at 1 (``batch=1, time=7`` -> ``['batch']``)."""
    return [k for k, _, v in (part.partition("=") for part in sizes.split(", ")) if v == "1"]


def _marked(c: Check) -> str:
    """``c.why`` naming the dims at size 1 (``minimum; size 1: batch, time``): torch.export traces sizes
    from 2 on, so those are the rows where a decision on size 1 shows."""
    ones = at_one(c.sizes or "")
    if not ones or SIZE_ONE in c.why:
        return c.why
    return f"{c.why}; {SIZE_ONE}{', '.join(ones)}" if c.why else SIZE_ONE + ", ".join(ones)


def _fit(widths: list[int]) -> list[int]:
    """Column widths within ``WIDTH``: the output column, then the set column, shortened (to no
    fewer than 8 characters, the middle elided) until the rows fit."""
    widths = list(widths)
    for i in (1, 0):
        over = sum(widths) + 2 * (len(widths) - 1) - WIDTH
        if over > 0:
            widths[i] = max(8, widths[i] - over)
    return widths


def _elide(text: str, width: int) -> str:
    """``text`` cut to ``width`` with ``..`` in the middle."""
    if len(text) <= width:
        return text
    head = (width - 2 + 1) // 2
    return text[:head] + ".." + text[len(text) - (width - 2 - head):]


def _wrap(text: str, indent: int = 0) -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent=" " * indent, break_on_hyphens=False) or [""]
