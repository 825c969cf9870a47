"""Ops without a translation decomposed node by node (the program is not traced again), torch's
whole-program decomposition kept for the mutations only functionalization expresses."""

from __future__ import annotations

import pytest
import torch

import onnxport
from exportcheck import check_export, count_ops, Fn, Fn2
from onnxport.translate.registry import override

aten = torch.ops.aten


class Gated(torch.nn.Module):
    def forward(self, x, y):  # x: [b, t], y: [b, u] with u even
        return torch.nn.functional.silu(x)[:, :3] + torch.nn.functional.glu(y, -1).sum(-1, keepdim=True)


def test_ops_without_translation_are_decomposed_alone():
    with override({aten.silu.default: None, aten.glu.default: None}):
        r = check_export(Gated(), (torch.randn(3, 8), torch.randn(3, 6)), {"x": {0: "b", 1: "t"}, "y": {0: "b"}})
    assert r.decomposed == {"local": ["aten.glu.default", "aten.silu.default"], "whole_program": []}
    targets = {n.target for n in r.program.graph.nodes}
    assert aten.sigmoid.default in targets and aten.silu.default not in targets
    assert count_ops(r, "Sigmoid") == 2


def test_an_op_reading_another_decomposed_op_reads_its_decomposition():
    fn = Fn(lambda x: torch.nn.functional.glu(torch.nn.functional.silu(x), -1))
    with override({aten.silu.default: None, aten.glu.default: None}):
        r = check_export(fn, (torch.randn(3, 8),), {"x": {0: "b"}})
    assert r.decomposed == {"local": ["aten.glu.default", "aten.silu.default"], "whole_program": []}


def test_a_decomposition_returning_a_named_tuple_gives_its_fields():
    with override({aten.aminmax.default: None}):
        r = check_export(Fn(lambda x: torch.aminmax(x, dim=1)), (torch.randn(3, 4, 5),), {"x": {0: "b"}})
    assert r.decomposed["local"] == ["aten.aminmax.default"]


class SlidingWindows(torch.nn.Module):
    """ConvBERT's span-based convolution: windows of 9 positions by ``F.unfold`` (aten.im2col, which
    has no translation: its decomposition pads with constant_pad_nd)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 32)

    def forward(self, x):  # x: [b, t, 16]
        y = torch.reshape(self.proj(x), [x.shape[0], -1, 32]).transpose(1, 2).contiguous().unsqueeze(-1)
        windows = torch.nn.functional.unfold(y, kernel_size=[9, 1], dilation=1, padding=[4, 0], stride=1)
        return windows.transpose(1, 2).reshape(x.shape[0], -1, 32, 9).sum(-1)


def test_a_decomposition_keeps_the_sizes_symbolic_where_an_op_it_calls_has_a_translation():
    r = check_export(SlidingWindows(), (torch.randn(2, 7, 16),), {"x": {0: "b", 1: "t"}})
    assert r.decomposed["local"] == ["aten.im2col.default"]
    pads = [n for n in r.program.graph.nodes if n.target == aten.constant_pad_nd.default]
    assert pads and all(isinstance(n.meta["val"].shape[0], torch.SymInt) for n in pads)


class Scanned(torch.nn.Module):
    def forward(self, x):  # x: [b, t]
        def step(carry, row):
            y = torch.nn.functional.silu(row) + carry
            return [y.clone(), y.clone()]

        _, ys = torch.ops.higher_order.scan(step, [torch.zeros_like(x[0])], [x], additional_inputs=[])
        return ys


def test_ops_inside_control_flow_bodies_are_decomposed_alone():
    with override({aten.silu.default: None}):
        r = check_export(Scanned(), (torch.randn(4, 5),), {"x": {0: "b", 1: "t"}})
    assert r.decomposed["local"] == ["aten.silu.default"] and r.decomposed["whole_program"] == []


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(2))

    def forward(self, x):
        self.calls[0].add_(1)  # a write through a view of a buffer
        return x * 2 + self.calls[0]


def test_a_mutation_through_a_view_decomposes_the_whole_program_and_says_why():
    r = check_export(Counter().eval(), (torch.randn(3, 2),), {"x": {0: "b"}})
    assert r.decomposed["whole_program"] == ["aten.add_.Tensor"]


def _torch_decomposes(module: torch.nn.Module, args: tuple) -> bool:
    try:
        torch.export.export(module, args).run_decompositions()
    except Exception:
        return False
    return True


def test_a_decomposition_torch_cannot_make_is_an_unsupported_op():
    # torch.take of a 0-d tensor: torch 2.13's decomposition guards on a data-dependent size, torch 2.14's
    # traces; the export follows what the installed torch can do
    take, args = Fn2(lambda x, i: torch.take(x, i)), (torch.tensor(2.0), torch.tensor(0))
    with override({aten.take.default: None}):
        if _torch_decomposes(take, args):
            assert check_export(take, args, None).decomposed["local"] == ["aten.take.default"]
        else:
            with pytest.raises(onnxport.UnsupportedOpError, match="aten.take.default"):
                onnxport.to_onnx(take, args)


class RowScores(torch.nn.Module):
    """A mask built with ``torch.vmap`` (transformers' masks with ``use_vmap=True``, T5Gemma2):
    torch.export keeps vmap's batching levels as calls (``torch._functorch.predispatch``)."""

    def forward(self, x):  # x: [b, t] -> [b, t, t]: x where the positions are within 2 of each other
        def near(i, j):
            return (i - j).abs() < 2

        positions = torch.arange(x.shape[1])
        mask = torch.vmap(torch.vmap(near, in_dims=(None, 0)), in_dims=(0, None))(positions, positions)
        return x[:, :, None] * mask


@pytest.mark.slow
def test_vmap_batching_levels_decompose_the_whole_program():
    r = check_export(RowScores(), (torch.randn(3, 5),), {"x": {0: "b", 1: "t"}},
                     inputs=[(torch.randn(1, 2),), (torch.randn(4, 9),)])
    assert "_add_batch_dim" in r.decomposed["whole_program"]
    assert not [n for n in r.program.graph.nodes
                if getattr(n.target, "__module__", "") == "torch._functorch.predispatch"]
