"""Integer inputs indexing a table are found in the program, through views and casts."""

from __future__ import annotations

import pytest
import torch

import onnxport
from onnxport.capture.tables import indexed_tables


class Viewed(torch.nn.Module):
    """GPT-2's way: ids viewed flat, then looked up; a second table indexed directly."""

    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(40, 4)
        self.table = torch.nn.Parameter(torch.randn(25, 4))

    def forward(self, ids, pos, scale):
        flat = ids.view(-1, ids.shape[-1])
        return self.wte(flat) + torch.index_select(self.table, 0, pos.long()).unsqueeze(0) * scale


@pytest.mark.parametrize("pos_dtype", [torch.int64, torch.int32])
def test_tables_found_through_views_and_casts(pos_dtype):
    ids, pos = torch.randint(0, 5, (2, 6)), torch.arange(6, dtype=pos_dtype)
    result = onnxport.to_onnx(Viewed().eval(), (ids, pos, torch.randn(1)),
                              dynamic_shapes=({0: "b", 1: "t"}, {0: "t"}, None))
    assert indexed_tables(result.captured) == {"ids": 40, "pos": 25}
    assert result.validate().ok


def test_integers_used_otherwise_index_no_table():
    class Shift(torch.nn.Module):
        def forward(self, k):
            return k * 2 + 1

    result = onnxport.to_onnx(Shift().eval(), (torch.randint(0, 9, (4,)),), dynamic_shapes={"k": {0: "n"}})
    assert indexed_tables(result.captured) == {}
