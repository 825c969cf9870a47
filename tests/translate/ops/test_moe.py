"""Grouped matrix products of mixture-of-experts layers: transformers' grouped_mm_fallback and
aten._grouped_mm in its four layouts, one Slice + MatMul per group; transformers' experts run
through them when set to their per-expert Python loop."""

import onnx_ir
import pytest
import torch

from exportcheck import check_export, count_ops

pytest.importorskip("transformers")
import transformers.integrations.moe  # noqa: E402,F401  (defines transformers::grouped_mm_fallback)

E, K, N = 4, 8, 16


def _fallback(x, w, offs):
    return torch.ops.transformers.grouped_mm_fallback(x, w, offs)


def _grouped(x, w, offs):
    return torch._grouped_mm(x, w, offs=offs)


class _Routed(torch.nn.Module):
    """Rows routed to experts by ``ids`` as transformers routes them: sorted by expert, counted with
    histc (ids outside 0..E-1 are counted nowhere: their rows come last, past offs[-1]), multiplied
    by their expert's matrix, put back in their order."""

    def __init__(self, product, experts=E, clamp=False, dtype=torch.float32):
        super().__init__()
        self.product, self.clamp = product, clamp
        self.weight = torch.nn.Parameter((torch.randn(experts, K, N) / K ** 0.5).to(dtype))

    def forward(self, x, ids):
        x = x.to(self.weight.dtype)  # onnxport's validation feeds float32 (numpy has no bfloat16)
        experts = self.weight.shape[0]
        if self.clamp:
            ids = ids.clamp(0, experts - 1)
        ids, perm = torch.sort(ids)
        counts = torch.histc(ids.float(), bins=experts, min=0, max=experts - 1)
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        y = self.product(x[perm], self.weight, offs)
        back = torch.empty_like(perm)
        back[perm] = torch.arange(perm.shape[0])
        return y[back].float()


_ROWS = {"x": {0: "rows"}, "ids": {0: "rows"}}


@pytest.mark.parametrize("experts", [1, E])
def test_grouped_mm_fallback_per_expert(experts):
    x, ids = torch.randn(9, K), torch.randint(0, experts, (9,))
    r = check_export(_Routed(_fallback, experts), (x, ids), _ROWS, expect_outputs={"output": ["rows", N]})
    assert count_ops(r, "MatMul") == experts
    assert count_ops(r, "Gather") == 2  # the rows sorted and put back; each expert's matrix is an initializer
    assert {f"weight.{e}" for e in range(experts)} <= set(r.model.graph.initializers)


def test_grouped_mm_fallback_rows_of_no_expert_are_zero():
    """ids past the last expert (transformers' expert-parallel sentinels) leave rows past offs[-1]."""
    x, ids = torch.randn(7, K), torch.tensor([0, 4, 3, 5, 1, 4, 0])
    model = _Routed(_fallback).eval()
    assert (model(x, ids)[ids >= E] == 0).all()
    check_export(model, (x, ids), _ROWS, inputs=[(torch.randn(3, K), torch.tensor([9, 9, 9]))])


def _products_in_float(r) -> bool:
    """Every MatMul multiplies float32 operands, cast from bfloat16 in the graph."""
    matmuls = [n for n in r.model.graph if n.op_type == "MatMul"]
    return bool(matmuls) and all(i.dtype == onnx_ir.DataType.FLOAT for n in matmuls for i in n.inputs) and \
        any(n.op_type == "Cast" and n.inputs[0].dtype == onnx_ir.DataType.BFLOAT16 for n in r.model.graph)


def test_grouped_mm_fallback_bfloat16_accumulates_in_float():
    x, ids = torch.randn(9, K), torch.randint(0, E, (9,))
    r = check_export(_Routed(_fallback, dtype=torch.bfloat16), (x, ids), _ROWS)
    assert _products_in_float(r)


# torch traces aten._grouped_mm for bfloat16 operands only; onnxport's validation feeds float32
# (numpy has no bfloat16): the modules cast their inputs and results
_BF16 = torch.bfloat16


def test_grouped_mm_rows_by_expert():
    x, ids = torch.randn(9, K), torch.randint(0, E, (9,))
    r = check_export(_Routed(_grouped, clamp=True, dtype=_BF16), (x, ids), _ROWS)
    assert count_ops(r, "MatMul") == E and _products_in_float(r)


class _Batched(torch.nn.Module):
    def forward(self, a, b):
        return torch._grouped_mm(a.to(_BF16), b.to(_BF16)).float()


@pytest.mark.slow
def test_grouped_mm_batched():
    a, b = torch.randn(3, 5, K), torch.randn(3, K, N)
    r = check_export(_Batched(), (a, b), {"a": {1: "m"}}, expect_outputs={"output": [3, "m", N]})
    assert count_ops(r, "MatMul") == 1 and _products_in_float(r)


class _Jagged(torch.nn.Module):
    """Groups along the inner dimension (self[M, K] @ mat2[K, N] -> [G, M, N]) or along mat2's
    columns (self[G, M, K] @ mat2[K, N] -> [M, N])."""

    def __init__(self, ends):
        super().__init__()
        self.register_buffer("offs", torch.tensor(ends, dtype=torch.int32))

    def forward(self, a, b):
        return torch._grouped_mm(a.to(_BF16), b.to(_BF16), offs=self.offs).float()


def test_grouped_mm_inner_groups():
    a, b = torch.randn(5, 16), torch.randn(16, N)
    r = check_export(_Jagged([8, 8, 16]), (a, b), {"a": {0: "m"}}, expect_outputs={"output": [3, "m", N]})
    assert count_ops(r, "MatMul") == 3


def test_grouped_mm_column_groups():
    a, b = torch.randn(3, 5, K), torch.randn(K, 16)
    r = check_export(_Jagged([4, 8, 16]), (a, b), {"a": {1: "m"}}, expect_outputs={"output": ["m", 16]})
    assert count_ops(r, "MatMul") == 3


@pytest.mark.parametrize("implementation", ["eager", "grouped_mm", "batched_mm"])
def test_transformers_experts_as_configured(implementation):
    """A Mixtral sparse-MoE block: the per-expert Python loop ("eager") is captured as transformers'
    grouped implementation, the others as they are; the block's own setting is left as it was."""
    from transformers.integrations.moe import ExpertsInterface
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    cfg = transformers.MixtralConfig(hidden_size=16, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2)
    cfg._experts_implementation = implementation
    torch.manual_seed(0)
    block = MixtralSparseMoeBlock(cfg)
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.2)
    lookup = ExpertsInterface.get_interface
    r = check_export(block, (torch.randn(2, 5, 16),), {"hidden_states": {0: "batch", 1: "seq"}},
                     expect_outputs={"output": ["batch", "seq", 16]})
    assert ExpertsInterface.get_interface is lookup and cfg._experts_implementation == implementation
    assert count_ops(r, "MatMul") == (3 if implementation == "batched_mm" else 2 * 4 + 1)
