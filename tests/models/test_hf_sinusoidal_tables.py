"""transformers' position tables that grow with the length (M2M100, XGLM, Kosmos-2's text
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
    result = check_export(model, (),
                          {"input_ids": {0: "batch", 1: "seq"}, "decoder_input_ids": {0: "batch", 1: "decoder_seq"}},
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


def test_wav2vec2_conformer_runs_past_its_relative_table():
    """Wav2Vec2-Conformer's relative position table (``self.pe = self.extend_pe(x, self.pe)``), 16
    positions stored: compared at frame counts below and past it."""
    torch.manual_seed(0)
    config = transformers.Wav2Vec2ConformerConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
        conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2,
        conv_depthwise_kernel_size=3, position_embeddings_type="relative", max_source_positions=16,
        do_stable_layer_norm=True, feat_extract_norm="layer")
    model = transformers.Wav2Vec2ConformerModel(config).eval()
    result = check_export(model, (), {"input_values": {0: "batch", 1: "samples"}},
                          kwargs={"input_values": torch.randn(2, 200)}, values=[],
                          sizes=[{"batch": 1, "samples": 100}, {"batch": 3, "samples": 900}])
    assert "extend_pe" not in str(result.constraints)


def test_fsmt_runs_past_its_table_with_and_without_padding():
    """FSMT: its ``nn.Embedding`` sinusoid (``self.weight`` / ``make_weight``) grows past 16 positions,
    and its decoder padding mask (None where no token is padding: ``if not padding_mask.any()``) is
    kept; compared with eager at decoder ids with and without the padding token."""
    torch.manual_seed(0)
    config = transformers.FSMTConfig(
        langs=["en", "de"], src_vocab_size=64, tgt_vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=16, pad_token_id=1, use_cache=False)
    model = transformers.FSMTModel(config).eval()
    dims = {"input_ids": {0: "batch", 1: "seq"}, "decoder_input_ids": {0: "batch", 1: "decoder_seq"}}

    def ids(batch, length, padded):
        x = torch.randint(3, 64, (batch, length))
        if padded:
            x[0, -2:] = config.pad_token_id
        return x

    padded = [((), {"input_ids": ids(b, s, False), "decoder_input_ids": ids(b, d, True)})
              for b, s, d in ((2, 7, 5), (3, 30, 40))]
    result = check_export(model, (), dims,
                          kwargs={"input_ids": ids(2, 7, False), "decoder_input_ids": ids(2, 5, False)},
                          values=[], inputs=padded,
                          sizes=[{"batch": 1, "seq": 1, "decoder_seq": 1}, {"batch": 3, "seq": 40, "decoder_seq": 33}])
    assert not result.constraints
