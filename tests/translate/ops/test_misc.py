"""to/_to_copy/type_as, clone/contiguous/alias/detach/lift_fresh_copy/copy, dropout in eval,
embedding (padding_idx), cumsum (dtype), topk/sort/argsort, tril/triu, one_hot."""

import onnx_ir as ir
import pytest
import onnxport
import torch
from torch.export import Dim

from exportcheck import check_export, DTYPES, Fn, make_tensor as _make


class Conversions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.3)

    def forward(self, x, y):
        c = torch.tensor([1.0, 2.0, 3.0])                      # lift_fresh_copy
        z = torch.zeros_like(y)
        z.copy_(x[:, :1])                                     # copy with broadcast and cast
        return (
            x.to(torch.float32), x.to(torch.int64), x.to(torch.bool), x.double(), x.to(y),
            x.type_as(y), x.clone(), x.t().contiguous(), x.detach(), torch.ops.aten.alias(x),
            self.drop(x.float()), torch.nn.functional.dropout(x.float(), 0.5, training=False),
            c.to(y.dtype) * 2, z,
        )


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_conversions_and_copies(dtype):
    check_export(Conversions(), (_make((3, 4), dtype), torch.randn(3, 4)), {"x": {0: "b"}, "y": {0: "b"}})


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4, padding_idx=0)
        self.emb2 = torch.nn.Embedding(10, 3)

    def forward(self, ids):
        return self.emb(ids), self.emb2(ids[:, :2]), torch.nn.functional.embedding(ids, self.emb.weight, padding_idx=3)


def test_embedding_padding_idx():
    check_export(Embed(), (torch.tensor([[0, 3, 9, 1], [2, 0, 0, 5]]),), {"ids": {0: "b", 1: Dim("t", min=3)}})


