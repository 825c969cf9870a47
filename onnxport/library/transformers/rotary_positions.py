"""transformers: the largest number of positions a decoder's rotary embedding is meant for, where its
cos/sin are a function of the position alone, for target ``genai-cpu``'s cos/sin caches
(``onnxport.targets.genai_rotary``).

transformers' rotary modules (``LlamaRotaryEmbedding``, ``Qwen2RotaryEmbedding``...) hold
``inv_freq``, ``rope_type`` and ``original_max_seq_len`` (the config's ``max_position_embeddings``).
Of their ``rope_type`` (``transformers.modeling_rope_utils``), ``default``, ``linear`` (positions
divided by a factor: ``inv_freq`` scaled) and ``llama3`` (``inv_freq`` rescaled once) give angles
``position * inv_freq`` from a constant ``inv_freq``; ``dynamic`` and ``longrope`` change
``inv_freq`` with the sequence length, and ``yarn``-like types scale cos/sin: those get no caches.
"""

from __future__ import annotations

import torch

POSITION_ONLY = ("default", "linear", "llama3")  # rope types whose cos/sin depend on the position alone


def max_positions(module: object) -> tuple[int | None, str]:
    """``(max_position_embeddings, "")`` of the rotary embeddings of ``module`` (a transformers
    decoder, eager), when every one has cos/sin a function of the position alone (module docstring)
    and they agree on the number of positions; else ``(None, why not)``."""
    if not isinstance(module, torch.nn.Module):
        return None, "the model is not an eager module"
    rotaries = [m for m in module.modules() if hasattr(m, "inv_freq") and hasattr(m, "rope_type")
                and isinstance(getattr(m, "original_max_seq_len", None), int)]
    if not rotaries:
        return None, "the maximum position is not known (no transformers rotary module with original_max_seq_len)"
    scaled = sorted({str(m.rope_type) for m in rotaries} - set(POSITION_ONLY))
    if scaled:
        return None, f"the rotary scaling ({', '.join(scaled)}) depends on more than the position"
    lengths = {m.original_max_seq_len for m in rotaries}
    if len(lengths) != 1:
        return None, f"the rotary modules disagree on the maximum position ({sorted(lengths)})"
    return lengths.pop(), ""
