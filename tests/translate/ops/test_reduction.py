"""Reductions: exported modules against eager PyTorch (tests ops/reduction.py)."""

import math

import pytest
import torch

from exportcheck import check_export, count_ops, Fn

DYN = {"x": {0: "batch", 1: "n"}}


def make(dtype, shape=(3, 4, 5)):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype == torch.int64:
        return torch.randint(-3, 4, shape)
    return torch.randn(shape, dtype=dtype)


DTYPES = [torch.float32, torch.int64, torch.bool]
DIMS = [None, 1, -1, [0, 2], []]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", DIMS)
def test_sum(dtype, dim):
    x = make(dtype)
    if dim is None:
        fn = lambda t: (t.sum(), torch.sum(t, dtype=torch.float32))  # noqa: E731
    else:
        fn = lambda t: (t.sum(dim), t.sum(dim, keepdim=True))  # noqa: E731
    check_export(Fn(fn), (x,), DYN)


@pytest.mark.parametrize("dim", DIMS)
def test_mean(dim):
    fn = (lambda t: t.mean()) if dim is None else (lambda t: (t.mean(dim), t.mean(dim, keepdim=True)))
    check_export(Fn(fn), (make(torch.float32),), DYN)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prod(dtype):
    x = make(dtype)
    check_export(Fn(lambda t: (t.prod(1), t.prod(-1, keepdim=True), t.prod())), (x,), DYN)


@pytest.mark.parametrize("dtype", DTYPES)
def test_amax_amin_max_min_full(dtype):
    fn = lambda t: (t.amax(1), t.amin([0, 2], keepdim=True), t.amax(), t.max(), t.min())  # noqa: E731
    check_export(Fn(fn), (make(dtype),), DYN)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_max_min_dim_values_and_first_index(dtype, dim):
    x = make(dtype)  # int and bool inputs have ties: PyTorch returns the first index
    fn = lambda t: (*t.max(dim), *t.min(dim, keepdim=True))  # noqa: E731
    check_export(Fn(fn), (x,), DYN)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_argmax_argmin(dtype):
    x = make(dtype)
    fn = lambda t: (t.argmax(), t.argmin(keepdim=True), t.argmax(1), t.argmin(-1, keepdim=True))  # noqa: E731
    check_export(Fn(fn), (x,), DYN)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["var", "std"])
@pytest.mark.parametrize("args", [
    dict(), dict(dim=1), dict(dim=[0, 2], keepdim=True), dict(dim=-1, correction=0), dict(dim=1, correction=2),
    dict(dim=1, unbiased=False), dict(unbiased=False),
])
def test_var_std(kind, args):
    fn = getattr(torch, kind)
    check_export(Fn(lambda t: fn(t, **args)), (make(torch.float32) * 3 + 1,), DYN)


def test_var_mean_std_mean():
    fn = lambda t: (*torch.var_mean(t, 1), *torch.std_mean(t, [0, 2], correction=0, keepdim=True))  # noqa: E731
    check_export(Fn(fn), (make(torch.float32),), DYN)


@pytest.mark.parametrize("dtype", DTYPES)
def test_any_all(dtype):
    x = make(dtype)
    fn = lambda t: (t.any(), t.all(), t.any(1), t.all(-1, keepdim=True), torch.any(t, dim=(0, 2)))  # noqa: E731
    check_export(Fn(fn), (x,), DYN)


def test_is_all_true():
    """aten._is_all_true (behind torch._check and transformers' torch_compilable_check) on bool
    tensors of dynamic size, all True and not."""
    fn = lambda t: (torch.ops.aten._is_all_true(t > -10), torch.ops.aten._is_all_true(t > 0))  # noqa: E731
    check_export(Fn(fn), (torch.randn(3, 5),), ({0: "rows", 1: "cols"},), sizes=[{"rows": 1, "cols": 1}])


def test_logsumexp_with_infinities():
    x = make(torch.float32)
    x[0, 1] = float("-inf")
    x[1, 2, 3] = float("inf")
    fn = lambda t: (torch.logsumexp(t, -1), torch.logsumexp(t, [0, 1], keepdim=True))  # noqa: E731
    check_export(Fn(fn), (x,), DYN)


def test_logsumexp_large_values_int_input():
    fn = lambda t: (torch.logsumexp(t * 100.0, 1), torch.logsumexp(t.long(), 1))  # noqa: E731
    check_export(Fn(fn), (make(torch.float32),), DYN)


@pytest.mark.parametrize("ord", [2, 1, math.inf, -math.inf, 0, 3])
def test_vector_norm(ord):
    fn = lambda t: (torch.linalg.vector_norm(t, ord), torch.linalg.vector_norm(t, ord, dim=1, keepdim=True))  # noqa: E731
    check_export(Fn(fn), (make(torch.float32),), DYN)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod(dtype, dim):
    x = make(dtype)
    check_export(Fn(lambda t: torch.cumprod(t, dim)), (x,), DYN)


