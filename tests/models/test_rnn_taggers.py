"""LSTM and GRU sequence taggers: embedding, 2-layer bidirectional batch-first recurrent layer,
linear tag head; dynamic batch and time, with and without initial states, and over packed
sequences from lengths."""

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


class PackedTagger(Tagger):
    """The tagger over padded batches with lengths: pack_padded_sequence / pad_packed_sequence
    (ONNX sequence_lens); tags past each length are those of zero features."""

    def forward(self, tokens, lengths):
        packed = torch.nn.utils.rnn.pack_padded_sequence(self.embed(tokens), lengths, batch_first=True,
                                                         enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
        return torch.log_softmax(self.head(out), dim=-1)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_packed_tagger(cell):
    torch.manual_seed(0)
    tokens, lengths = torch.randint(0, VOCAB, (4, 11)), torch.tensor([7, 11, 2, 9])
    dims = {"tokens": {0: "batch", 1: "time"}, "lengths": {0: "batch"}}
    r = check_export(PackedTagger(cell), (tokens, lengths), dims,
                     atol=1e-4, rtol=0.0, sizes=[{"batch": 2, "time": 5}, {"batch": 6, "time": 23}],
                     inputs=[(torch.randint(0, VOCAB, (3, 8)), torch.tensor([1, 8, 4]))])
    assert count_ops(r, cell.upper()) == LAYERS
