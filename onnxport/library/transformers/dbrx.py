"""transformers' DBRX experts while torch.export traces: a loop over every expert.

``DbrxExperts.forward`` loops over the experts some token selected (``expert_hit``, a count known only
when the model runs), which torch.export cannot trace. ``EVERY_EXPERT`` (a registered capture patch)
gives it, while traced, the same loop over every expert: an expert no token selected gathers no
token and adds nothing, so the sum is the same.

Semantics: transformers' ``models/dbrx/modeling_dbrx.py`` (``DbrxExperts.forward``).
"""

from __future__ import annotations

import sys

import torch

from onnxport.capture.patches import Patch, SetAttribute, register
from onnxport.capture.tracing import translating


def _every_expert_forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                          top_k_weights: torch.Tensor) -> torch.Tensor:
    """transformers' ``DbrxExperts.forward`` with its loop over every expert instead of over the experts
    some token selected (``expert_hit``, a count known only when the model runs): an expert no token
    selected gathers no token and adds nothing, so the sum is the same."""
    batch_size = hidden_states.shape[0]
    hidden_states = hidden_states.reshape(-1, self.hidden_size)
    next_states = torch.zeros_like(hidden_states)
    with torch.no_grad():
        expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts + 1).permute(2, 1, 0)
    split_expert_shape = (-1, self.ffn_hidden_size, self.hidden_size)
    for expert_idx in range(self.num_experts):
        with torch.no_grad():
            idx, token_idx = torch.where(expert_mask[expert_idx])
        v1 = self.mlp.v1.view(split_expert_shape)[expert_idx]
        w1 = self.mlp.w1.view(split_expert_shape)[expert_idx]
        w2 = self.mlp.w2.view(split_expert_shape)[expert_idx]
        states = self.mlp(hidden_states[token_idx], w1, v1, w2)
        states = states.view(-1, self.hidden_size) * top_k_weights[token_idx, idx, None]
        next_states.index_add_(0, token_idx, states)
    return next_states.view(batch_size, -1, self.hidden_size)


def _every_expert_changes() -> list:
    dbrx = sys.modules.get("transformers.models.dbrx.modeling_dbrx")
    experts = getattr(dbrx, "DbrxExperts", None)
    if experts is None:
        return []
    return [SetAttribute(experts, "forward", lambda original: _every_expert_forward)]


EVERY_EXPERT = register(Patch(
    "every expert in turn", _every_expert_changes,
    "transformers' DbrxExperts.forward, which loops over the experts some token selected (a data-dependent "
    "count): while torch.export traces, the same loop over every expert (an expert no token selected adds "
    "nothing). Nothing changes when transformers' DBRX is not imported", when=translating, order=23))
