"""Kimi delta attention (Kimi-Linear: linear-attention layers beside MLA attention, experts), tiny
config, seeded, its own transformers classes. Its chunked form inverts each chunk's unit lower
triangular matrix row by row (63 traced steps a chunk), captured as one triangular solve
(``library/transformers/forward_substitution``) translated by doubling; its loop over chunks is
rewritten as a Scan. The export holds at lengths of one chunk and of several."""

import pytest
import torch

from exportcheck import check_export, count_ops
from hf_recurrent import Backbone

transformers = pytest.importorskip("transformers")
pytest.importorskip("transformers.models.kimi_linear")

VOCAB = 100


def test_kimi_linear_exports_at_lengths_of_one_and_several_chunks():
    config = transformers.KimiLinearConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
        v_head_dim=8, num_local_experts=4, num_experts_per_tok=2, n_shared_experts=1, linear_head_dim=8,
        linear_num_heads=2, layer_types=["linear_attention", "full_attention"], mlp_layer_types=["dense", "dense"],
        pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = Backbone(transformers.KimiLinearModel(config)).eval()
    r = check_export(model, (torch.randint(0, VOCAB, (2, 7)),), {"input_ids": {0: "batch", 1: "seq"}},
                     sizes=[{"batch": 1, "seq": 1}, {"batch": 2, "seq": 64}, {"batch": 1, "seq": 130}],
                     values=[], expect_outputs={"output": ["batch", "seq", 32]})
    assert not r.constraints
    assert count_ops(r, "Scan") >= 1
