"""SEW-D (transformers' own classes, tiny config, seeded): its upsampling pads the frames back to the
input's length only when they fall short (``if hidden_states.shape[1] < n_input_timesteps:``), a
side that is the identity where it is not taken, so it runs at every length; its relative attention
asks ``key_layer.size(-2) != query_layer.size(-2)`` of one expression (False by itself). Exported
by default (the rewrite after the first capture fails on the branch) and compared with eager at
lengths whose frame counts take both sides."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")


def test_sew_d_exports_at_every_length():
    torch.manual_seed(0)
    config = transformers.SEWDConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                     conv_dim=(16,) * 13, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                     position_buckets=32, max_position_embeddings=64)
    model = transformers.SEWDModel(config).eval()
    with pytest.warns(UserWarning, match="onnxport rewrote"):
        check_export(model, (torch.randn(2, 3200),), {"input_values": {0: "batch", 1: "samples"}}, values=[],
                     sizes=[{"batch": 3, "samples": 4800}, {"batch": 1, "samples": 5120},
                            {"batch": 2, "samples": 3360}])
