"""ProphetNet (transformers' own classes, tiny config, seeded): its decoder concatenates the main
stream and ``ngram`` predicting streams along the sequence and splits them back with
``hidden_states.chunk(1 + ngram, dim=1)``; the chunks are whole at every decoder length, so the
export keeps it dynamic. Compared with eager at other batch sizes and lengths."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")


def test_prophetnet_keeps_its_decoder_length_dynamic():
    torch.manual_seed(0)
    config = transformers.ProphetNetConfig(
        vocab_size=64, hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, num_encoder_layers=1,
        num_decoder_layers=1, num_encoder_attention_heads=2, num_decoder_attention_heads=2, ngram=2, num_buckets=8,
        relative_max_distance=32, max_position_embeddings=64, use_cache=False)
    model = transformers.ProphetNetModel(config).eval()
    kwargs = {"input_ids": torch.randint(3, 64, (2, 7)), "attention_mask": torch.ones(2, 7, dtype=torch.long),
              "decoder_input_ids": torch.randint(3, 64, (2, 5))}
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "decoder_input_ids": {0: "batch", 1: "decoder_seq"}}
    check_export(model, (), dims, kwargs=kwargs, values=[],
                 sizes=[{"batch": 1, "seq": 3, "decoder_seq": 2}, {"batch": 3, "seq": 11, "decoder_seq": 9}])
