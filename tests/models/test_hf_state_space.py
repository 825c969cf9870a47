"""Hybrid and recurrent decoders of transformers with default arguments (no ``rewrite_control_flow``):
Jamba (Mamba layers with an attention layer and experts) and RecurrentGemma (RG-LRU recurrent blocks
and a local attention block), tiny configs, seeded. Capture fails on their Python loops over the
sequence, onnxport rewrites them (one warning naming them) and the export matches eager PyTorch at
the default sizes, one token and longer sequences included."""

import pytest
import torch

from exportcheck import check_export, count_ops

transformers = pytest.importorskip("transformers")

VOCAB = 100


def _jamba():
    return transformers.JambaModel(transformers.JambaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=64, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, attn_layer_period=2,
        attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, num_experts=2, use_mamba_kernels=False))


def _recurrent_gemma():
    return transformers.RecurrentGemmaModel(transformers.RecurrentGemmaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=64, lru_width=32, attention_window_size=8,
        block_types=["recurrent", "recurrent", "attention"]))


class Backbone(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


@pytest.mark.parametrize("build", [_jamba, _recurrent_gemma], ids=["jamba", "recurrent_gemma"])
def test_exports_with_default_arguments(build):
    torch.manual_seed(0)
    model = Backbone(build()).eval()
    with pytest.warns(UserWarning, match="onnxport rewrote"):
        r = check_export(model, (torch.randint(0, VOCAB, (2, 7)),), {"input_ids": {0: "batch", 1: "seq"}},
                         sizes=[{"batch": 1, "seq": 1}, {"batch": 2, "seq": 19}], values=[],
                         expect_outputs={"output": ["batch", "seq", 32]})
    assert count_ops(r, "Scan") + count_ops(r, "Loop") >= 1
