"""transformers' sinusoidal position tables, captured as computed for the length at hand.

M2M100's ``M2M100SinusoidalPositionalEmbedding`` (and the classes built the same way: NLLB-MoE,
XGLM, Kosmos-2, Kosmos-2.5, Speech2Text, SeamlessM4T) hold a table of sinusoids and grow it when a
sequence needs more positions: ``if max_pos > self.weights.size(0): self.make_weights(max_pos +
self.offset, ...)``, then ``self.weights.index_select(0, position_ids)``. torch.export cannot keep
that ``if`` on a symbolic length (the export would hold up to the table's size only). Row ``i`` of
the table is ``get_embedding``'s sinusoid of position ``i`` whatever the table's size, and every
position the forward reads is below ``max_pos``: the table ``get_embedding(max_pos + offset, ...)``
gives the same rows at every length. ``SINUSOIDAL_TABLES`` (a registered capture patch) gives each
such class, while torch.export traces, a ``forward`` compiled from transformers' own source with
that ``if`` replaced by the table computed for the length (``get_embedding`` of the same arguments,
in the stored table's dtype) and the forward's later reads of ``self.weights`` reading it. Eager
execution outside the trace is unchanged; a class whose source does not have that statement is
left as it is.

Semantics: transformers' ``models/m2m_100/modeling_m2m_100.py``
(``M2M100SinusoidalPositionalEmbedding.make_weights`` / ``get_embedding`` / ``forward``).
"""

from __future__ import annotations

import ast
import sys
from typing import Callable

from onnxport.capture.patches import Patch, SetAttribute, register
from onnxport.capture.source_variants import source_variant

TABLE = "_onnxport_table"


def _is_growth(node: ast.stmt) -> bool:
    """``if ... max_pos > self.weights.size(0): self.make_weights(a, b, c)`` (one call, no ``else``)."""
    if not (isinstance(node, ast.If) and not node.orelse and len(node.body) == 1):
        return False
    call = node.body[0].value if isinstance(node.body[0], ast.Expr) else None
    return ("self.weights.size(0)" in ast.unparse(node.test) and isinstance(call, ast.Call)
            and ast.unparse(call.func) == "self.make_weights" and len(call.args) == 3 and not call.keywords)


class _ReadTable(ast.NodeTransformer):
    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and ast.unparse(node) == "self.weights":
            return ast.copy_location(ast.Name(TABLE, ast.Load()), node)
        return node


def _computed(node: ast.If) -> list[ast.stmt]:
    args = ", ".join(ast.unparse(a) for a in node.body[0].value.args)
    stmt = ast.parse(f"{TABLE} = self.get_embedding({args}).to(dtype=self.weights.dtype, device=self.weights.device)")
    return [ast.copy_location(s, node) for s in stmt.body]


def _table_for_length(func: ast.FunctionDef) -> bool:
    found = [i for i, stmt in enumerate(func.body) if _is_growth(stmt)]
    if func.name != "forward" or len(found) != 1:
        return False
    i = found[0]
    func.body[i:] = _computed(func.body[i]) + [_ReadTable().visit(stmt) for stmt in func.body[i + 1:]]
    return True


def table_for_length(forward: Callable) -> Callable | None:
    """The class's ``forward`` compiled with the table computed for the length (see above); None when
    its source has no such statement at its top level."""
    return source_variant(forward, _table_for_length)


def _classes() -> list[type]:
    found = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("transformers.models.") or module is None:
            continue
        for cls in list(vars(module).values()):
            if isinstance(cls, type) and cls.__module__ == name and \
                    all(k in cls.__dict__ for k in ("make_weights", "get_embedding", "forward")):
                found.append(cls)
    return found


def _changes() -> list:
    return [SetAttribute(cls, "forward", lambda o: table_for_length(o) or o)
            for cls in _classes() if table_for_length(cls.__dict__["forward"]) is not None]


SINUSOIDAL_TABLES = register(Patch(
    "sinusoidal tables computed for the length", _changes,
    "transformers' sinusoidal position embeddings that grow their table (M2M100, NLLB-MoE, XGLM, Kosmos-2, "
    "Speech2Text, SeamlessM4T): while torch.export traces, forward computes the table for the length at hand "
    "(get_embedding of the same arguments) instead of 'if max_pos > self.weights.size(0): self.make_weights(...)'; "
    "nothing happens where those modules are not imported"))
