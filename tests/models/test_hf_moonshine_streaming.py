"""Moonshine's streaming encoder (transformers' own classes, tiny config, seeded): transformers' SDPA
integration reads ``is_causal = q_length > 1 and attention_mask is None and is_causal``, with
``q_length = (samples // 80 - 1) // 4 + 1`` frames; torch decides ``q_length > 1`` while tracing (its
size-one specialization). The export keeps the lengths of one frame (samples 80..399) and is
compared with eager PyTorch there and at longer ones."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")
modeling = pytest.importorskip("transformers.models.moonshine_streaming.modeling_moonshine_streaming")


def test_moonshine_streaming_encoder_exports_at_one_frame_and_more():
    torch.manual_seed(0)
    config = transformers.MoonshineStreamingEncoderConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
        head_dim=16, sliding_windows=[[16, 4], [16, 0]])
    model = modeling.MoonshineStreamingEncoder(config).eval()
    result = check_export(model, (torch.randn(2, 3200),), {"input_values": {0: "batch", 1: "samples"}}, values=[],
                          sizes=[{"batch": 1, "samples": 320}, {"batch": 3, "samples": 160},
                                 {"batch": 2, "samples": 400}, {"batch": 1, "samples": 4800}])
    assert "samples" in str(result.model_proto.graph.input[0].type)
