"""transformers' Longformer (sliding-chunk attention, window 4, tiny config, seeded) with dynamic batch
and sequence. Its chunk counts, ``torch.div(seq_len, window, rounding_mode="trunc")``, are captured as
symbolic sizes; what is left is a branch on whether any token has global attention,
``is_global_attn = is_index_global_attn.flatten().any().item()`` then ``if is_global_attn:``, a bool
of the inputs' data whose branches write in place (no ``torch.cond``, no rewrite): refused, naming
the line that reads the bool, the branch and the fix."""

import pytest
import torch

import onnxport

transformers = pytest.importorskip("transformers")


class Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def test_longformer_is_refused_at_its_branch_on_global_attention():
    torch.manual_seed(0)
    model = Encoder(transformers.LongformerModel(transformers.LongformerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        attention_window=4, max_position_embeddings=128, pad_token_id=1))).eval()
    ids, mask = torch.randint(3, 100, (2, 12)), torch.ones(2, 12, dtype=torch.int64)
    with pytest.raises(onnxport.DataDependentError, match=r"a bool read from the inputs' data, `is_global_attn = "
                       r"is_index_global_attn\.flatten\(\)\.any\(\)\.item\(\)` at modeling_longformer\.py:\d+") as e:
        onnxport.to_onnx(model, (ids, mask), dynamic_shapes={"input_ids": {0: "batch", 1: "seq"},
                                                             "attention_mask": {0: "batch", 1: "seq"}})
    assert "modeling_longformer.py" in e.value.where and "if is_global_attn:" in e.value.where
    assert "torch.cond" in e.value.hint and "rewrite" in e.value.hint  # the rewrite was tried
    assert "Eq(u1, 1)" not in str(e.value)  # the chunk count stayed symbolic
