"""Normalizations (onnxport/translate/ops/norm.py) against eager PyTorch at several sizes."""

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from exportcheck import check_export, count_ops
from onnxport.translate.registry import override

aten = torch.ops.aten


def _randomize(module):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") else 0.0))
        for name, b in module.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b))
            elif name.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)
    return module


class Wrap(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = _randomize(inner)

    def forward(self, x):
        return self.inner(x)


def _targets(r):
    return {n.target for n in r.program.graph.nodes if n.op == "call_function"}


BN_CASES = [
    (torch.nn.BatchNorm1d(4), (3, 4), {0: "batch"}),
    (torch.nn.BatchNorm1d(4), (3, 4, 7), {0: "batch", 2: "time"}),
    (torch.nn.BatchNorm1d(4, affine=False), (3, 4, 7), {0: "batch", 2: "time"}),
    (torch.nn.BatchNorm2d(3, eps=1e-3), (2, 3, 5, 6), {0: "batch", 2: "h", 3: "w"}),
    (torch.nn.BatchNorm3d(2), (2, 2, 3, 4, 5), {0: "batch", 4: "w"}),
    (torch.nn.BatchNorm1d(4, track_running_stats=False), (3, 4, 7), {0: "batch", 2: "time"}),
]


# the decomposed (native) forms on a subset: decomposition is slow
BN_CORE = [(c, False) for c in BN_CASES] + [(BN_CASES[i], True) for i in (0, 3, 5)]


@pytest.mark.parametrize("case,core", BN_CORE, ids=[f"{type(c[0]).__name__}-{c[1]}-{c[0].affine}-"
                                                    f"{c[0].track_running_stats}-{k}" for c, k in BN_CORE])
def test_batch_norm(case, core):
    bn, shape, dyn = case
    model = Wrap(bn).eval()
    x = torch.randn(*shape) * 2 + 1
    with override({aten.batch_norm.default: None} if core else {}):
        r = check_export(model, (x,), {"x": dyn})
    if core:
        assert aten.batch_norm.default not in _targets(r)
    if bn.track_running_stats:
        assert count_ops(r, "BatchNormalization") == 1


LN_CASES = [
    ((4,), True, True, (2, 5, 4), {0: "batch", 1: "time"}),
    ((4,), False, False, (2, 5, 4), {0: "batch", 1: "time"}),
    ((5, 4), True, False, (2, 5, 4), {0: "batch"}),
    ((3, 5, 4), True, True, (2, 3, 5, 4), {0: "batch"}),
]


LN_CORE = [(c, False) for c in LN_CASES] + [(LN_CASES[i], True) for i in (1, 2)]


@pytest.mark.parametrize("case,core", LN_CORE, ids=[f"{c[:3]}-{k}" for c, k in LN_CORE])
def test_layer_norm(case, core):
    nshape, affine, bias, shape, dyn = case
    model = Wrap(torch.nn.LayerNorm(nshape, elementwise_affine=affine, bias=bias, eps=1e-4))
    with override({aten.layer_norm.default: None} if core else {}):
        r = check_export(model, (torch.randn(*shape) * 3 + 2,), {"x": dyn})
    assert count_ops(r, "LayerNormalization") == 1
    if core:
        assert aten.native_layer_norm.default in _targets(r)


def test_native_layer_norm_statistics():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(6))

        def forward(self, x):
            return torch.ops.aten.native_layer_norm.default(x, [6], self.w, None, 1e-5)

    check_export(M(), (torch.randn(2, 3, 6) * 2 + 1,), {"x": {0: "batch", 1: "time"}})


GN_CASES = [
    (2, 4, True, (3, 4, 7), {0: "batch", 2: "time"}),
    (1, 4, False, (3, 4, 7), {0: "batch", 2: "time"}),
    (4, 4, True, (2, 4, 3, 5), {0: "batch", 2: "h", 3: "w"}),
    (3, 6, True, (2, 6, 2, 3, 4), {0: "batch", 4: "w"}),
]


GN_CORE = [(c, False) for c in GN_CASES] + [(GN_CASES[i], True) for i in (0, 3)]


@pytest.mark.parametrize("case,core", GN_CORE, ids=[f"{c[:3]}-{k}" for c, k in GN_CORE])
def test_group_norm(case, core):
    groups, channels, affine, shape, dyn = case
    model = Wrap(torch.nn.GroupNorm(groups, channels, affine=affine))
    with override({aten.group_norm.default: None} if core else {}):
        r = check_export(model, (torch.randn(*shape) * 2 - 1,), {"x": dyn})
    if core:
        assert aten.native_group_norm.default in _targets(r)


@pytest.mark.parametrize("opset", [20, 21])
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_opsets(affine, opset):
    model = Wrap(torch.nn.GroupNorm(2, 6, affine=affine))
    r = check_export(model, (torch.randn(2, 6, 5) * 2 + 1,), {"x": {0: "batch", 2: "time"}}, opset=opset)
    assert count_ops(r, "GroupNormalization") == (1 if opset >= 21 else 0)


@pytest.mark.slow
@pytest.mark.parametrize("opset", [20, 21])
def test_native_group_norm_statistics(opset):
    class M(torch.nn.Module):
        def forward(self, x):
            n, c, t = x.shape
            return torch.ops.aten.native_group_norm.default(x, None, None, n, c, t, 2, 1e-5)

    check_export(M(), (torch.randn(2, 4, 6) * 2 + 1,), {"x": {0: "batch", 2: "time"}}, opset=opset)