def test_cumprod_zeros_negatives_and_dtype():
    x = torch.tensor([[1.5, -2.0, 0.0, 3.0], [-1.0, -1.0, 2.0, 0.5]])
    check_export(Fn(lambda t: (torch.cumprod(t, 1), torch.cumprod(t, 0, dtype=torch.float64))), (x,), DYN)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, -1])
def test_cummax_cummin_last_index_on_ties(dtype, dim):
    fn = lambda t: (*torch.cummax(t, dim), *torch.cummin(t, dim))  # noqa: E731
    check_export(Fn(fn), (make(dtype),), DYN)


def test_logcumsumexp_median_dist():
    class M(torch.nn.Module):
        def forward(self, x, y):
            return torch.logcumsumexp(x * 30, 1), torch.median(x), torch.dist(x, y), torch.dist(x, y, 1)

    x, y = make(torch.float32), make(torch.float32)
    check_export(M(), (x, y), {"x": {0: "batch", 1: "n"}, "y": {0: "batch", 1: "n"}})


def with_nans(shape):
    x = torch.randn(shape)
    x[1, 2] = float("nan")
    x[-1, 0] = float("nan")
    x[0, -1] = float("inf")
    return x


@pytest.mark.parametrize("name", ["amax", "amin", "max_all", "min_all", "max_dim", "min_dim", "argmax", "argmin",
                                  "argmax_all", "cummax", "cummin", "median"])
def test_nan_propagates_as_in_pytorch(name):
    fn = {
        "amax": lambda t: t.amax(1), "amin": lambda t: t.amin(0, keepdim=True), "max_all": lambda t: t.max(),
        "min_all": lambda t: t.min(), "max_dim": lambda t: t.max(1), "min_dim": lambda t: t.min(0),
        "argmax": lambda t: t.argmax(1), "argmin": lambda t: t.argmin(0), "argmax_all": lambda t: t.argmax(),
        "cummax": lambda t: t.cummax(1), "cummin": lambda t: t.cummin(0), "median": torch.median,
    }[name]
    dyn = {"x": {0: "batch", 1: "n"}}
    check_export(Fn(fn), (with_nans((4, 5)),), dyn, inputs=[(with_nans((3, 7)),), (with_nans((6, 3)),)])


def test_output_dim_names():
    fn = lambda t: (t.sum(1), t.amax(-1, keepdim=True), t.var([0, 2]), t.argmax(1))  # noqa: E731
    check_export(Fn(fn), (make(torch.float32),), DYN,
                 expect_outputs={"output_0": ["batch", 5], "output_1": ["batch", "n", 1], "output_2": ["n"],
                                 "output_3": ["batch", 5]})


@pytest.mark.parametrize("shape", [(0, 3), (4, 0), (0,)])
def test_mean_over_an_empty_axis_is_nan(shape):
    # PyTorch gives NaN for the mean of nothing; onnxruntime's ReduceMean gives 0
    fn = lambda t: (t.mean(0), t.mean(), torch.var_mean(t), torch.std_mean(t, 0, keepdim=True))  # noqa: E731
    check_export(Fn(fn), (torch.randn(shape),))


def test_mean_over_a_dynamic_axis_of_size_zero_at_run_time():
    n = torch.export.Dim("n", min=0)
    check_export(Fn(lambda t: (t.mean(0), torch.var_mean(t, 0))), (torch.randn(4, 3),), {"x": {0: n}},
                 sizes=[{"n": 0}, {"n": 1}, {"n": 7}])


@pytest.mark.parametrize("value", [-2.5, 3.0, 0.0])
def test_norms_of_a_0d_tensor_are_its_absolute_value(value):
    fn = lambda t: (torch.linalg.vector_norm(t), torch.linalg.vector_norm(t, ord=1), t.norm(),  # noqa: E731
                    torch.masked.norm(t, 2, mask=t > -10), torch.linalg.vector_norm(t, ord=3))
    check_export(Fn(fn), (torch.tensor(value),))


@pytest.mark.parametrize("low", [0, 1])
def test_mean_guards_the_empty_axis_only_where_the_export_promises_size_0(low):
    # float64: one ReduceMean is accurate at every length (a dynamic float32 axis is summed in levels
    # beyond a length, and divided by the count: test_numerics.py)
    n = torch.export.Dim("n", min=low)
    result = check_export(Fn(lambda t: t.mean(0)), (torch.randn(4, 3, dtype=torch.float64),), {"x": {0: n}},
                          sizes=[{"n": low}, {"n": 7}])
    assert (count_ops(result, "ReduceMean"), count_ops(result, "ReduceSum")) == ((0, 1) if low == 0 else (1, 0))


