"""LSTM and GRU sequence taggers: embedding, 2-layer bidirectional batch-first recurrent layer,
linear tag head; dynamic batch and time, with and without initial states."""

import pytest
import torch

from exportcheck import check_export, count_ops

VOCAB, EMB, HIDDEN, TAGS, LAYERS = 50, 16, 24, 7, 2


class Tagger(torch.nn.Module):
    """tokens int64[batch, time] (+ h0[, c0] float[4, batch, 24]) -> tag logits [batch, time, 7]."""

    def __init__(self, cell: str):
        super().__init__()
        rnn = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
        self.embed = torch.nn.Embedding(VOCAB, EMB)
        self.rnn = rnn(EMB, HIDDEN, num_layers=LAYERS, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(2 * HIDDEN, TAGS)

    def forward(self, tokens, h0=None, c0=None):
        state = None if h0 is None else ((h0, c0) if c0 is not None else h0)
        out, _ = self.rnn(self.embed(tokens), state)
        return torch.log_softmax(self.head(out), dim=-1)


@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_tagger(cell, with_state):
    torch.manual_seed(0)
    batch, time = 3, 9
    args = [torch.randint(0, VOCAB, (batch, time))]
    dims = {"tokens": {0: "batch", 1: "time"}}
    if with_state:
        for name in ("h0", "c0") if cell == "lstm" else ("h0",):
            args.append(torch.randn(2 * LAYERS, batch, HIDDEN))
            dims[name] = {1: "batch"}
    r = check_export(Tagger(cell), tuple(args), dims, atol=1e-4, rtol=0.0,
                     sizes=[{"batch": 1, "time": 4}, {"batch": 5, "time": 17}],
                     expect_outputs={"output": ["batch", "time", TAGS]})
    assert count_ops(r, cell.upper()) == LAYERS
