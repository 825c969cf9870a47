"""Shared by the tests of transformers' state-space and recurrent models: the base model called
without its cache (its last hidden state the one output), and seeded noise on the weights so that
a freshly initialized model's greedy tokens vary."""

from __future__ import annotations

import torch


class Backbone(torch.nn.Module):
    """``model(input_ids=..., use_cache=False).last_hidden_state``."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def spread(model: torch.nn.Module, scale: float = 0.3) -> torch.nn.Module:
    """``model`` in eval mode with seeded normal noise (``scale``) added to every weight but the
    state-space ``A_log`` (kept, so the recurrence stays stable): a freshly initialized Mamba
    repeats one token."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "A_log" not in name:
                p.add_(torch.randn(p.shape, generator=gen) * scale)
    return model.eval()
