"""A branch on a size whose other side eager PyTorch refuses is a condition the model needs.

CLIP's text embeddings check ``if seq_length > max_position_embedding: raise ValueError(...)``;
the trace follows the side that runs, and the sizes the other side takes (``seq >= 78``) are sizes
eager PyTorch refuses: no correct model exists there, so the export holds where the model runs and
says so (the range is adopted and stated, as any condition the model needs) instead of refusing the
branch. The other side is known to refuse when the model raises (on fake tensors, confirmed in eager
PyTorch up to ``EAGER_GROWTH`` times the example: ``guards.probe.refusal_at``), inside the ``if`` itself, at
every size the branch error lists as excluded (each dynamic dim at its example size but the
excluded one); where it runs at one of them, or refuses elsewhere, the branch error stands (the
trace would hold on one side of a branch both sides of which compute).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Any

import torch

from onnxport.capture.captured import Captured, user_placeholders
from onnxport.capture.guards.events import size_vars
from onnxport.capture.guards.probe import EAGER_GROWTH, eager_refusal_on, refusal_at
from onnxport.capture.inputs import dim_examples, dim_names, inputs_like_example
from onnxport.capture.meta_weights import has_meta_weights


_WHERE = re.compile(r"^(.*):(\d+) in ")


def _statement_lines(where: str | None) -> tuple[str, int, int] | None:
    """``(file, first line, last line)`` of the statement starting at ``where`` (``file:line in
    func: code``), or None when its source cannot be read."""
    match = _WHERE.match(where or "")
    if match is None:
        return None
    path, line = match.group(1), int(match.group(2))
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While)) and node.lineno == line:
            return path, node.lineno, node.end_lineno
    return None


def _dims(captured: Captured) -> tuple[dict, dict[str, int]]:
    """torch's symbol -> dim name of ``captured``'s declared dims, and dim name -> the example's size."""
    declared = size_vars(user_placeholders(captured.program), captured.input_names, captured.declared, {})
    names = dim_names(captured, {sym: var.name for sym, var in declared.items()})
    return names, dim_examples(captured, names)[0]


def other_side_refused(model: torch.nn.Module, captured: Captured, excluded: tuple,
                       branch: str | None) -> tuple[str | None, str] | None:
    """``(line, error)`` of eager PyTorch's refusal at the first of the ``excluded`` sizes (each a
    ``{dim name: size}``) when it refuses every one of them inside the ``branch`` statement (an
    ``if`` whose other side raises; a refusal elsewhere, a convolution too short for its kernel,
    says nothing of the branch); None when it runs at one, refuses elsewhere, or when eager
    PyTorch cannot be asked (weights on the meta device, no excluded size)."""
    span = _statement_lines(branch)
    if not excluded or span is None or has_meta_weights(model):
        return None
    names, examples = _dims(captured)
    first = None
    for sizes in excluded:
        refusal = refusal_at(model, captured, names, examples, sizes, confirm=True)
        at = _WHERE.match(refusal[0] or "") if refusal is not None else None
        if at is None or at.group(1) != span[0] or not span[1] <= int(at.group(2)) <= span[2]:
            return None
        first = first or refusal
    return first


def without_branch(events: tuple, branch: str, far: Any = None, needed: bool = False) -> tuple:
    """``events`` with ``branch`` no longer read as the user's branch (a condition the model needs), and
    read as the far bound ``far`` sets where given (``guards.far_bounds.FarBound``); ``needed``: marked as
    the model's own condition, never one torch chose among equivalent traces (``GuardEvent.needed``)."""
    return tuple(dataclasses.replace(e, branch=None, far=far, needed=needed or e.needed) if e.branch == branch
                 else e for e in events)


EAGER_TRIES = 3  # excluded size assignments a condition's probe runs in eager PyTorch


def eager_runs_at(model: torch.nn.Module, captured: Captured, excluded: tuple) -> tuple[dict, ...] | None:
    """The first ``EAGER_TRIES`` of the ``excluded`` sizes (each ``{dim name: size}``, the other dims at the
    example's sizes) where eager PyTorch runs ``model`` at every one of them: a condition torch.export's
    trace states that the model itself does not have there (a slice clamped at a bound the trace decided, a
    size check of the trace only). None where eager PyTorch refuses one (``x[:, ::2] + x[:, 1::2]`` runs at
    ``time = 1, 3`` and refuses 5: the condition is the model's), or cannot be asked (weights on the meta
    device, inputs not made at those sizes, a dim beyond ``EAGER_GROWTH`` times its example)."""
    if not excluded or has_meta_weights(model):
        return None
    names, examples = _dims(captured)
    tries = tuple(dict(sizes) for sizes in excluded[:EAGER_TRIES])
    for sizes in tries:
        if any(v > EAGER_GROWTH * max(examples.get(n, 1), 1) for n, v in sizes.items()):
            return None
        try:
            args, kwargs = inputs_like_example(captured, names, {**examples, **sizes}, seed=0)
        except Exception:  # noqa: BLE001 - inputs cannot be made at these sizes: nothing to learn
            return None
        if eager_refusal_on(model, captured, args, kwargs) is not None:
            return None
    return tries
