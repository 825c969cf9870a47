"""What the streaming check reports (``verify.stream``): one ``Check`` per stream, step and output,
gathered in a ``StreamReport`` and printed as one row per stream and output with its error at each
step, the failing rows after it in ``validate``'s table (``verify.report.render``)."""

from __future__ import annotations

import dataclasses
import math
import textwrap

from onnxport.verify.report import EXACT, FLOAT64, WIDTH, Check, ValidationReport, render


@dataclasses.dataclass(frozen=True)
class StreamReport:
    """What ``check_stream`` compared: one ``Check`` per stream, step and output.

    Attributes:
        checks: the rows; ``inputs`` is ``"stream k step t"``, ``sizes`` the stream's sizes
            (``"batch=2, chunk=4"``), ``why`` why those sizes.
        streams: ``(label, sizes text, why)`` of each stream, in order.
        steps: steps per stream.
        states: ``(output, input)`` name pairs fed back.
    """

    checks: tuple[Check, ...]
    streams: tuple[tuple[str, str, str], ...]
    steps: int
    states: tuple[tuple[str, str], ...]

    @property
    def ok(self) -> bool:
        """At least one comparison ran and every one passed."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def per_step(self) -> dict[tuple[str, str], list[float]]:
        """``{(stream label, output): [error of step 0, step 1, ...]}``: the largest error over the output
        (relative to its scale for floats, absolute for integers and bools; NaN where not compared)."""
        out: dict[tuple[str, str], list[float]] = {}
        for c in self.checks:
            stream, step = _split(c.inputs)
            if c.output == "*":
                continue
            row = out.setdefault((stream, c.output), [float("nan")] * self.steps)
            row[step] = _error(c)
        return out

    @property
    def first_failure(self) -> Check | None:
        """The first failing check (its stream's earliest step), or None."""
        failed = [c for c in self.checks if not c.ok]
        return min(failed, key=lambda c: (_split(c.inputs)[1], _split(c.inputs)[0])) if failed else None

    @property
    def validation(self) -> ValidationReport:
        """The checks as a ``ValidationReport`` (its table has one row per stream, step and output)."""
        return ValidationReport(self.checks)

    def to_dict(self) -> dict:
        """The report as plain data, for JSON."""
        return {"ok": self.ok, "steps": self.steps, "states": [list(p) for p in self.states],
                "streams": [list(s) for s in self.streams], "checks": [dataclasses.asdict(c) for c in self.checks]}

    def __str__(self) -> str:
        return render_stream(self)

    __repr__ = __str__


def render_stream(report: StreamReport) -> str:
    """One row per stream and output: its shape at the last step, its error at each step, the
    verdict; under it the streams' sizes, how outputs were judged, the notes (the failing rows of
    ``validate``'s table, ``verify.report.render``, when some step failed)."""
    head = ("stream", "output", "shape") + tuple(f"step {t}" for t in range(report.steps)) + ("pass",)
    rows, notes = [head], {}
    by_stream: dict[tuple[str, str], list[Check]] = {}
    for c in report.checks:
        by_stream.setdefault((_split(c.inputs)[0], c.output), []).append(c)
    for (stream, output), checks in by_stream.items():
        errors = ["-"] * report.steps
        for c in checks:
            e = _error(c)
            errors[_split(c.inputs)[1]] = "-" if math.isnan(e) else f"{e:.1e}" if _floats(c) else f"{e:g}"
        bad = [c for c in checks if not c.ok]
        verdict = "ok"
        if bad:
            step = _split(bad[0].inputs)[1]
            text = f"step {step}: {bad[0].note}" if bad[0].note else f"from step {step}"
            verdict = f"FAIL [{notes.setdefault(text, len(notes) + 1)}]"
        rows.append((stream.removeprefix("stream "), output, "x".join(map(str, checks[-1].shape)) or "()",
                     *errors, verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    for label, sizes, why in report.streams:
        lines.append(f"stream {label.removeprefix('stream ')}: {sizes} ({why})" if sizes else f"{label}: {why}")
    legend = [f"states fed back: {', '.join(f'{o} -> {i}' for o, i in report.states)}"]
    bases = {c.basis for c in report.checks if c.basis}
    legend.append("errors: largest |ONNX - eager| over the output / its scale (integers: absolute); shape: at the "
                  "last step" + ("; judged against eager PyTorch streaming in float64 from its own float64 states"
                                 if FLOAT64 in bases else ""))
    legend += [f"some outputs: {basis}" for basis in sorted(bases - {FLOAT64, EXACT})]
    legend += [f"[{number}] {text}" for text, number in notes.items()]
    for text in legend:
        lines += textwrap.wrap(text, WIDTH, subsequent_indent="    ", break_on_hyphens=False)
    if report.first_failure is not None:
        lines += ["", "failing steps:", render(tuple(c for c in report.checks if not c.ok))]
    lines.append("stream matches" if report.ok else "STREAM MISMATCH")
    return "\n".join(lines)


def _split(label: str) -> tuple[str, int]:
    """``"stream 2 step 3"`` -> ``("stream 2", 3)``."""
    stream, _, step = label.rpartition(" step ")
    return stream, int(step)


def _floats(c: Check) -> bool:
    return c.basis != EXACT and not math.isnan(c.scale)


def _error(c: Check) -> float:
    return c.max_rel if _floats(c) else c.max_abs
