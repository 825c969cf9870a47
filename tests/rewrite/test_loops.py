"""rewrite_control_flow: ``for i in range(<dynamic size>)`` loops -> scan -> ONNX Scan.

Row writes into preallocated tensors, list append + torch.stack / torch.cat, carried tensors, the
loop index in arithmetic, loops in submodule methods; every model is exported with dynamic sizes
and compared with the original module at other sizes (the trip count follows the input)."""

import numpy as np
import onnxruntime as ort
import pytest
import scipy.spatial.distance
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export, count_ops
from onnxport.rewrite import RewriteError, rewrite_module


class Loop(torch.nn.Module):
    """The reference loop: one row of pairwise distances per iteration."""

    def forward(self, x, y):
        dist = torch.empty(x.shape[0], y.shape[0])
        for i in range(x.shape[0]):
            dist[i, :] = torch.sqrt(((y - x[i:i+1]) ** 2).sum(1))
        return dist


def test_reference_loop_matches_cdist_at_every_size():
    x_rows, y_rows, dim = Dim("x_rows"), Dim("y_rows"), Dim("dim")
    result = check_export(Loop(), (torch.randn(3, 4), torch.randn(5, 4)),
                          {"x": {0: x_rows, 1: dim}, "y": {0: y_rows, 1: dim}}, rewrite_control_flow=True,
                          expect_outputs={"output": ["x_rows", "y_rows"]})
    assert count_ops(result, "Scan") == 1
    session = ort.InferenceSession(result.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for nx, ny, d in [(1, 1, 3), (7, 2, 4), (30, 11, 9)]:
        x = rng.standard_normal((nx, d)).astype(np.float32)
        y = rng.standard_normal((ny, d)).astype(np.float32)
        (got,) = session.run(None, {"x": x, "y": y})
        np.testing.assert_allclose(got, scipy.spatial.distance.cdist(x, y), rtol=1e-5, atol=1e-5)


def test_without_rewrite_the_loop_is_refused_with_the_hint():
    with pytest.raises(onnxport.ExportError, match="rewrite_control_flow"):
        onnxport.to_onnx(Loop(), (torch.randn(3, 4), torch.randn(5, 4)),
                         dynamic_shapes={"x": {0: Dim("x_rows")}, "y": {0: Dim("y_rows")}}, rewrite_control_flow=False)


class TwoStateCell(torch.nn.Module):
    """An LSTM-like cell over time (``T`` unpacked from the shape) with two carried tensors, outputs
    appended and stacked on dim 1, and column writes ``trace[:, step] = ...``."""

    def __init__(self):
        super().__init__()
        self.gates = torch.nn.Linear(4 + 5, 10)

    def forward(self, seq):  # [B, T, 4]
        B, T, _ = seq.shape
        state = seq.new_zeros(B, 5)
        memory = torch.zeros(seq.size(0), 5)
        trace = torch.zeros(B, T)
        collected = []
        for step in range(T):
            g = self.gates(torch.cat([seq[:, step, :], state], dim=-1))
            memory = memory * torch.sigmoid(g[:, :5]) + torch.tanh(g[:, 5:])
            state = torch.tanh(memory)
            collected.append(state * 2)
            trace[:, step] = memory.sum(-1)
        return torch.stack(collected, dim=1), memory, trace


class CatRows(torch.nn.Module):
    """Appends one [1, D] row per step (the index in arithmetic) and concatenates along dims 0 and -1;
    ``for layer in self.layers`` stays a Python loop, ``for row in feats`` scans the rows."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(2)])

    def forward(self, feats, bias):  # feats [N, D], bias [D]
        for layer in self.layers:
            feats = layer(feats)
        pieces = []
        for k in range(len(feats)):
            pieces.append((feats[k] * k + bias).unsqueeze(0))
        acc = torch.zeros(feats.shape[1])
        history = []
        for row in feats:
            acc = acc * 0.5 + row
            history.append(acc)
        return torch.cat(pieces, 0), torch.cat(pieces, dim=-1), torch.stack(history)


class IndexedRows(torch.nn.Module):
    """Row writes ``out[j] = ...`` reading ``x[j - 1]`` (a tensor index; ``x[-1]`` when j is 0)."""

    def forward(self, x):  # [N, D]
        out = torch.zeros_like(x)
        for j in range(x.shape[0]):
            out[j] = x[j] - x[j - 1] + j
        return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_row_writes_with_index_arithmetic(dtype):
    x = torch.randint(-5, 6, (4, 3)).to(dtype)
    result = check_export(IndexedRows(), (x,), ({0: Dim("n"), 1: Dim("d")},), rewrite_control_flow=True,
                          inputs=[(torch.randint(-5, 6, (n, 2)).to(dtype),) for n in (2, 9)])
    assert count_ops(result, "Scan") == 1


@pytest.mark.slow
def test_two_carried_tensors_stacked_on_dim_1_and_column_writes():
    B, T = Dim("B"), Dim("T")
    result = check_export(TwoStateCell(), (torch.randn(2, 5, 4),), ({0: B, 1: T},), rewrite_control_flow=True,
                          inputs=[(torch.randn(3, 1, 4),), (torch.randn(1, 8, 4),)])
    assert count_ops(result, "Scan") == 1


@pytest.mark.slow
def test_appended_rows_concatenated_and_rows_iterated():
    N = Dim("N")
    result = check_export(CatRows(), (torch.randn(4, 3), torch.randn(3)), ({0: N}, None), rewrite_control_flow=True,
                          inputs=[(torch.randn(1, 3), torch.randn(3)), (torch.randn(7, 3), torch.randn(3))])
    assert count_ops(result, "Scan") == 2
    assert count_ops(result, "Gemm") + count_ops(result, "MatMul") == 2  # the two layers, unrolled


class Nested(torch.nn.Module):
    """A loop over the rows of ``b`` (with its own carry and list) inside a loop over the rows of ``a``."""

    def forward(self, a, b):  # [N, D], [M, D]
        sims = torch.zeros(a.shape[0], b.shape[0])
        for p in range(a.shape[0]):
            best = torch.zeros(())
            row = []
            for q in range(b.shape[0]):
                tmp = (a[p] * b[q]).sum()
                best = torch.maximum(best, tmp)
                row.append(tmp - best)
            sims[p] = torch.stack(row)
        return sims


@pytest.mark.slow
def test_nested_loops():
    result = check_export(Nested(), (torch.randn(3, 4), torch.randn(5, 4)), ({0: Dim("n")}, {0: Dim("m")}),
                          rewrite_control_flow=True,
                          inputs=[(torch.randn(1, 4), torch.randn(6, 4)), (torch.randn(4, 4), torch.randn(1, 4))])
    assert count_ops(result, "Scan") == 2


class BoundOnEveryPath(torch.nn.Module):
    """Funnel's encoder: inside the loop an ``if`` binds query, key and value on both sides, so
    their values never pass from one iteration to the next (nor from the enclosing loop's)."""

    def forward(self, x):
        hidden = x
        for block in range(2):
            for r in range(x.shape[0]):
                if r == 0:
                    query = hidden * 2
                    key = value = hidden + 1
                else:
                    query = key = value = hidden
                hidden = torch.tanh(query + key * value + x[r])
        return hidden


@pytest.mark.slow
def test_names_an_inner_if_binds_on_every_path_are_not_carried():
    notes = rewrite_module(BoundOnEveryPath(), (torch.randn(3, 4),), warn=False).onnxport_rewrite_notes
    inner = [n for n in notes if n.construct == "for" and "x.shape[0]" in n.detail]
    assert inner and inner[0].rewritten and "carry hidden;" in inner[0].detail, [str(n) for n in notes]
    result = check_export(BoundOnEveryPath(), (torch.randn(3, 4),), ({0: Dim("n")},), rewrite_control_flow=True,
                          inputs=[(torch.randn(1, 4),), (torch.randn(6, 4),)])
    assert count_ops(result, "Scan") >= 1


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.encode(x)

    def encode(self, frames):  # a method reached from forward
        acc = torch.zeros(frames.shape[1])
        rows = torch.empty(frames.shape[0], frames.shape[1])
        for t in range(frames.shape[0]):
            acc = acc + self.proj(frames[t])
            rows[t] = acc
        return rows


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()

    def forward(self, x):
        return self.enc(x).relu()


def test_loop_in_a_submodule_method_and_the_user_module_untouched():
    model = Outer().eval()
    forward_before = type(model.enc).encode
    result = check_export(model, (torch.randn(4, 3),), ({0: Dim("T")},), rewrite_control_flow=True,
                          inputs=[(torch.randn(1, 3),), (torch.randn(6, 3),)])
    assert count_ops(result, "Scan") == 1
    assert type(model.enc) is Encoder and Encoder.encode is forward_before and "forward" not in vars(model.enc)
    rewritten = rewrite_module(model, (torch.randn(4, 3),))
    assert rewritten is not model and rewritten.enc is not model.enc
    assert rewritten.enc.proj is model.enc.proj  # parameters shared
    (note,) = rewritten.onnxport_rewrite_notes
    assert note.rewritten and note.construct == "for" and "in encode" in note.where


class Breaks(torch.nn.Module):
    def forward(self, x):
        total = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            if i > 2:
                break
            total = total + x[i]
        return total


def test_unhandled_loop_is_left_alone_with_its_line():
    model = Breaks()
    x = torch.randn(5, 3)
    with pytest.warns(UserWarning, match="left as Python"):
        rewritten = rewrite_module(model, (x,))
    (note,) = [n for n in rewritten.onnxport_rewrite_notes if n.construct == "for"]
    assert not note.rewritten and "break" in note.detail
    assert note.where.endswith(f":{Breaks.forward.__code__.co_firstlineno + 2} in forward")
    torch.testing.assert_close(rewritten(x), model(x))


class PerHeadScan(torch.nn.Module):
    """Zamba's mixer in small: a loop over the heads (a constant count) reading rows of per-head
    tensors, around a size-dependent branch (rewritten into torch.cond), whose last result is read
    after it: the loop is not a scan and must stay exactly as written."""

    def __init__(self):
        super().__init__()
        self.heads = 2
        self.weight = torch.nn.Parameter(torch.randn(2, 4))

    def forward(self, x):  # x: [heads, n, 4]
        if x.shape[1] == 1:
            y = x * 2
        else:
            outputs = []
            for head in range(self.heads):
                result = torch.tanh(x[head] * self.weight[head])
                outputs.append(result)
            y = torch.stack(outputs) + result.sum()
        return y


def test_a_refused_loop_keeps_its_reads_of_the_loop_variable():
    model = PerHeadScan()
    x = torch.randn(2, 5, 4)
    rewritten = rewrite_module(model, (x,), warn=False)
    for n in (1, 5):
        x = torch.randn(2, n, 4)
        torch.testing.assert_close(rewritten(x), model(x))
    check_export(PerHeadScan(), (x,), {"x": {1: Dim("n", min=2)}}, inputs=[(torch.randn(2, 9, 4),)])


def test_a_wrong_rewrite_is_caught_by_the_eager_check(monkeypatch):
    from onnxport.rewrite import loops

    monkeypatch.setattr(loops, "write_rows", lambda out, ys, d, start: out)  # drops the loop's rows
    with pytest.raises(RewriteError, match="differs from the original") as info:
        rewrite_module(Loop(), (torch.randn(3, 4), torch.randn(5, 4)))
    assert info.value.where.endswith("in forward")


class Chunked(torch.nn.Module):
    """EnCodec's encoder: ``for offset in range(0, n, stride)`` with ``stride = n`` when no chunk
    length is configured (one step at every length), else a fixed chunk (a count that depends on n)."""

    def __init__(self, chunk=None):
        super().__init__()
        self.chunk = chunk
        self.conv = torch.nn.Conv1d(1, 2, 3, padding=1)

    def forward(self, x):  # [b, 1, n]
        n = x.shape[-1]
        chunk, stride = (n, n) if self.chunk is None else (self.chunk, self.chunk)
        frames = []
        for offset in range(0, n, stride):
            frames.append(self.conv(x[..., offset:offset + chunk]))
        return torch.stack(frames)


def test_a_range_with_a_step_of_the_whole_length_is_one_step_at_every_length():
    result = check_export(Chunked(), (torch.randn(2, 1, 50),), ({0: "b", 2: "n"},), values=[],
                          sizes=[{"b": 1, "n": 7}, {"b": 3, "n": 100}], expect_outputs={"output": [1, "b", 2, "n"]})
    assert any(n.rewritten and "range() with a step" in n.detail for n in result.rewrite_notes)


def test_a_range_with_a_fixed_step_over_a_dynamic_length_is_still_refused():
    with pytest.raises(onnxport.SpecializationError, match="range\\(0, n, stride\\)"):
        onnxport.to_onnx(Chunked(chunk=16), (torch.randn(2, 1, 48),), dynamic_shapes=({0: "b", 2: "n"},))
