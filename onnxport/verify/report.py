"""What validation reports: one ``Check`` per output and input set, gathered in a ``ValidationReport``."""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class Check:
    """One output compared on one input set."""

    inputs: str  # label of the input set ("example", "sizes 2", "inputs 1")
    sizes: str  # "batch=3, time=17"
    output: str
    shape: tuple
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""
    why: str = ""  # why these sizes: "minimum", "above the example", "kept guard (time // 4) != 1"
    rejected: bool = False  # eager PyTorch refused these generated sizes: reported, not compared


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """Every comparison made; ``ok`` is True when at least one comparison ran and every comparison
    passed (generated sizes eager PyTorch itself rejects are listed in ``rejected``, not failures)."""

    checks: tuple[Check, ...]

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
