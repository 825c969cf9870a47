"""Matrix products against eager PyTorch (tests ops/linalg.py)."""

import pytest
import torch
import torch.nn.functional as F

from exportcheck import check_export, count_ops, Fn2
from onnxport.translate.ops.linalg import einsum_equation


def make(dtype, shape):
    if dtype == torch.int64:
        return torch.randint(-4, 5, shape)
    return torch.randn(shape, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("case", ["mm", "bmm", "batched_broadcast", "vec_mat", "mat_vec", "vec_vec", "4d_3d"])
def test_matmul_forms(dtype, case):
    shapes, dyn = {
        "mm": (((3, 4), (4, 5)), ({0: "m"}, {1: "n"})),
        "bmm": (((2, 3, 4), (2, 4, 5)), ({0: "batch", 1: "m"}, {0: "batch"})),
        "batched_broadcast": (((2, 3, 4), (4, 5)), ({0: "batch", 1: "m"}, {1: "n"})),
        "vec_mat": (((4,), (2, 4, 5)), ({0: "k"}, {0: "batch", 1: "k"})),
        "mat_vec": (((2, 3, 4), (4,)), ({0: "batch", 2: "k"}, {0: "k"})),
        "vec_vec": (((4,), (4,)), ({0: "k"}, {0: "k"})),
        "4d_3d": (((2, 1, 3, 4), (5, 4, 2)), ({0: "batch", 2: "m"}, {0: "h"})),
    }[case]
    a, b = make(dtype, shapes[0]), make(dtype, shapes[1])
    fn = torch.matmul if case != "mm" else (lambda x, y: (torch.mm(x, y), x @ y))
    if case == "bmm":
        fn = lambda x, y: (torch.bmm(x, y), x @ y)  # noqa: E731
    check_export(Fn2(fn), (a, b), {"a": dyn[0], "b": dyn[1]})


def test_mv_dot_outer():
    class M(torch.nn.Module):
        def forward(self, m, v, w):
            return torch.mv(m, v), torch.dot(v, w), torch.outer(v, w), torch.outer(v, w.long())

    dyn = {"m": {0: "rows", 1: "k"}, "v": {0: "k"}, "w": {0: "k"}}
    check_export(M(), (torch.randn(3, 4), torch.randn(4), torch.randn(4)), dyn)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("in_shape", [(3, 4), (2, 3, 4), (4,)])
def test_linear(bias, in_shape):
    m = torch.nn.Linear(4, 5, bias=bias)
    dyn = ({i: f"d{i}" for i in range(len(in_shape) - 1)},) if len(in_shape) > 1 else None
    r = check_export(m, (torch.randn(in_shape),), dyn)
    if len(in_shape) == 2 and bias:
        assert count_ops(r, "Gemm") == 1


def test_linear_vector_weight():
    class M(torch.nn.Module):
        def forward(self, x, w, b):
            return F.linear(x, w) + b, F.linear(x.T, torch.ones_like(x[:, 0]))

    check_export(M(), (torch.randn(3, 4), torch.randn(4), torch.randn(())), {"x": {0: "batch"}, "w": None, "b": None})


@pytest.mark.slow
@pytest.mark.parametrize("bias_shape", [(5,), (3, 1), (3, 5), (1, 5), ()])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addmm(bias_shape, beta, alpha):
    class M(torch.nn.Module):
        def forward(self, bias, a, b):
            return torch.addmm(bias, a, b, beta=beta, alpha=alpha)

    bias = torch.randn(bias_shape)
    if beta == 0:
        bias = torch.full(bias_shape, float("nan"))  # ignored by PyTorch when beta is 0
    dyn = {"bias": None, "a": {1: "k"}, "b": {0: "k"}}
    check_export(M(), (bias, torch.randn(3, 4), torch.randn(4, 5)), dyn)


def test_addmm_int64():
    class M(torch.nn.Module):
        def forward(self, bias, a, b):
            return torch.addmm(bias, a, b, beta=2, alpha=3), torch.addmm(bias, a, b)

    dyn = {"bias": None, "a": {0: "m", 1: "k"}, "b": {0: "k"}}
    check_export(M(), (make(torch.int64, (5,)), make(torch.int64, (3, 4)), make(torch.int64, (4, 5))), dyn)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -1.5), (0, 2)])
