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
in the stored table's dtype) and the forward's later reads of ``self.weights`` reading it. FSMT's
``SinusoidalPositionalEmbedding`` is the same with ``self.weight`` / ``self.make_weight`` (an
``nn.Embedding`` whose ``_init_weights`` and ``make_weight`` both store ``get_embedding``'s table):
its ``super().forward(positions)`` becomes ``nn.Embedding``'s forward of the computed table. Eager
execution outside the trace is unchanged; a class whose source does not have that statement is
left as it is.

Semantics: transformers' ``models/m2m_100/modeling_m2m_100.py``
(``M2M100SinusoidalPositionalEmbedding.make_weights`` / ``get_embedding`` / ``forward``),
``models/fsmt/modeling_fsmt.py`` (``SinusoidalPositionalEmbedding``); ``torch.nn.Embedding.forward``.
"""

from __future__ import annotations

import ast

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import ReadAsName, forward_variants
from onnxport.library.transformers import model_classes

TABLE = "_onnxport_table"


FORMS = {"weights": "make_weights", "weight": "make_weight"}  # the table's attribute: the method renewing it


def _growth_table(node: ast.stmt) -> str | None:
    """The table's attribute of ``if ... > self.<table>.size(0): self.<make>(a, b, c)`` (one call, no
    ``else``), None for any other statement."""
    if not (isinstance(node, ast.If) and not node.orelse and len(node.body) == 1):
        return None
    call = node.body[0].value if isinstance(node.body[0], ast.Expr) else None
    for table, make in FORMS.items():
        if (f"self.{table}.size(0)" in ast.unparse(node.test) and isinstance(call, ast.Call)
                and ast.unparse(call.func) == f"self.{make}" and len(call.args) == 3 and not call.keywords):
            return table
    return None


class _ReadTable(ReadAsName):
    """Reads of ``self.<table>`` read the computed table; ``super().forward(x)`` of an ``nn.Embedding``
    whose table is ``self.weight`` (FSMT) is ``nn.Embedding.forward`` of it."""

    def __init__(self, table: str):
        super().__init__(table, TABLE)
        self.table = table

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if self.table == "weight" and ast.unparse(node.func) == "super().forward" and len(node.args) == 1:
            call = ast.parse(f"torch.nn.functional.embedding({ast.unparse(node.args[0])}, {TABLE}, self.padding_idx, "
                             "self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse)").body[0].value
            return ast.copy_location(call, node)
        return node


def _computed(node: ast.If, table: str) -> list[ast.stmt]:
    args = ", ".join(ast.unparse(a) for a in node.body[0].value.args)
    stmt = ast.parse(f"{TABLE} = self.get_embedding({args}).to(dtype=self.{table}.dtype, device=self.{table}.device)")
    return [ast.copy_location(s, node) for s in stmt.body]


def _table_for_length(func: ast.FunctionDef) -> bool:
    found = [(i, _growth_table(stmt)) for i, stmt in enumerate(func.body) if _growth_table(stmt)]
    if func.name != "forward" or len(found) != 1:
        return False
    i, table = found[0]
    func.body[i:] = _computed(func.body[i], table) + [_ReadTable(table).visit(stmt) for stmt in func.body[i + 1:]]
    return True


def _changes() -> list:
    classes = model_classes(("get_embedding", "forward"), any_of=tuple(FORMS.values()))
    return forward_variants(classes, _table_for_length)


SINUSOIDAL_TABLES = register(Patch(
    "sinusoidal tables computed for the length", _changes,
    "transformers' sinusoidal position embeddings that grow their table (M2M100, NLLB-MoE, XGLM, Kosmos-2, "
    "Speech2Text, SeamlessM4T): while torch.export traces, forward computes the table for the length at hand "
    "(get_embedding of the same arguments) instead of 'if max_pos > self.weights.size(0): self.make_weights(...)'; "
    "nothing happens where those modules are not imported", when=always, order=200))
