"""transformers' sinusoidal position tables that grow with the length (M2M100, XGLM, Kosmos-2's text
model; their own classes, tiny configs, seeded): captured as computed for the length at hand, the
export keeps the length dynamic past the table's initial size, compared with eager PyTorch there."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")


def test_m2m100_runs_past_its_initial_table():
    torch.manual_seed(0)
    config = transformers.M2M100Config(
        vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=16, use_cache=False)
    model = transformers.M2M100Model(config).eval()
    kwargs = {"input_ids": torch.randint(3, 64, (2, 7)), "decoder_input_ids": torch.randint(3, 64, (2, 5))}
    result = check_export(model, (), {"input_ids": {0: "batch", 1: "seq"}, "decoder_input_ids": {0: "batch", 1: "decoder_seq"}},
                          kwargs=kwargs, values=[],
                          sizes=[{"batch": 1, "seq": 1, "decoder_seq": 1}, {"batch": 3, "seq": 40, "decoder_seq": 33}])
    assert not result.constraints


def test_xglm_runs_past_its_initial_table():
    torch.manual_seed(0)
    config = transformers.XGLMConfig(vocab_size=64, d_model=32, num_layers=1, attention_heads=2, ffn_dim=64,
                                     max_position_embeddings=16, use_cache=False)
    model = transformers.XGLMModel(config).eval()
    result = check_export(model, (), {"input_ids": {0: "batch", 1: "seq"}},
                          kwargs={"input_ids": torch.randint(3, 64, (2, 7))}, values=[],
                          sizes=[{"batch": 1, "seq": 1}, {"batch": 3, "seq": 40}])
    assert not result.constraints
