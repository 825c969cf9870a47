"""transformers' bidirectional mask skipped without a padding mask while traced, as eager skips it
(``onnxport.library.transformers.bidirectional_masks``): Autoformer's auto-correlation attention, which
takes no all-true mask, exported at every batch size; the answer kept for a padding mask."""

from __future__ import annotations

import pytest
import torch

from exportcheck import check_export
from onnxport.capture.patches import installed
from onnxport.library.transformers.bidirectional_masks import EAGER_MASK_SKIP

transformers = pytest.importorskip("transformers")


def test_the_skip_needs_no_padding_mask_and_no_window():
    from transformers import masking_utils

    with installed(EAGER_MASK_SKIP):
        skip = masking_utils._ignore_bidirectional_mask_sdpa
        assert skip(None, 5) is True
        assert skip(None, 2, 3) is True and skip(None, 5, 3) is False  # a local window: transformers' own answer
    assert masking_utils._ignore_bidirectional_mask_sdpa is not skip


class Forecast(torch.nn.Module):
    """Autoformer's encoder-decoder on a series, its last hidden states and the series' scale."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, past_values, past_time_features, past_observed_mask):
        out = self.model(past_values=past_values, past_time_features=past_time_features,
                         past_observed_mask=past_observed_mask)
        return out.last_hidden_state, out.encoder_last_hidden_state, out.scale


def test_autoformer_at_every_batch():
    # heads 12 wide over a context of 8: the weights [batch * heads, 8, 12] do not fit an 8 x 8 mask
    config = transformers.AutoformerConfig(
        prediction_length=4, context_length=8, input_size=2, lags_sequence=[1, 2, 3], num_time_features=1,
        d_model=24, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=16, decoder_ffn_dim=16, label_length=4, moving_average=5, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0)
    torch.manual_seed(0)
    model = Forecast(transformers.AutoformerModel(config))
    length = 8 + 3
    batch = torch.export.Dim("batch", min=1)
    args = (torch.randn(2, length, 2), torch.randn(2, length, 1), torch.ones(2, length, 2))
    check_export(model, args, ({0: batch}, {0: batch}, {0: batch}), sizes=[{"batch": 1}, {"batch": 3}, {"batch": 5}],
                 values=[])
