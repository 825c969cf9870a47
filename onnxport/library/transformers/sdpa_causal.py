"""transformers' SDPA attention deciding ``is_causal`` without reading the query length first.

transformers' ``sdpa_attention_forward`` (``integrations/sdpa_attention.py``) computes ``is_causal =
q_length > 1 and attention_mask is None and is_causal``: the query length is compared first, even
where a mask is given or the attention is not causal. Where the query length is a count known only
when the model runs (the packed frames Qwen3-ASR's encoder selects with ``nonzero``), torch.export
cannot decide ``q_length > 1`` and refuses; where it is a dynamic size, the comparison adds the
constraint ``q_length >= 2`` for nothing.

The three operands are Python bools in eager, so their conjunction does not depend on their order:
``is_causal and attention_mask is None and q_length > 1`` is the same value and reads the length only
where the other two hold. ``CAUSAL_LAST`` (a registered capture patch) makes ``sdpa_attention_forward``,
while torch.export traces, the function compiled from transformers' own source with that statement
reordered (wrapped in ``bool``: the kernel takes a bool only).

Semantics: transformers' ``integrations/sdpa_attention.py`` (``sdpa_attention_forward``).
"""

from __future__ import annotations

import ast
import sys

from onnxport.capture.patches import Patch, always, register
from onnxport.capture.source_variants import function_variant, replace_statement

MODULE = "transformers.integrations.sdpa_attention"
_FIRST = "is_causal = q_length > 1 and attention_mask is None and is_causal"
_LAST = "is_causal = bool(is_causal and attention_mask is None and q_length > 1)"


def _causal_last(func: ast.FunctionDef) -> bool:
    """Reorder the one ``is_causal`` statement of ``func``; False where it is not there."""
    return func.name == "sdpa_attention_forward" and replace_statement(
        func.body, lambda s: ast.unparse(s) == _FIRST,
        lambda s: [ast.copy_location(ast.parse(_LAST).body[0], s)])


def _changes() -> list:
    module = sys.modules.get(MODULE)
    fn = getattr(module, "sdpa_attention_forward", None) if module is not None else None
    return [] if fn is None else function_variant(fn, _causal_last)


CAUSAL_LAST = register(Patch(
    "SDPA is_causal decided without the query length first", _changes,
    "transformers' sdpa_attention_forward: while torch.export traces, is_causal is computed as is_causal and "
    "attention_mask is None and q_length > 1 (the same bool), so a query length known only when the model runs, or "
    "a dynamic one, is compared only for causal attention without a mask; nothing happens where that module is "
    "not imported", when=always, order=236))
