"""Decomposition of the ops that have no translation, to core ATen."""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

def decompose(program: torch.export.ExportedProgram, has_translation: Callable[[Any], Any],
              hooks: Callable[[], Any] = contextlib.nullcontext) -> torch.export.ExportedProgram:
    """Decompose to core ATen only the ops without a translation (all of a graph's ops, nested
    bodies included). A program whose every op translates directly is returned unchanged.

    Args:
        program: the captured program.
        has_translation: ``overload -> translation or None`` (``Registry.lookup``).
        hooks: ``() -> context manager`` entered around the decomposition (``Registry.capture_hooks``:
            the ops kept whole during capture stay whole here).
    """
    missing = set()

    def visit(gm: torch.fx.GraphModule) -> None:
        for node in gm.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                if has_translation(node.target) is None:
                    missing.add(node.target)
            if node.op == "get_attr":
                sub = getattr(gm, node.target, None)
                if isinstance(sub, torch.fx.GraphModule):
                    visit(sub)

    visit(program.graph_module)
    if not missing:
        return program
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if has_translation(op) is not None:
            table.pop(op)
    with hooks():
        return program.run_decompositions(table)
