"""transformers' Mamba2 chunked scan, captured with its padding cut at every length.

``mamba2_chunk_scan`` (Mamba2, and the copies Bamba, FalconH1, GraniteMoeHybrid, NemotronH and
Zamba2 hold) pads the sequence to a whole number of chunks, ``pad_size = (chunk_size - seq %
chunk_size) % chunk_size``, runs the chunked state-space dual form, then cuts the padding off with
``if pad_size > 0: output = output[:, :sequence_length]``. torch.export cannot keep that ``if``
on a symbolic length (it would hold for one residue of ``seq`` only). The output has
``sequence_length + pad_size`` rows, so where ``pad_size == 0`` the slice takes every row: the
slice alone is the same function at every length. ``UNCONDITIONAL_PADDING_CUT`` (a registered
capture patch) gives each loaded transformers module holding the function a version compiled from
transformers' own source with that ``if`` replaced by its body (the same lines, the same file, so
errors name transformers' code); the kernel-hub dispatcher around it, which on CPU calls the same
function, is not called while tracing. Eager execution outside the trace is unchanged, and a
version of transformers whose source does not have that exact statement is left as it is.

Semantics: transformers' ``models/mamba2/modeling_mamba2.py`` (``mamba2_chunk_scan``,
``reshape_into_chunks``); Dao & Gu, "Transformers are SSMs" (2024), the chunked SSD algorithm.
"""

from __future__ import annotations

import ast
import sys
from typing import Callable

from onnxport.capture.patches import Patch, SetAttribute, always, register
from onnxport.capture.source_variants import replace_statement, source_variant

FUNCTION = "mamba2_chunk_scan"


def _is_padding_cut(node: ast.stmt) -> bool:
    """``if pad_size > 0: output = output[:, :sequence_length]`` (nothing else, no ``else``)."""
    if not (isinstance(node, ast.If) and not node.orelse and len(node.body) == 1):
        return False
    if ast.unparse(node.test) != "pad_size > 0":
        return False
    return ast.unparse(node.body[0]) == "output = output[:, :sequence_length]"


def _cut_always(func: ast.FunctionDef) -> bool:
    return func.name == FUNCTION and replace_statement(func.body, _is_padding_cut, lambda node: node.body)


def unconditional_cut(fn: Callable) -> Callable | None:
    """``fn`` (transformers' ``mamba2_chunk_scan``, possibly wrapped by a kernel dispatcher) compiled
    from its source with ``if pad_size > 0:`` around the padding cut replaced by the cut itself, in
    ``fn``'s module globals; None when its source is not available or has no such statement."""
    return source_variant(fn, _cut_always)


def _changes() -> list:
    changes = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("transformers.models.") or module is None:
            continue
        original = vars(module).get(FUNCTION)
        if callable(original) and unconditional_cut(original) is not None:
            changes.append(SetAttribute(module, FUNCTION, lambda o: unconditional_cut(o) or o))
    return changes


UNCONDITIONAL_PADDING_CUT = register(Patch(
    "Mamba2 padding cut at every length", _changes,
    "transformers' mamba2_chunk_scan in every loaded transformers module holding it (Mamba2, Bamba, FalconH1, "
    "GraniteMoeHybrid, NemotronH, Zamba2): while torch.export traces, the slice cutting the chunk padding runs "
    "at every length instead of under 'if pad_size > 0:' (where pad_size is 0 it takes every row); nothing "
    "happens where those modules are not imported", when=always, order=140))