def test_baddbmm_addbmm_addmv(beta, alpha):
    class M(torch.nn.Module):
        def forward(self, x, a, b, v):
            return (torch.baddbmm(x, a, b, beta=beta, alpha=alpha), torch.addbmm(x[0], a, b, beta=beta, alpha=alpha),
                    torch.addmv(x[0, :, 0], a[0], v, beta=beta, alpha=alpha))

    x, a, b, v = torch.randn(2, 3, 5), torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(4)
    dyn = {"x": {0: "batch"}, "a": {0: "batch", 2: "k"}, "b": {0: "batch", 1: "k"}, "v": {0: "k"}}
    check_export(M(), (x, a, b, v), dyn)


EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)], [{0: "m"}, {1: "n"}]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], [{0: "batch", 1: "m"}, {0: "batch"}]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)], [{0: "batch", 2: "q"}, {0: "batch", 2: "kv"}]),
    ("i,j->ij", [(3,), (4,)], [{0: "m"}, {0: "n"}]),
    ("ii->i", [(4, 4)], [None]),
    ("ij->", [(3, 4)], [{0: "m"}]),
    ("ba,cb", [(2, 3), (4, 2)], [{1: "m"}, {0: "n"}]),
    ("Ba,cB->aBc", [(2, 3), (4, 2)], [{1: "m"}, {0: "n"}]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)], [{0: "batch", 1: "m"}, {0: "batch"}]),
    ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)], [{0: "batch", 1: "m"}, {0: "batch", 1: "n"}]),
]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("eq,shapes,dyn", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(eq, shapes, dyn, dtype):
    class One(torch.nn.Module):
        def forward(self, a):
            return torch.einsum(eq, a)

    class Two(torch.nn.Module):
        def forward(self, a, b):
            return torch.einsum(eq, a, b)

    args = tuple(make(dtype, s) for s in shapes)
    check_export(One() if len(args) == 1 else Two(), args, tuple(dyn))


def test_einsum_equation_rewrites():
    assert einsum_equation("ba,cb", 2) == "ba,cb->ac"
    assert einsum_equation("Ba,cB", 2) == "ab,ca->bc"
    assert einsum_equation("...a,ba", 2) == "...a,ba->...b"
    assert einsum_equation("i j , j k -> i k", 2) == "ij,jk->ik"


def test_transposed_matrix_times_vector():
    # onnxruntime fuses Transpose + MatMul; with a 1-D operand that fusion computed wrong values
    class M(torch.nn.Module):
        def forward(self, m, v, w):
            return m.transpose(0, 1) @ v, torch.mv(m.transpose(0, 1), v), w @ m.transpose(0, 1)

    dyn = {"m": {0: "rows"}, "v": {0: "rows"}, "w": None}
    check_export(M(), (torch.randn(3, 4), torch.randn(3), torch.randn(4)), dyn)


def test_output_dim_names():
    class M(torch.nn.Module):
        def forward(self, a, b):
            return a @ b, torch.einsum("bmk,nk->bnm", a, b.T)

    dyn = {"a": {0: "batch", 1: "m"}, "b": {1: "n"}}
    check_export(M(), (torch.randn(2, 3, 4), torch.randn(4, 5)), dyn,
                 expect_outputs={"output_0": ["batch", "m", "n"], "output_1": ["batch", "n", "m"]})


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_bilinear(dtype):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.randint(-3, 4, (5, 3, 4)).to(dtype)
            self.b = torch.randint(-3, 4, (5,)).to(dtype)

        def forward(self, a, b):
            return torch.nn.functional.bilinear(a, b, self.w, self.b), torch.nn.functional.bilinear(a, b, self.w)

    a, b = torch.randint(-3, 4, (6, 3)).to(dtype), torch.randint(-3, 4, (6, 4)).to(dtype)
    check_export(M(), (a, b), {"a": {0: "batch"}, "b": {0: "batch"}})


def test_bilinear_layer():
    check_export(torch.nn.Bilinear(3, 4, 2), (torch.randn(2, 5, 3), torch.randn(2, 5, 4)),
                 {"input1": {0: "batch", 1: "t"}, "input2": {0: "batch", 1: "t"}})
