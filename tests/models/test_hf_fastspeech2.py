"""transformers' FastSpeech2-Conformer (small config, seeded) with dynamic batch and text length: the
spectrogram's frame count is the longest utterance's predicted duration, a size known only when the
model runs. Its length regulator (a loop over utterances and a branch on the durations' sum) and its
relative shift (views of a sliced tensor) are captured as gathers
(``onnxport.library.transformers.fastspeech2_conformer``); each is compared with transformers' own
function in eager PyTorch, and the ONNX model with eager PyTorch at other batch sizes and lengths."""

import pytest
import torch

from exportcheck import check_export

transformers = pytest.importorskip("transformers")
modeling = pytest.importorskip("transformers.models.fastspeech2_conformer.modeling_fastspeech2_conformer")


class Speech(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        out = self.model(input_ids=input_ids)
        return out.spectrogram, out.duration_outputs


@pytest.mark.parametrize("durations, speed", [
    ([[0, 3, 0, 1], [2, 0, 0, 5]], 1.0),  # zero-duration tokens, utterances of different lengths
    ([[0, 0, 0, 0], [0, 0, 0, 0]], 1.0),  # all zero: every utterance's durations set to 1, in place
    ([[1, 2, 3, 0], [0, 0, 0, 0]], 1.0),  # one utterance silent: left empty
    ([[1, 2, 3, 1], [4, 0, 2, 1]], 1.5),  # speaking speed rounds the durations
])
def test_length_regulator_for_the_batch_is_transformers_own(durations, speed):
    from onnxport.library.transformers.fastspeech2_conformer import _make

    embeddings = torch.randn(2, 4, 3)
    expected_durations, got_durations = torch.tensor(durations), torch.tensor(durations)
    expected = modeling.length_regulator(embeddings, expected_durations, speed)
    got = _make(modeling.length_regulator)(embeddings, got_durations, speed)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert torch.equal(got_durations, expected_durations)  # the same durations written in place


@pytest.mark.parametrize("time", [1, 2, 5, 9])
def test_relative_shift_as_gather_is_transformers_own(time):
    from onnxport.library.transformers.fastspeech2_conformer import shifted

    scores = torch.randn(2, 3, time, 2 * time - 1)
    expected = modeling.FastSpeech2ConformerAttention.shift_relative_position_tensor(None, scores)
    torch.testing.assert_close(shifted(scores), expected, rtol=0, atol=0)


def test_fastspeech2_conformer_exports_with_its_data_dependent_frame_count():
    torch.manual_seed(0)
    config = transformers.FastSpeech2ConformerConfig(
        hidden_size=32, vocab_size=40, num_mel_bins=8, encoder_layers=1, decoder_layers=1,
        encoder_num_attention_heads=2, decoder_num_attention_heads=2, encoder_linear_units=64,
        decoder_linear_units=64, encoder_kernel_size=3, decoder_kernel_size=3, speech_decoder_postnet_layers=2,
        speech_decoder_postnet_units=16, duration_predictor_channels=16, pitch_predictor_channels=16,
        energy_predictor_channels=16)
    model = Speech(transformers.FastSpeech2ConformerModel(config))
    ids = torch.randint(1, 40, (2, 7))
    r = check_export(model, (ids,), {"input_ids": {0: "batch", 1: "seq"}},
                     sizes=[{"batch": 1, "seq": 7}, {"batch": 3, "seq": 11}, {"batch": 2, "seq": 3},
                            {"batch": 4, "seq": 16}],
                     expect_inputs={"input_ids": ["batch", "seq"]})
    frames = r.model.graph.outputs[0].shape[1]
    assert not isinstance(frames, int), r.model.graph.outputs[0].shape  # known only when the model runs
