"""lstm / gru / rnn_tanh / rnn_relu on ONNX LSTM, GRU, RNN: gate order, weights, layers, directions,
batch_first, initial states; packed sequences with ONNX sequence_lens; LSTM with projections as a
Scan over its cell, packed too; packing forms that cannot be captured raise clear errors."""

import pytest
import torch

from exportcheck import check_export, count_ops

_KINDS = {
    "lstm": (lambda **kw: torch.nn.LSTM(8, 16, **kw), "LSTM"),
    "gru": (lambda **kw: torch.nn.GRU(8, 16, **kw), "GRU"),
    "rnn_tanh": (lambda **kw: torch.nn.RNN(8, 16, **kw), "RNN"),
    "rnn_relu": (lambda **kw: torch.nn.RNN(8, 16, nonlinearity="relu", **kw), "RNN"),
}
_CONFIGS = {
    "1layer_time_major": dict(),
    "2layer_bidir_batch_first": dict(num_layers=2, bidirectional=True, batch_first=True),
    "3layer_bidir_no_bias": dict(num_layers=3, bidirectional=True, bias=False),
}


class _Rnn(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, h0=None, c0=None):
        state = None if h0 is None else ((h0, c0) if c0 is not None else h0)
        out, last = self.rnn(x, state)
        return (out, *last) if isinstance(last, tuple) else (out, last)


@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("config", list(_CONFIGS))
@pytest.mark.parametrize("kind", list(_KINDS))
def test_recurrent_layer(kind, config, with_state):
    make, onnx_op = _KINDS[kind]
    kw = _CONFIGS[config]
    model = _Rnn(make(**kw))
    batch, time = 3, 5
    bf = kw.get("batch_first", False)
    x = torch.randn(batch, time, 8) if bf else torch.randn(time, batch, 8)
    dims = {"x": {0: "batch", 1: "time"} if bf else {0: "time", 1: "batch"}}
    args = [x]
    if with_state:
        n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        args.append(torch.randn(n, batch, 16))
        dims["h0"] = {1: "batch"}
        if kind == "lstm":
            args.append(torch.randn(n, batch, 16))
            dims["c0"] = {1: "batch"}
    r = check_export(model, tuple(args), dims)
    assert count_ops(r, onnx_op) == kw.get("num_layers", 1)
    assert count_ops(r, "Loop") == count_ops(r, "Scan") == 0


class _Packed(torch.nn.Module):
    """pack_padded_sequence -> recurrent layer -> pad_packed_sequence, outputs and final states."""

    def __init__(self, rnn, padding_value=0.0, total_length=True):
        super().__init__()
        self.rnn, self.padding_value, self.total_length = rnn, padding_value, total_length

    def forward(self, x, lengths, h0=None, c0=None):
        state = None if h0 is None else ((h0, c0) if c0 is not None else h0)
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, last = self.rnn(packed, state)
        out, out_lengths = torch.nn.utils.rnn.pad_packed_sequence(
            out, batch_first=True, padding_value=self.padding_value,
            total_length=x.shape[1] if self.total_length else None)
        return (out, out_lengths, *last) if isinstance(last, tuple) else (out, out_lengths, last)


@pytest.mark.slow
@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("kind", list(_KINDS))
def test_packed_sequence_uses_sequence_lens(kind, with_state):
    make, onnx_op = _KINDS[kind]
    rnn = make(num_layers=2, bidirectional=True, batch_first=True)
    model = _Packed(rnn, padding_value=-1.0 if kind == "gru" else 0.0)
    x, lengths = torch.randn(3, 6, 8), torch.tensor([4, 6, 1])  # unsorted, one full, one of length 1
    args, dims = [x, lengths], {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}}
    if with_state:
        for name in ("h0", "c0") if kind == "lstm" else ("h0",):
            args.append(torch.randn(4, 3, 16))
            dims[name] = {1: "batch"}
    r = check_export(model, tuple(args), dims, inputs=[(torch.randn(2, 9, 8), torch.tensor([3, 9]), *args[2:])]
                     if not with_state else None)
    assert count_ops(r, onnx_op) == 2


