"""arange (all overloads, float steps, SymInt bounds), full/zeros/ones/empty and their new_* and
*_like forms, scalar_tensor, fill, zero."""

import pytest
import torch

from exportcheck import check_export, DTYPES, make_tensor as _make


class Aranges(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return (
            torch.arange(n),                                   # arange.default, SymInt end
            torch.arange(2, n + 3),                            # arange.start
            torch.arange(1, 2 * n, 3),                         # arange.start_step
            torch.arange(n, 0, -1),                            # negative step
            torch.arange(0, n, 0.5),                           # float step, SymInt end
            torch.arange(1.5, 4.2, 0.3),                       # float constants
            torch.arange(-1.0, 1.0, 0.1, dtype=torch.float64),
            torch.arange(n, dtype=torch.float32) * x[:, 0],
            torch.arange(5),
        )


def test_arange():
    check_export(Aranges(), (torch.randn(6, 3),), {"x": {0: "n"}})


class Fills(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        fill = True if self.dtype == torch.bool else 3
        return (
            torch.full((b, 2), fill, dtype=self.dtype),
            torch.full((b, t), t, dtype=self.dtype),           # SymInt fill value
            torch.zeros(b, t, dtype=self.dtype),
            torch.ones(t, 2, dtype=self.dtype),
            torch.zeros(()),
            torch.empty(b, 3, dtype=self.dtype).fill_(fill),   # empty + fill.Scalar
            x.new_zeros(b, 2), x.new_ones((3, t)), x.new_full((t,), fill), x.new_empty(b).zero_(),
            x.new_zeros(2, dtype=torch.float64),
            torch.zeros_like(x), torch.ones_like(x), torch.full_like(x, fill), torch.empty_like(x).fill_(fill),
            torch.ones_like(x, dtype=torch.float32),
            x.clone().fill_(x[0, 0]),                          # fill.Tensor
            torch.scalar_tensor(2.5) + torch.scalar_tensor(t),
        )


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_full_zeros_ones_empty_like(dtype):
    check_export(Fills(dtype), (_make((3, 4), dtype),), {"x": {0: "b", 1: "t"}})


class Triangular(torch.nn.Module):
    def forward(self, x):
        return (torch.tril_indices(4, 5, 1) + x.shape[0], torch.triu_indices(5, 3, -1),
                torch.empty_permuted((x.shape[0], 3), (1, 0)).fill_(2.0))


def test_tri_indices_empty_permuted():
    check_export(Triangular(), (torch.randn(3, 2),), {"x": {0: "b"}})


class Random(torch.nn.Module):
    def forward(self, x):  # x: [b, 1000]
        u, g = torch.rand(x.shape[0], 1000), torch.randn(x.shape[0], 1000, dtype=torch.float64)
        ul, gl = torch.rand_like(x), torch.randn_like(x)
        # shapes and dtypes exact; samples differ from torch's generator, so their statistics are checked,
        # each bound at least 6 standard errors wide for 1000 samples (b = 1)
        return (
            u * 0, g * 0, ul * 0, gl * 0,
            ((u >= 0) & (u < 1)).all(), ((ul >= 0) & (ul < 1)).all(),
            (u.mean() - 0.5).abs() < 0.06, (ul.mean() - 0.5).abs() < 0.06,
            g.mean().abs() < 0.2, (g.std() - 1).abs() < 0.15, gl.mean().abs() < 0.2, (gl.std() - 1).abs() < 0.15,
        )


def test_rand_randn():
    check_export(Random(), (torch.randn(3, 1000),), {"x": {0: "b"}})


def test_bfloat16_creation_is_valid_onnx():
    """onnxruntime's CPU provider has few bfloat16 kernels; the model must still pass the full check."""
    import onnx

    import onnxport

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.rand_like(x), torch.randn(x.shape[0], 2, dtype=torch.bfloat16), torch.full_like(x, 2.5), \
                torch.arange(0, 2, 0.5, dtype=torch.bfloat16)

    x = torch.randn(4, 5, dtype=torch.bfloat16)
    r = onnxport.to_onnx(M(), (x,), dynamic_shapes={"x": {0: "b"}})
    onnx.checker.check_model(r.model_proto, full_check=True)
    _assert_outputs_like_eager(r.model_proto, M()(x), dynamic_first_dim=3)


def _assert_outputs_like_eager(proto, eager, dynamic_first_dim: int) -> None:
    """Graph outputs have eager's element types and ranks; the first ``dynamic_first_dim`` outputs
    keep the dim name ``b`` on axis 0."""
    from onnxport.translate.dtypes import onnx_dtype

    outs = proto.graph.output
    assert [o.type.tensor_type.elem_type for o in outs] == [int(onnx_dtype(t.dtype)) for t in eager]
    assert [len(o.type.tensor_type.shape.dim) for o in outs] == [t.dim() for t in eager]
    assert [o.type.tensor_type.shape.dim[0].dim_param for o in outs[:dynamic_first_dim]] == ["b"] * dynamic_first_dim
