"""slice/select/narrow, advanced indexing (index.Tensor), index_put, gather/scatter family,
index_select, masked_fill, masked_scatter, nonzero, nonzero_static, slice_scatter/select_scatter."""

import pytest
import torch
from torch.export import Dim

from exportcheck import check_export, DTYPES, make_tensor as _make


class Slices(torch.nn.Module):
    def forward(self, x):  # x: [b, t, 6]
        b, t = x.shape[0], x.shape[1]
        return (
            x[:, 1:-1:2], x[..., -3:], x[1:], x[:, : t - 1], x[:, 2:t], x[:, :, ::4], x[:, -100:100],
            x[-1], x[:, 0], x[:, -2, 1:], x[b - 1], x[:, t - 2],
            x.narrow(1, 1, 2), x.narrow(2, -3, 2), x.narrow(1, 0, t - 1),
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_slice_select_narrow(dtype):
    # the slices' sizes make torch.export guard on small sizes: b >= 3, 5 <= t <= 99
    check_export(Slices(), (_make((3, 5, 6), dtype),), {"x": {0: Dim("b", min=3), 1: Dim("t", min=5, max=99)}})


class AdvancedIndex(torch.nn.Module):
    def forward(self, x, i, j, m):  # x: [b, 4, 5], i: [k] in [-2, 1], j: [k], m: [4, 5] bool
        return (
            x[i],                    # one index tensor: Gather
            x[:, i],
            x[i, j],                 # leading, broadcast together
            x[:, i, j],              # adjacent, not leading: result dims stay in place
            x[i, :, j],              # not adjacent: result dims first
            x[i[:, None], :, j[None, :]],   # index tensors broadcast to [k, k], not adjacent
            x[:, m],                 # bool mask over trailing axes
            x[x > 0.5] if x.dtype != torch.bool else x[x],
            x[:, m[:, 0]],           # 1-D mask
        )


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_index_tensor(dtype):
    i = torch.tensor([0, -1, 1, -2, 0])
    j = torch.tensor([3, -4, 0, 2, 1])
    m = torch.rand(4, 5) > 0.4
    check_export(AdvancedIndex(), (_make((3, 4, 5), dtype), i, j, m),
                 {"x": {0: "b"}, "i": {0: "k"}, "j": {0: "k"}, "m": None})


class IndexPut(torch.nn.Module):
    def forward(self, x, v, i, m):  # x: [b, 4, 5], v: [5], i: [k] in [-2, 1] (duplicates), m: [b, 4] bool
        n = x.shape[1]
        perm = torch.arange(n).flip(0)                       # distinct indices
        perm_b = torch.arange(x.shape[0]).flip(0)
        a = x.clone()
        a[perm_b[:2]] = v                                    # index_put, broadcast values
        b = x.clone()
        b[:, perm[1:3], 1] = v[0]                            # adjacent, not leading
        c = torch.index_put(x, (i,), v, accumulate=True)     # duplicates accumulate
        d = torch.ops.aten.index_put(x, [None, perm, perm], v[:4], True)
        e = x.clone()
        e[m] = v[1]                                          # bool mask with a scalar value: Where
        f = x.clone()
        f[m] = x[m].flip(0)                                  # bool mask with a value per selected row
        g = torch.ops.aten.index_put(x, [perm_b[:2], None, perm[:2]], v[:4], True)  # not adjacent
        return a, b, c, d, e, f, g


# x[:2] of a dynamic axis: torch.export traces it as 2 rows (it assumes dynamic sizes >= 2), so the
# export holds from b = k = 2 on, which the tests declare
B2, K2 = Dim("b", min=2), Dim("k", min=2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_put(dtype):
    check_export(IndexPut(), (_make((3, 4, 5), dtype), _make((5,), dtype), torch.tensor([0, 1, -1, 1, -2, 0]),
                              torch.rand(3, 4) > 0.5),
                 {"x": {0: B2}, "v": None, "i": {0: K2}, "m": {0: B2}})


class GatherScatter(torch.nn.Module):
    def forward(self, x, src, idx):  # x: [b, 6], src: [b, 6], idx: [b, 3] in [0, 5]
        perm = (torch.argsort(x.float(), dim=1)[:, :4] if x.dtype != torch.bool
                else torch.arange(4).expand(x.shape[0], 4))
        return (
            torch.gather(x, 1, idx),
            torch.gather(x, 0, idx[:1] % x.shape[0]),
            torch.scatter(x, 1, perm, src),                       # src larger than index: src[:index.shape]
            torch.scatter(x, 1, perm, src[:, :4]),
            torch.scatter(x, 1, perm, 1),                         # scatter.value
            torch.index_select(x, 1, idx[0]),
            torch.index_select(x, 0, idx[0] % x.shape[0]),
        )


class ScatterReduce(torch.nn.Module):
    def forward(self, x, src, idx):  # duplicates in idx
        out = [torch.scatter_add(x, 1, idx, src)]
        for reduce in ("sum", "prod", "amax", "amin", "mean"):
            for include_self in (True, False):
                out.append(torch.scatter_reduce(x, 1, idx, src, reduce, include_self=include_self))
        out.append(torch.scatter(x, 1, idx, src, reduce="add"))
        out.append(torch.scatter(x, 1, idx, src, reduce="multiply"))
        return tuple(out)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_scatter_index_select(dtype):
    idx = torch.tensor([[0, 5, 2], [1, 1, 4], [5, 0, 3]])
    check_export(GatherScatter(), (_make((3, 6), dtype), _make((3, 6), dtype), idx),
                 {"x": {0: "b"}, "src": {0: "b"}, "idx": {0: "b"}})


class Take(torch.nn.Module):
    def forward(self, x, idx):
        return torch.take(x, idx), torch.take(x[0, 0], idx[0, :1].sum() * 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_take_reads_the_flattened_tensor(dtype):
    idx = torch.tensor([[0, -1, 7], [17, 3, -18]])
    check_export(Take(), (_make((3, 6), dtype), idx))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce(dtype):
    idx = torch.tensor([[0, 5, 5, 0], [1, 1, 1, 4], [5, 0, 3, 3]])
    x = _make((3, 6), dtype)
    src = _make((3, 4), dtype) if dtype != torch.int64 else torch.randint(-3, 4, (3, 4))
    check_export(ScatterReduce(), (x, src, idx), {"x": {0: "b"}, "src": {0: "b"}, "idx": {0: "b"}})


class Masks(torch.nn.Module):
    def forward(self, x, m, src):  # x: [b, t], m: [b, t] bool, src: [200]
        return (
            x.masked_fill(m, 2),
            x.masked_fill(m[:, :1], x[0, 0]),                  # masked_fill.Tensor, broadcast mask
            x.masked_scatter(m, src),
            x.masked_scatter(m[:1], src),                      # broadcast mask
            torch.nonzero(m),
            torch.nonzero(x),
            torch.masked_select(x, m), torch.masked_select(x, m[:, :1]),
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_masks_nonzero(dtype):
    b, t = 3, 4
    check_export(Masks(), (_make((b, t), dtype), torch.rand(b, t) > 0.5, _make((200,), dtype)),
                 {"x": {0: "b", 1: "t"}, "m": {0: "b", 1: "t"}, "src": None})


class NonzeroStatic(torch.nn.Module):
    def forward(self, x, m):  # x: [b, t], m: [b, t] bool
        return (
            torch.nonzero_static(x, size=5),                               # padded or cut: fixed size
            torch.nonzero_static(m, size=x.shape[0] * x.shape[1], fill_value=-7),  # SymInt size
            torch.nonzero_static(x[0, 0], size=3),                         # 0-d: [3, 0]
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_nonzero_static(dtype):
    check_export(NonzeroStatic(), (_make((3, 4), dtype), torch.rand(3, 4) > 0.5),
                 {"x": {0: "b", 1: "t"}, "m": {0: "b", 1: "t"}})


class ScatterSlices(torch.nn.Module):
    def forward(self, x, v):  # x: [b, t], v: [b]
        a = x.clone()
        a[:, 1:-1:2] = 0                                       # slice_scatter / copy
        b = x.clone()
        b[:, -1] = v                                           # select_scatter
        c = torch.slice_scatter(x, x[:, ::2] * 2, 1, 0, None, 2)
        d = torch.select_scatter(x, v, 1, 0)
        return a, b, c, d


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_slice_select_scatter(dtype):
    check_export(ScatterSlices(), (_make((3, 6), dtype), _make((3,), dtype)),
                 {"x": {0: Dim("b"), 1: Dim("t", min=5)}, "v": {0: Dim("b")}})


def test_opset18_scatter_reduce_index_put_index():
    """ScatterElements min/max reductions and ScatterND add exist from opset 18 on."""
    idx = torch.tensor([[0, 5, 5, 0], [1, 1, 1, 4], [5, 0, 3, 3]])
    check_export(ScatterReduce(), (torch.randn(3, 6), torch.randn(3, 4), idx),
                 {"x": {0: "b"}, "src": {0: "b"}, "idx": {0: "b"}}, opset=18)
    check_export(IndexPut(), (torch.randn(3, 4, 5), torch.randn(5), torch.tensor([0, 1, -1, 1, -2, 0]),
                              torch.rand(3, 4) > 0.5),
                 {"x": {0: B2}, "v": None, "i": {0: K2}, "m": {0: B2}}, opset=18)


class IndexEdges(torch.nn.Module):
    def forward(self, x, i, m):  # x: [3, 4, c], i: [k] in [-1, 2], m: [3] bool
        return (
            x[m, :, i[:1]],                                      # bool mask and int index together
            x[:, i.int()], x[i.int(), 1:3],                      # int32 indices
            x[i.view(-1, 1)],                                    # 2-D index
            x[:, torch.tensor(1)],                               # 0-d index drops the axis
            torch.index_put(x, (m,), x[0, 0]),                   # row mask, broadcast values
            torch.ops.aten.index_put(x, [None, torch.tensor([0, 2])], x[:1, :1, :] * 2, True),
            torch.ops.aten.index_put(x, [i[:2], None, torch.tensor([1, 0])], x[0, :, :2].t(), False),
        )


class NearestUpsampleIndex(torch.nn.Module):
    def forward(self, x):  # the form upsample decompositions take: broadcast [H, 1] and [W] indices
        h, w = x.shape[2], x.shape[3]
        ih = (torch.arange(2 * h) // 2)[:, None]
        iw = torch.arange(2 * w) // 2
        return torch.ops.aten._unsafe_index(x, [None, None, ih, iw]), x[:, :, ih, iw.flip(0)]


def test_unsafe_index_broadcast():
    check_export(NearestUpsampleIndex(), (torch.randn(2, 3, 4, 5),), {"x": {0: "b", 2: "h", 3: "w"}})


def test_index_edge_cases():
    check_export(IndexEdges(), (torch.randn(3, 4, 5), torch.tensor([0, -1, 1, 2]), torch.tensor([True, False, True])),
                 {"x": {2: Dim("c", min=3)}, "i": {0: K2}, "m": None})


class ScatterEmbeddings(torch.nn.Module):
    """A multimodal model's placement of audio embeddings at its audio tokens: none in a text-only
    input, whose source has no rows."""

    def forward(self, text, is_audio, audio):  # text: [b, t, 4], is_audio: [b, t] bool, audio: [n, 4]
        return text.masked_scatter(is_audio.unsqueeze(-1), audio)


def test_masked_scatter_of_an_empty_source_where_the_mask_has_no_true():
    b, t = 2, 5
    mask = torch.zeros(b, t, dtype=torch.bool)
    check_export(ScatterEmbeddings(), (torch.randn(b, t, 4), mask, torch.randn(0, 4)),
                 {"text": {0: "b", 1: "t"}, "is_audio": {0: "b", 1: "t"}, "audio": {0: "n"}}, values=[],
                 inputs=[(torch.randn(3, 2, 4), torch.zeros(3, 2, dtype=torch.bool), torch.randn(0, 4)),
                         (torch.randn(1, 4, 4), torch.tensor([[False, True, True, False]]), torch.randn(2, 4))])
