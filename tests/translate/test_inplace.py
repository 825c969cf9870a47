"""In-place ops of torch.export's training IR translated as their functional form (no
decomposition of the program), and the mutations only torch's functionalization can express left to it."""

from __future__ import annotations

import torch

from exportcheck import check_export, count_ops

aten = torch.ops.aten


class Block(torch.nn.Module):
    """ResNet-style: conv, ReLU(inplace=True), a residual added in place, dropout in place."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 4, 3, padding=1)
        self.act = torch.nn.ReLU(inplace=True)
        self.drop = torch.nn.Dropout(0.3, inplace=True)

    def forward(self, x):
        y = self.conv(x)
        y += x  # add_ on the conv's output
        y = self.act(y)  # relu_ of the add_, the same tensor written twice
        z = self.drop(y.flatten(1))  # dropout_ on a view: writes nothing at inference
        return y * 2, z, torch.nn.functional.silu(x.clone(), inplace=True).int().add_(3)


def test_in_place_ops_translate_without_decomposing():
    r = check_export(Block().eval(), (torch.randn(2, 4, 7),), {"x": {0: "batch", 2: "time"}})
    targets = {n.target for n in r.program.graph.nodes}
    assert {aten.relu_.default, aten.add_.Tensor, aten.dropout_.default, aten.silu_.default} <= targets
    assert count_ops(r, "Relu") == 1


class Counter(torch.nn.Module):
    """Mutates a buffer and a view of an intermediate: left to torch's functionalization."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(3))

    def forward(self, x):
        self.calls.add_(1)
        y = x * 2
        v = y[:, :1]
        y.mul_(3)  # read afterwards through the view v
        return y + self.calls, v


def test_mutations_of_buffers_and_views_still_follow_pytorch():
    r = check_export(Counter().eval(), (torch.randn(4, 3),), {"x": {0: "batch"}})
    assert [v.name for v in r.model.graph.outputs][-1] == "calls.updated"
    assert aten.mul_.Tensor not in {n.target for n in r.program.graph.nodes}  # functionalized


class Anchors(torch.nn.Module):
    """Writes through views of intermediates, as RT-DETR's ``spatial_shapes[level, 0] = height`` and
    ``generate_anchors``' ``grid_xy[..., 0] /= width``: translated as scatters into the intermediate."""

    def forward(self, x):
        grid = x * 2 + 1
        grid[..., 0] /= x.shape[-2]
        grid[..., 1] /= 3
        sizes = torch.empty((3, 2), dtype=torch.long)
        for i in range(3):
            sizes[i, 0] = x.shape[0] + i
            sizes[i, 1] = x.shape[1]
        grid[:, 1:3] += 5
        return grid, sizes.prod(1)


class ReadAfter(torch.nn.Module):
    """A view taken before a write into its tensor and read after it: left to torch's functionalization."""

    def forward(self, x):
        y = x + 1
        row = y[0]
        y[0, 1] = 7
        return row * 2, y


def test_writes_through_views_of_intermediates_translate_without_decomposing():
    r = check_export(Anchors().eval(), (torch.randn(4, 5, 3),), {"x": {0: "a", 1: "b"}},
                     sizes=[{"a": 2, "b": 7}, {"a": 6, "b": 3}], values=[])
    targets = {n.target for n in r.program.graph.nodes}
    assert {aten.copy_.default, aten.div_.Tensor, aten.add_.Tensor} <= targets


def test_a_view_read_after_a_write_still_follows_pytorch():
    r = check_export(ReadAfter().eval(), (torch.randn(4, 3),), {"x": {0: "batch"}}, values=[])
    assert aten.copy_.default not in {n.target for n in r.program.graph.nodes}  # functionalized


class WholeSlices(torch.nn.Module):
    """Halves of a new tensor filled by ``copy_`` (MLA's key from its two parts, GLM-5-Next's
    ``expand_kv``), one half the whole last dim where the other is empty: that slice is traced as
    ``alias``, written through like a slice."""

    def forward(self, x):
        out = x.new_empty(*x.shape[:-1], x.shape[-1])
        out[..., : x.shape[-1]].copy_(x * 2)
        out[..., x.shape[-1]:].copy_(x[..., :0])
        return out + 1


def test_a_write_through_a_whole_tensor_alias_translates_without_decomposing():
    r = check_export(WholeSlices().eval(), (torch.randn(2, 3, 4),), {"x": {0: "batch", 1: "seq"}}, values=[])
    targets = {n.target for n in r.program.graph.nodes}
    assert aten.copy_.default in targets and aten.alias.default in targets