IN_CASES = [
    (torch.nn.InstanceNorm1d(4), (2, 4, 7), {0: "batch", 2: "time"}),
    (torch.nn.InstanceNorm1d(4, affine=True), (2, 4, 7), {0: "batch", 2: "time"}),
    (torch.nn.InstanceNorm2d(3, affine=True), (2, 3, 5, 4), {0: "batch", 2: "h", 3: "w"}),
    (torch.nn.InstanceNorm1d(4, track_running_stats=True), (2, 4, 7), {0: "batch", 2: "time"}),
]


@pytest.mark.parametrize("inn,shape,dyn", IN_CASES, ids=[f"{type(c[0]).__name__}-{c[0].affine}-"
                                                        f"{c[0].track_running_stats}" for c in IN_CASES])
def test_instance_norm(inn, shape, dyn):
    check_export(Wrap(inn).eval(), (torch.randn(*shape) * 2 + 1,), {"x": dyn})


@pytest.mark.parametrize("opset", [20, 23])
@pytest.mark.parametrize("nshape,affine,eps", [((8,), True, None), ((8,), False, 1e-3), ((3, 8), True, 1e-6)])
def test_rms_norm(nshape, affine, eps, opset):
    model = Wrap(torch.nn.RMSNorm(nshape, eps=eps, elementwise_affine=affine))
    r = check_export(model, (torch.randn(2, 3, 8) * 2,),
                     {"x": {0: "batch"} if len(nshape) > 1 else {0: "batch", 1: "t"}}, opset=opset)
    assert count_ops(r, "RMSNormalization") == (1 if opset >= 23 else 0)


def test_rms_norm_functional_small_values():
    class M(torch.nn.Module):
        def forward(self, x):
            return F.rms_norm(x, (x.shape[-1] * 0 + 5,))

    check_export(M(), (torch.randn(3, 5) * 1e-3,), {"x": {0: "batch"}})


@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_core_form(affine):
    """instance_norm decomposed: batch norm with batch statistics over a [1, N*C, ...] view."""
    model = Wrap(torch.nn.InstanceNorm1d(4, affine=affine))
    with override({aten.instance_norm.default: None}):
        r = check_export(model, (torch.randn(2, 4, 7) * 2 + 1,), {"x": {0: "batch", 2: "time"}})
    assert aten.instance_norm.default not in _targets(r)


@pytest.mark.parametrize("op", ["native_batch_norm", "_native_batch_norm_legit_no_training"])
def test_native_batch_norm_inference_outputs(op):
    """Inference forms return empty saved statistics next to the output, as PyTorch does."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.randn(3))
            self.register_buffer("var", torch.rand(3) + 0.5)
            self.w = torch.nn.Parameter(torch.randn(3))

        def forward(self, x):
            if op == "native_batch_norm":
                return aten.native_batch_norm.default(x, self.w, None, self.mean, self.var, False, 0.1, 1e-3)
            return aten._native_batch_norm_legit_no_training.default(x, self.w, None, self.mean, self.var, 0.1, 1e-3)

    check_export(M(), (torch.randn(2, 3, 5),), {"x": {0: "batch", 2: "time"}})


class TrainingBatchNorm(torch.nn.Module):
    """Batch norm with batch statistics and running statistics updated, whatever eval() says."""

    def __init__(self, c):
        super().__init__()
        self.register_buffer("mean", torch.randn(c))
        self.register_buffer("var", torch.rand(c) + 0.5)
        self.w, self.b = torch.nn.Parameter(torch.randn(c)), torch.nn.Parameter(torch.randn(c))

    def forward(self, x):
        return torch.nn.functional.batch_norm(x, self.mean, self.var, self.w, self.b, training=True, momentum=0.3)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5)])
def test_batch_norm_updating_its_running_statistics(shape):
    # torch.export keeps aten.batch_norm whole; decomposed to core ATen, it updates the running
    # statistics as buffer updates
    x = torch.randn(shape)
    dyn = {"x": {0: Dim("batch")} if len(shape) == 2 else {0: Dim("batch"), 2: Dim("length")}}
    program = torch.export.export(TrainingBatchNorm(3), (x,), dynamic_shapes=dyn).run_decompositions()
    assert aten._native_batch_norm_legit_functional.default in {n.target for n in program.graph.nodes}
    result = check_export(program, (x,))
    assert {"mean.updated", "var.updated"} <= {v.name for v in result.model.graph.outputs}


class WithUpdateFunctional(TrainingBatchNorm):
    def forward(self, x):
        out, _, _, _, mean, var = aten._batch_norm_with_update_functional.default(
            x, self.w, self.b, self.mean, self.var, 0.3, 1e-5)
        return out, mean, var


def test_batch_norm_with_update_functional():
    check_export(WithUpdateFunctional(3), (torch.randn(2, 3, 5),), {"x": {0: "batch", 2: "length"}})


class WeightNormed(torch.nn.Module):
    """Weights through torch.nn.utils.parametrizations.weight_norm (aten._weight_norm), applied to
    the input (a runtime v) and to layers (v, g parameters)."""

    def __init__(self, dim):
        super().__init__()
        self.conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(3, 4, 3, padding=1), dim=dim)
        self.g = torch.nn.Parameter(torch.rand(1, 5) + 0.5)

    def forward(self, x, v):
        return self.conv(x), torch._weight_norm(v, self.g, 1), torch._weight_norm(v, self.g[0, 0], -1)


@pytest.mark.parametrize("dim", [0, 2, None])
def test_weight_norm(dim):
    model = WeightNormed(dim).eval()
    result = check_export(model, (torch.randn(2, 3, 7), torch.randn(6, 5)),
                          {"x": {0: "batch", 2: "time"}, "v": {0: "rows"}})
    assert aten._weight_norm.default in _targets(result)
    assert not result.decomposed["local"] and not result.decomposed["whole_program"]