class Cumsum(torch.nn.Module):
    def forward(self, x):
        return (x.cumsum(1), x.cumsum(-1, dtype=torch.float64), torch.cumsum(x, 0, dtype=torch.float32),
                x[0, 0].cumsum(0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cumsum(dtype):
    check_export(Cumsum(), (_make((3, 5), dtype),), {"x": {0: "b", 1: "t"}})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cumsum_accumulates_in_torchs_cpu_accumulation_type(dtype):
    # float32 in float64, float16 in float32 (at::acc_type<T, false>), cast back to the result dtype
    x = (torch.randn(2, 3000) * 1000 + 300).to(dtype)
    r = check_export(Fn(lambda t: (t.cumsum(-1), t.cumsum(0))), (x,), {"x": {0: "b", 1: "t"}},
                     sizes=[{"b": 1, "t": 7}, {"b": 3, "t": 9000}])
    work = {torch.float32: ir.DataType.DOUBLE, torch.float16: ir.DataType.FLOAT}[dtype]
    assert [node.inputs[0].dtype for node in r.model.graph if node.op_type == "CumSum"] == [work, work]


class Ordering(torch.nn.Module):
    def forward(self, x):  # x: [b, t]
        return (
            *torch.topk(x, 3), *torch.topk(x, 2, dim=0, largest=False), *torch.topk(x, x.shape[1] - 1),
            *torch.sort(x, stable=True), *torch.sort(x, dim=0, descending=True, stable=True),
            torch.argsort(x, dim=1, stable=True), torch.argsort(x, dim=0, descending=True, stable=True),
        )


class Kth(torch.nn.Module):
    def forward(self, x):
        return (*torch.kthvalue(x, 2), *torch.kthvalue(x, 3, 0, keepdim=True), *x.kthvalue(x.shape[1] - 1, dim=1))


def test_kthvalue():
    check_export(Kth(), (torch.randn(4, 6),), {"x": {0: Dim("b", min=3), 1: Dim("t", min=3)}})


def test_topk_sort_argsort_float():
    check_export(Ordering(), (torch.randn(4, 6),), {"x": {0: Dim("b", min=3), 1: Dim("t", min=4)}})


def test_sort_stable_with_ties():
    class StableSort(torch.nn.Module):
        def forward(self, x):
            # equal values: topk's indices have no single right answer, its values do
            return (*torch.sort(x, stable=True), *torch.sort(x, dim=0, descending=True, stable=True),
                    torch.argsort(x, stable=True, descending=True), torch.topk(x, 3)[0])

    check_export(StableSort(), (torch.randint(0, 4, (5, 8)),), {"x": {0: "b", 1: Dim("t", min=3)}})


class Triangles(torch.nn.Module):
    def forward(self, x):
        return x.tril(), x.tril(-1), x.triu(), x.triu(2), torch.tril(x[0], 1), torch.triu(x, -2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tril_triu(dtype):
    check_export(Triangles(), (_make((2, 4, 5), dtype),), {"x": {0: "b", 1: "r", 2: "c"}})


class OneHot(torch.nn.Module):
    def forward(self, i):
        return torch.nn.functional.one_hot(i, 7), torch.nn.functional.one_hot(i % 3, 3).sum(1)


def test_one_hot():
    check_export(OneHot(), (torch.tensor([[0, 6, 2], [3, 3, 1]]),), {"i": {0: "b", 1: "t"}})


@pytest.mark.parametrize("index", [0, 4])
def test_one_hot_of_a_0d_index(index):
    # ONNX OneHot takes indices of rank >= 1 only
    fn = lambda i: (torch.nn.functional.one_hot(i, 7), torch.nn.functional.one_hot(i % 3, 3) * 2)  # noqa: E731
    check_export(Fn(fn), (torch.tensor(index),))


class Histc(torch.nn.Module):
    def forward(self, x, e):
        return (torch.histc(x, bins=5, min=-1.0, max=1.0), torch.histc(x, bins=7),
                torch.histc(e.float(), bins=4, min=0, max=3), torch.histc(x[:1, :1], bins=3))


def test_histc():
    check_export(Histc(), (torch.randn(4, 6), torch.tensor([0, 3, 3, 1, 2, 0, 5])), {"x": {0: "b"}, "e": {0: "n"}})


class OrderingAllTypes(torch.nn.Module):
    def forward(self, x):
        out = (*torch.sort(x, stable=True), torch.argsort(x, dim=0, descending=True, stable=True))
        if x.dtype == torch.bool:  # torch has no bool topk / kthvalue
            return out
        return (*out, torch.topk(x, 2)[0], torch.kthvalue(x, 2)[0])


@pytest.mark.parametrize("dtype", [torch.bool, torch.float16])
def test_ordering_other_dtypes(dtype):
    check_export(OrderingAllTypes(), (_make((4, 6), dtype if dtype == torch.bool else torch.float32).to(dtype),),
                 {"x": {0: "b"}})


def test_ordering_bfloat16_is_valid_onnx():
    """onnxruntime's CPU provider cannot run bfloat16 TopK; the model must still pass the full check."""
    import onnx

    from onnxport.translate.dtypes import onnx_dtype

    x = torch.randn(4, 6, dtype=torch.bfloat16)
    r = onnxport.to_onnx(OrderingAllTypes(), (x,), dynamic_shapes={"x": {0: "b"}})
    onnx.checker.check_model(r.model_proto, full_check=True)
    eager = OrderingAllTypes()(x)
    outs = r.model_proto.graph.output
    assert [o.type.tensor_type.elem_type for o in outs] == [int(onnx_dtype(t.dtype)) for t in eager]
    assert [[d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim] for o in outs] == \
        [["b", *t.shape[1:]] for t in eager]


_ALPHA = 1.7580993408473766


@pytest.mark.parametrize("kind", ["dropout", "dropout2d", "alpha_dropout", "feature_alpha_dropout"])
@pytest.mark.parametrize("p", [0.3, 1.0])
def test_dropout_when_training_keeps_pytorch_s_values(kind, p):
    """The ONNX model draws its own masks: every output element is one of the values PyTorch can
    give it, whole channels share the mask in the feature forms, and p = 1 gives zeros."""
    from onnxport.verify import OrtRunner

    fn = getattr(torch.nn.functional, kind)
    x = torch.randn(4, 6, 50)
    result = onnxport.to_onnx(Fn(lambda t: fn(t, p, training=True)), (x,))
    (got,) = OrtRunner(result.model_proto).run([x])
    got, xs = torch.from_numpy(got), x
    if p == 1:
        assert torch.equal(got, xs * 0)
        return
    if kind.startswith("alpha") or kind.startswith("feature_alpha"):
        a = 1 / ((_ALPHA ** 2 * p + 1) * (1 - p)) ** 0.5
        kept, dropped = xs * a + _ALPHA * a * p, torch.full_like(xs, -_ALPHA * a * (1 - p))
    else:
        kept, dropped = xs / (1 - p), torch.zeros_like(xs)
    is_kept = torch.isclose(got, kept, atol=1e-5)
    assert (is_kept | torch.isclose(got, dropped, atol=1e-5)).all()
    assert 0.5 * (1 - p) < is_kept.float().mean() < 1.5 * (1 - p)
    if kind in ("dropout2d", "feature_alpha_dropout"):
        per_channel = is_kept.float().mean(-1)
        assert ((per_channel == 0) | (per_channel == 1)).all()
