"""EnCodec (transformers' own classes, tiny config, seeded): with no chunk length its encoder loops
``for offset in range(0, n, n)``, one step at every length, which the export keeps as a Python loop
of one step instead of fixing ``n``; its reflect padding of short inputs (``if length <= max_pad:``)
is a constraint on the length. Compared with eager at other lengths."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")


def test_encodec_encodes_at_other_lengths():
    torch.manual_seed(0)
    config = transformers.EncodecConfig(num_filters=8, hidden_size=16, codebook_dim=16, codebook_size=32,
                                        num_lstm_layers=1, target_bandwidths=[1.5, 3.0])
    model = transformers.EncodecModel(config).eval()

    class Encode(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_values):
            return self.model.encode(input_values).audio_codes

    check_export(Encode(), (torch.randn(2, 1, 3200),), {"input_values": {0: "batch", 2: "samples"}}, values=[],
                 sizes=[{"batch": 1, "samples": 2560}, {"batch": 3, "samples": 4813}])
