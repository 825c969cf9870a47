"""A scale computed from sizes passed to ``F.scaled_dot_product_attention`` (``scale=n ** -0.5``): torch
specializes a SymFloat argument, so the export held at the example's size only (``n >= 16 and n <= 16``
stated). It is applied to the query instead, and stays a function of the size
(``capture/size_arguments.py``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from exportcheck import check_export


class ScaledByCount(torch.nn.Module):
    def __init__(self, how: str):
        super().__init__()
        self.how = how

    def forward(self, q, k):  # [batch, heads, n, 8], [batch, heads, m, 8]
        scale = q.shape[2] ** -0.5
        if self.how == "keywords":
            return F.scaled_dot_product_attention(query=q, key=k, value=k, scale=scale)
        return F.scaled_dot_product_attention(q, k, k, scale=scale)


@pytest.mark.parametrize("how", ["keyword", "keywords"])
def test_a_scale_computed_from_a_size_is_no_constraint(how):
    result = check_export(ScaledByCount(how), (torch.randn(2, 2, 16, 8), torch.randn(2, 2, 6, 8)),
                          {"q": {0: "batch", 2: "n"}, "k": {0: "batch", 2: "m"}},
                          sizes=[{"batch": 3, "n": 5, "m": 9}, {"batch": 1, "n": 33, "m": 2}])
    assert result.constraints == []


def test_transformers_florence2_channel_attention():
    """transformers' own ``Florence2VisionChannelAttention``: ``scale = num_tokens ** -0.5`` given to its
    attention interface (SDPA)."""
    florence2 = pytest.importorskip("transformers.models.florence2.modeling_florence2")
    from transformers import Florence2VisionConfig

    config = Florence2VisionConfig(embed_dim=[16], num_groups=[2], num_heads=[2], depths=[1])
    config._attn_implementation = "sdpa"
    result = check_export(florence2.Florence2VisionChannelAttention(config, 0).eval(), (torch.randn(2, 16, 16),),
                          {"hidden_states": {0: "batch", 1: "tokens"}},
                          sizes=[{"batch": 3, "tokens": 5}, {"batch": 1, "tokens": 40}])
    assert result.constraints == []
