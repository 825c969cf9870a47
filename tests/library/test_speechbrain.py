"""SpeechBrain's LiGRU exports with the batch dynamic: its batch-size bookkeeping (``_change_batch_size``)
does nothing for a module in eval mode while traced (onnxport/library/speechbrain.py)."""

from __future__ import annotations

import torch

from exportcheck import check_export
from onnxport.capture.patches import installed
from onnxport.library.speechbrain import LIGRU_BATCH_SIZE
from third_party import import_speech

RNN = import_speech("speechbrain.nnet.RNN")


def _ligru(**kwargs) -> torch.nn.Module:
    torch.manual_seed(0)
    return RNN.LiGRU(hidden_size=8, input_shape=(3, 6, 5), num_layers=1, **kwargs).eval()


class Outputs(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0]


def test_ligru_exports_with_the_batch_dynamic():
    check_export(Outputs(_ligru(bidirectional=True)), (torch.randn(3, 6, 5),), {"x": {0: "batch"}},
                 inputs=[(torch.randn(2, 6, 5),), (torch.randn(5, 6, 5),)])
    assert RNN.LiGRU_Layer._change_batch_size.__qualname__ == "LiGRU_Layer._change_batch_size"  # restored


def test_training_modules_keep_speechbrains_bookkeeping():
    model = _ligru()
    with installed(LIGRU_BATCH_SIZE), torch.no_grad():
        model(torch.randn(4, 6, 5))
        assert model.rnn[0].batch_size == 3  # eval: skipped
        model.train()(torch.randn(4, 6, 5))
        assert model.rnn[0].batch_size == 4  # training: SpeechBrain's own