def test_mean_over_a_derived_size_the_export_keeps_nonzero_needs_no_guard():
    n = torch.export.Dim("n", min=4)  # the pooled axis is n // 2 >= 2
    fn = lambda t: torch.nn.functional.max_pool1d(t, 2).mean(-1)  # noqa: E731
    # float64: one ReduceMean is accurate at every length (see the test above)
    result = check_export(Fn(fn), (torch.randn(2, 3, 8, dtype=torch.float64),), {"x": {2: n}},
                          sizes=[{"n": 4}, {"n": 5}, {"n": 13}])
    assert (count_ops(result, "ReduceMean"), count_ops(result, "ReduceSum")) == (1, 0)


# ------------------------------------------------------------------ long float32 axes, summed in levels
def _long_reductions(dim):
    return lambda t: (t.sum(dim), t.mean(dim, keepdim=True), t.var(dim), t.std(dim, correction=0, keepdim=True),
                      torch.linalg.vector_norm(t, dim=dim), torch.linalg.vector_norm(t, ord=1, dim=dim),
                      torch.linalg.vector_norm(t, ord=3, dim=dim), torch.logsumexp(t, dim))


@pytest.mark.parametrize("shape,dim", [
    ((2, 20000), -1),  # contiguous: levels 25 x 25 x 32, no padding
    ((2, 16411), -1),  # a prime length: zeros padded to whole blocks
    ((3, 129, 131), [1, 2]),  # a contiguous run of two axes, 16,899 elements: merged, padded, levels
    ((3, 300, 3), 1),  # strided: rows added one at a time beyond 64
    ((2, 100, 3, 100), [1, 3]),  # one strided run and one contiguous
])
def test_long_static_axes_are_summed_in_levels(shape, dim):
    x = make(torch.float32, shape) * 1000 + 300
    result = check_export(Fn(_long_reductions(dim)), (x,), {"x": {0: "batch"}}, sizes=[{"batch": 1}, {"batch": 5}])
    assert count_ops(result, "Reshape") >= 1


def _casts_to_double(result) -> int:
    """Cast nodes to float64 in the model (main graph, subgraphs, functions)."""
    import onnx_ir as ir

    return sum(n.op_type == "Cast" and n.attributes["to"].as_int() == ir.DataType.DOUBLE
               for n in ir.traversal.RecursiveGraphIterator(result.model.graph))


def test_a_dynamic_axis_accumulates_in_float64_at_every_length():
    x = make(torch.float32, (2, 20000)) * 1000 + 300
    result = check_export(Fn(_long_reductions(-1)), (x,), {"x": {0: "batch", 1: "n"}},
                          sizes=[{"batch": 1, "n": 1}, {"batch": 1, "n": 7}, {"batch": 3, "n": 4096},
                                 {"batch": 2, "n": 70001}])
    assert _casts_to_double(result) >= 1 and count_ops(result, "Pad") == 0 and count_ops(result, "If") == 0


def test_a_dynamic_plane_is_summed_axis_by_axis_without_a_copy():
    x = make(torch.float32, (2, 3, 150, 120)) * 1000 + 300
    dims = {"x": {0: "batch", 2: "h", 3: "w"}}
    sizes = [{"batch": 1, "h": 5, "w": 7}, {"batch": 2, "h": 300, "w": 97}]
    result = check_export(Fn(lambda t: (t.mean([2, 3]), t.var([2, 3], keepdim=True))), (x,), dims, sizes=sizes)
    assert count_ops(result, "Pad") == 0 and count_ops(result, "ReduceSum") >= 4
    assert _casts_to_double(result) == 0
    # the batch, a dynamic axis of its own, accumulates in float64
    result = check_export(Fn(lambda t: t.sum([0, 2, 3])), (x,), dims, sizes=sizes)
    assert _casts_to_double(result) == 1 and count_ops(result, "Pad") == 0


class _ConvMeans(torch.nn.Module):
    """A convolution's output averaged over its plane, kept and not (squeeze-and-excitation, global pooling)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return y.mean((2, 3), keepdim=True), y.mean((-2, -1)), y.mean((1, 2, 3))


def test_a_convolved_dynamic_plane_is_averaged_per_axis_with_no_count():
    # eager raises on a convolution whose spatial output would be empty: no NaN guard, no count computed
    # at run time; a mean of the means of equal rows is the mean (each axis one node, as accurate as its sum)
    x = torch.randn(2, 3, 20, 24) * 100 + 30
    result = check_export(_ConvMeans(), (x,), {"x": {0: "batch", 2: "h", 3: "w"}},
                          sizes=[{"batch": 1, "h": 1, "w": 1}, {"batch": 3, "h": 37, "w": 300}])
    # 2 + 2 + 3, the last mean's first two shared with the second's
    assert count_ops(result, "ReduceMean") == 5
    assert sum(count_ops(result, op) for op in ("ReduceSum", "Size", "Max", "Div")) == 0


def test_a_plane_no_convolution_produced_keeps_its_empty_guard():
    h = torch.export.Dim("h", min=0)
    result = check_export(Fn(lambda t: t.mean((2, 3))), (torch.randn(2, 3, 5, 6),), {"x": {2: h}},
                          sizes=[{"h": 0}, {"h": 9}])
    assert count_ops(result, "ReduceSum") >= 1
