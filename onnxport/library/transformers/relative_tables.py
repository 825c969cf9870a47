"""transformers' relative position tables that grow with the length, captured as computed for it.

Wav2Vec2-Conformer's ``Wav2Vec2ConformerRelPositionalEmbedding`` (and the classes built the same way:
Wav2Vec2-BERT, SeamlessM4T's conformer) keep a table ``self.pe`` of sinusoids for relative positions
``L-1 .. -(L-1)`` and renew it when a sequence needs more: ``self.pe = self.extend_pe(hidden_states,
self.pe)``, where ``extend_pe`` returns the stored table ``if pe.size(1) >= x.size(1) * 2 - 1`` and
computes one for ``x``'s length otherwise; the forward then reads the ``2T - 1`` rows around the
table's middle. torch.export cannot keep that ``if`` on a symbolic length (the export would hold up
to the stored table's length only). The rows read are the sinusoids of positions ``T-1 .. -(T-1)``
whatever the table's length, so the table ``extend_pe(hidden_states, None)`` computes for the length
at hand gives the same rows. ``RELATIVE_TABLES`` (a registered capture patch) gives each such class,
while torch.export traces, a ``forward`` compiled from transformers' own source with that assignment
replaced by the table computed for the length (held in a local, the buffer left as it is) and the
forward's later reads of ``self.pe`` reading it. FastSpeech2-Conformer's
``FastSpeech2ConformerRelPositionalEncoding`` is built the same way under other names
(``self.pos_enc = self.extend_pos_enc(x, self.pos_enc)``) and gets the same change. Eager execution
outside the trace is unchanged; a class whose source does not have that statement is left as it is.

Semantics: transformers' ``models/wav2vec2_conformer/modeling_wav2vec2_conformer.py``
(``Wav2Vec2ConformerRelPositionalEmbedding.extend_pe`` / ``forward``) and
``models/fastspeech2_conformer/modeling_fastspeech2_conformer.py`` (``extend_pos_enc`` / ``forward``).
"""

from __future__ import annotations

import ast

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import ReadAsName, forward_variants
from onnxport.library.transformers import model_classes

TABLE = "_onnxport_table"
# (table attribute, method that renews it): Wav2Vec2-Conformer's family, FastSpeech2-Conformer's
RENEWALS = (("pe", "extend_pe"), ("pos_enc", "extend_pos_enc"))


def _is_renewal(node: ast.stmt, table: str, extend: str) -> bool:
    """``self.<table> = self.<extend>(x, self.<table>)``."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
        return False
    call = node.value
    return (ast.unparse(node.targets[0]) == f"self.{table}" and ast.unparse(call.func) == f"self.{extend}"
            and len(call.args) == 2 and ast.unparse(call.args[1]) == f"self.{table}" and not call.keywords)


def _table_for_length(table: str, extend: str):
    def transform(func: ast.FunctionDef) -> bool:
        found = [i for i, stmt in enumerate(func.body) if _is_renewal(stmt, table, extend)]
        if func.name != "forward" or len(found) != 1:
            return False
        i = found[0]
        stmt = ast.parse(f"{TABLE} = self.{extend}({ast.unparse(func.body[i].value.args[0])}, None)").body[0]
        rest = [ReadAsName(table, TABLE).visit(s) for s in func.body[i + 1:]]
        func.body[i:] = [ast.copy_location(stmt, func.body[i])] + rest
        return True

    return transform


_TRANSFORMS = {renewal: _table_for_length(*renewal) for renewal in RENEWALS}


def _changes() -> list:
    return [change for (table, extend), transform in _TRANSFORMS.items()
            for change in forward_variants(model_classes((extend, "forward")), transform)]


RELATIVE_TABLES = register(Patch(
    "relative position tables computed for the length", _changes,
    "transformers' relative position embeddings that renew their table (Wav2Vec2-Conformer, Wav2Vec2-BERT, "
    "SeamlessM4T's conformer, FastSpeech2-Conformer): while torch.export traces, forward computes the table for "
    "the length at hand (extend_pe(x, None)) instead of 'self.pe = self.extend_pe(x, self.pe)' (extend_pos_enc and "
    "pos_enc in FastSpeech2-Conformer); nothing happens where those modules are not imported", when=always, order=210))
