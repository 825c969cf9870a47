"""Hybrid decoders with the gated delta rule (Qwen3-Next: linear-attention layers beside full
attention, experts), tiny config, seeded, default arguments. Its chunked form pads the sequence to
whole chunks of 64 and loops over the chunks in Python (``for i in range(num_chunks)``): at the
example's 7 tokens there is one chunk, which torch.export specializes; capture traces at 65, the
loop is rewritten as a Scan, and the export holds at every length (no constraint), one token and
several chunks included. Its decoder layer chooses attention by a string (``if block_type == ...
elif``): the rewritten ``elif`` inside a rewritten branch reads the value from before the ``if``."""

import pytest
import torch

from exportcheck import check_export, count_ops
from hf_recurrent import Backbone

transformers = pytest.importorskip("transformers")

VOCAB = 100


def _qwen3_next():
    return transformers.Qwen3NextModel(transformers.Qwen3NextConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2,
        linear_num_value_heads=2, moe_intermediate_size=16, shared_expert_intermediate_size=16,
        num_experts=4, num_experts_per_tok=2, layer_types=["linear_attention", "full_attention"],
        pad_token_id=0, bos_token_id=1, eos_token_id=2))


def test_qwen3_next_exports_at_every_length_from_an_example_of_one_chunk():
    torch.manual_seed(0)
    model = Backbone(_qwen3_next()).eval()
    with pytest.warns(UserWarning, match="onnxport rewrote"):
        r = check_export(model, (torch.randint(0, VOCAB, (2, 7)),), {"input_ids": {0: "batch", 1: "seq"}},
                         sizes=[{"batch": 1, "seq": 1}, {"batch": 2, "seq": 64}, {"batch": 1, "seq": 130}],
                         values=[], expect_outputs={"output": ["batch", "seq", 32]})
    assert not r.constraints
    assert count_ops(r, "Scan") >= 1
