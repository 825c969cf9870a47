"""The relation a transformers cache implies: the attention mask covers the cached and the new tokens.

transformers' decoders read ``attention_mask`` of shape ``(batch, past + seq)`` beside a cache of
``past`` tokens and ``input_ids`` (or ``inputs_embeds``) of ``seq`` new ones: the contract of its
cache classes (``Cache.get_seq_length()`` + the new tokens, transformers' ``masking_utils``).
``dynamic_shapes`` cannot say so; when the user names the mask's axis apart and states no
relation for it, capture adopts ``total = past + seq`` with one notice (``relations=`` still wins).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from onnxport.capture.caches import cache_input_name, is_cache

NEW_TOKENS = ("input_ids", "inputs_embeds")
MASK = "attention_mask"


def implied_relations(top: list[tuple[str, Any]], declared: list, relations: dict | None) -> dict[str, str]:
    """``{mask dim: "past + seq"}`` where a transformers cache is an input, the attention mask's axis 1,
    the cache's axis 2 and the new tokens' axis 1 are declared dynamic under three names, the
    user relates none of them, and the example's sizes satisfy it; else ``{}``.

    ``top``: (name, value) of the top-level inputs; ``declared``: their ``DeclaredDim``s.
    """
    caches = [cache_input_name(n) for n, v in top if is_cache(v)]
    if not caches:
        return {}
    values = dict(top)
    names = {(d.input_name, d.axis): d.name for d in declared}
    past = {d.name for d in declared if d.axis == 2 and any(d.input_name.startswith(c + ".") for c in caches)}
    seq = next((names[(n, 1)] for n in NEW_TOKENS if (n, 1) in names), None)
    total = names.get((MASK, 1))
    if len(past) != 1 or seq is None or total is None:
        return {}
    (past,) = past
    stated = set(relations or {})
    if len({total, seq, past}) < 3 or stated & {total, seq, past}:
        return {}
    sizes = _example_sizes(values, declared, {total, seq, past})
    if sizes.get(total) != sizes.get(past, -1) + sizes.get(seq, -1):
        return {}
    relation = {total: f"{past} + {seq}"}
    warnings.warn(f"the attention mask's axis '{total}' covers the cached and the new tokens (transformers' cache "
                  f"contract): onnxport adopted the relation {total} = {past} + {seq}; pass relations= to state "
                  "another", UserWarning, stacklevel=5)
    return relation


def _example_sizes(values: dict, declared: list, wanted: set[str]) -> dict[str, int]:
    """The example's size of each dim in ``wanted`` (the first axis declared under that name that
    a top-level tensor or cache tensor gives)."""
    from onnxport.capture.dynamic_shapes import flat_names

    leaves = {f: leaf for f, leaf, _ in flat_names(list(values.items()))}
    out: dict[str, int] = {}
    for d in declared:
        leaf = leaves.get(d.input_name)
        if d.name in wanted and d.name not in out and isinstance(leaf, torch.Tensor):
            out[d.name] = int(leaf.shape[d.axis])
    return out
