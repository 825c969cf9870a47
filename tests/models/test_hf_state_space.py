"""State-space, hybrid and recurrent decoders of transformers with default arguments (no
``rewrite_control_flow``), tiny configs, seeded. Jamba (Mamba layers with an attention layer and
experts) and RecurrentGemma (RG-LRU recurrent blocks and a local attention block): capture fails on
their Python loops over the sequence, onnxport rewrites them (one warning naming them). Mamba2 (its
chunked scan pads the sequence to whole chunks and cuts the padding under ``if pad_size > 0``):
captured with the cut at every length, no loop, no constraint. Each export matches eager PyTorch at
the default sizes, one token and longer sequences included."""

import warnings

import pytest
import torch

from exportcheck import check_export, count_ops
from hf_backbone import Backbone

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


@pytest.mark.parametrize("build", [_jamba, _recurrent_gemma], ids=["jamba", "recurrent_gemma"])
def test_exports_with_default_arguments(build):
    torch.manual_seed(0)
    model = Backbone(build()).eval()
    with pytest.warns(UserWarning, match="onnxport rewrote"):
        r = check_export(model, (torch.randint(0, VOCAB, (2, 7)),), {"input_ids": {0: "batch", 1: "seq"}},
                         sizes=[{"batch": 1, "seq": 1}, {"batch": 2, "seq": 19}], values=[],
                         expect_outputs={"output": ["batch", "seq", 32]})
    assert count_ops(r, "Scan") + count_ops(r, "Loop") >= 1


def _mamba2():
    return transformers.Mamba2Model(transformers.Mamba2Config(
        vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4, num_heads=4,
        head_dim=16, n_groups=1, chunk_size=4))


def test_mamba2_exports_with_default_arguments_at_every_length():
    import transformers.models.mamba2.modeling_mamba2 as mamba2

    torch.manual_seed(0)
    model = Backbone(_mamba2()).eval()
    scan = mamba2.mamba2_chunk_scan
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing rewritten, nothing adopted
        r = check_export(model, (torch.randint(0, VOCAB, (2, 7)),), {"input_ids": {0: "batch", 1: "seq"}},
                         sizes=[{"batch": 1, "seq": 1}, {"batch": 1, "seq": 4}, {"batch": 2, "seq": 8},
                                {"batch": 3, "seq": 19}], expect_outputs={"output": ["batch", "seq", 32]})
    assert not r.constraints and not r.rewrite_notes
    assert count_ops(r, "If") == 0  # the padding cut is one Slice at every length
    assert mamba2.mamba2_chunk_scan is scan  # restored after capture
