"""Why an export differs from eager PyTorch when the traced program itself does.

torch.export records the path the model's code takes while it is traced. Some code takes another
path when not traced: a branch on ``torch.compiler.is_compiling()`` or on a tracing check, an
attention mask skipped only in eager (transformers' SDPA shortcut: a model whose attention modules
are not causal while its mask builder is, such as PaliGemma's Gemma without ``token_type_ids``, is
bidirectional in eager and causal as traced). The ONNX model then computes the traced program, and
validation rightly says it differs from eager; ``traced_path_notes`` says why on the failed rows:
it runs the exported program (``ExportedProgram.module()``) on a failed set and, where the program
differs from eager PyTorch too, notes it with what to do.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch.utils import _pytree as pytree

from onnxport.verify.compare import compare, to_numpy
from onnxport.verify.report import Check

SETS_RUN = 2  # failed input sets the program is run on (each one more eager and program run)


def traced_path_notes(checks: list[Check], program: Any, module: torch.nn.Module,
                      sets: list[tuple[str, Any, str, str, tuple]]) -> list[Check]:
    """``checks`` with each failed check of a set where the exported ``program`` differs from eager
    ``module`` noted so (module docstring); the others unchanged.

    Args:
        checks: the validation's rows (``verify.report.Check``).
        program: the ``torch.export.ExportedProgram`` the ONNX model was translated from (None: no
            note); a program that updates buffers or inputs is not run (it would change them).
        module: the eager model.
        sets: ``(label, sizes, why, value kind, (args, kwargs))`` of every compared set.
    """
    failed = list(dict.fromkeys(c.inputs for c in checks if not c.ok and not c.rejected))
    if not failed or program is None or not _pure(program):
        return checks
    inputs = {label: pair for label, *_, pair in sets}
    try:
        run = program.module()  # made once for the sets run
    except Exception:  # noqa: BLE001 - no diagnosis where the program cannot run
        return checks
    notes = {}
    for label in failed[:SETS_RUN]:
        if label in inputs:
            note = _differs(run, module, *inputs[label])
            if note:
                notes[label] = note
    return [dataclasses.replace(c, note=f"{c.note}; {notes[c.inputs]}" if c.note else notes[c.inputs])
            if c.inputs in notes and not c.ok and not c.rejected else c for c in checks]


def _pure(program: Any) -> bool:
    """The program only returns values: it updates no buffer nor input."""
    return all(s.kind.name == "USER_OUTPUT" for s in program.graph_signature.output_specs)


def _differs(program: torch.nn.Module, module: torch.nn.Module, args: tuple, kwargs: dict) -> str | None:
    """The note for one set where the program's outputs (``program``: ``ExportedProgram.module()``)
    differ from eager's; None where they agree or where either cannot run (the failure is then the
    export's own to explain)."""
    copied = pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, (args, kwargs))
    try:
        with torch.no_grad():
            eager = [t for t in pytree.tree_leaves(module(*args, **kwargs)) if isinstance(t, torch.Tensor)]
            traced = [t for t in pytree.tree_leaves(program(*copied[0], **copied[1]))
                      if isinstance(t, torch.Tensor)]
    except Exception:  # noqa: BLE001 - no diagnosis where either cannot run
        return None
    if len(eager) != len(traced):
        return None
    worst = 0.0
    for e, t in zip(eager, traced):
        max_abs, _, ok, _ = compare(to_numpy(e), to_numpy(t), e.dtype, peak=1.0)
        if not ok:
            worst = max(worst, max_abs if not math.isnan(max_abs) else math.inf)
    if not worst:
        return None
    return (f"torch.export's program of the model differs from eager PyTorch on these inputs too (max |difference| "
            f"{worst:.2g}): the model's code takes another path when traced (a branch on "
            "torch.compiler.is_compiling() or on tracing; an attention mask eager skips), and the ONNX model computes "
            "the traced path; make the model take one path (its eager attention implementation, or the inputs its "
            "preprocessing gives), or compare with the model run as traced")