def test_packed_sequence_without_total_length_unpacks_to_the_longest_length():
    model = _Packed(torch.nn.GRU(8, 16, batch_first=True), total_length=False).eval()
    x, lengths = torch.randn(3, 5, 8), torch.tensor([5, 2, 3])
    r = check_export(model, (x, lengths), {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}})
    report = r.validate(inputs=[(torch.randn(2, 9, 8), torch.tensor([4, 6]))], sizes=[])
    assert report.ok, report
    out = [c for c in report.checks if c.inputs == "inputs 1"][0]
    assert out.shape == (2, 6, 16)  # max(lengths) steps, not the padded 9
    assert model(x, lengths)[0].shape == (3, 5, 16)  # eager packing is left as it was


def test_packed_sequence_by_imported_name():
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    class Imported(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(8, 16, batch_first=True)

        def forward(self, x, lengths):
            out, _ = self.rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
            return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]

    x, lengths = torch.randn(3, 5, 8), torch.tensor([5, 2, 3])
    r = check_export(Imported(), (x, lengths), {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}},
                     inputs=[(torch.randn(2, 7, 8), torch.tensor([3, 7]))])
    assert count_ops(r, "LSTM") == 1
    assert Imported()(x, lengths).shape == (3, 5, 16)  # eager packing is left as it was


@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("config", list(_CONFIGS))
def test_lstm_with_projections_scans_its_cell(config, with_state):
    """nn.LSTM(proj_size=P): one Scan per layer (both directions in it), h of size P, c of size H."""
    kw = _CONFIGS[config]
    model = _Rnn(torch.nn.LSTM(8, 16, proj_size=6, **kw))
    batch, time = 3, 5
    bf = kw.get("batch_first", False)
    x = torch.randn(batch, time, 8) if bf else torch.randn(time, batch, 8)
    dims = {"x": {0: "batch", 1: "time"} if bf else {0: "time", 1: "batch"}}
    args = [x]
    layers, dirs = kw.get("num_layers", 1), 2 if kw.get("bidirectional") else 1
    if with_state:
        args += [torch.randn(layers * dirs, batch, 6), torch.randn(layers * dirs, batch, 16)]
        dims.update(h0={1: "batch"}, c0={1: "batch"})
    out = ["batch", "time", 6 * dirs] if bf else ["time", "batch", 6 * dirs]
    r = check_export(model, tuple(args), dims, expect_outputs={"output_0": out, "output_1": [layers * dirs, "batch", 6],
                                                               "output_2": [layers * dirs, "batch", 16]})
    assert count_ops(r, "Scan") == layers and count_ops(r, "LSTM") == 0


@pytest.mark.parametrize("with_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["forward", "bidirectional"])
def test_packed_lstm_with_projections(bidirectional, with_state):
    """Each sequence over its own length: final states at its last step, reverse from its end."""
    rnn = torch.nn.LSTM(8, 16, proj_size=6, num_layers=2, bidirectional=bidirectional, batch_first=True)
    model = _Packed(rnn, padding_value=-1.0)
    n = 2 * (2 if bidirectional else 1)
    x, lengths = torch.randn(3, 6, 8), torch.tensor([4, 6, 1])  # unsorted, one full, one of length 1
    args, dims = [x, lengths], {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}}
    if with_state:
        args += [torch.randn(n, 3, 6), torch.randn(n, 3, 16)]
        dims.update(h0={1: "batch"}, c0={1: "batch"})
    r = check_export(model, tuple(args), dims,
                     inputs=[(torch.randn(2, 9, 8), torch.tensor([3, 9]))] if not with_state else None)
    assert count_ops(r, "Scan") == 2 and count_ops(r, "LSTM") == 0


def test_recurrent_op_stays_whole_when_the_graph_is_decomposed():
    """Another op without a translation makes the graph go through decomposition: lstm stays whole."""
    from onnxport.translate import registry

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x):
            return torch.nn.functional.silu(self.rnn(x)[0])

    with registry.override({torch.ops.aten.silu.default: None}):
        r = check_export(M(), (torch.randn(2, 5, 8),), {"x": {0: "batch", 1: "time"}})
    assert count_ops(r, "LSTM") == 2 and count_ops(r, "Sigmoid") >= 1
