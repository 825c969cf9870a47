"""Shared by the Hugging Face model tests: a transformers base model called without its cache,
its last hidden state as the one output."""

from __future__ import annotations

import torch


class Backbone(torch.nn.Module):
    """``model(input_ids=..., use_cache=False).last_hidden_state``."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state
