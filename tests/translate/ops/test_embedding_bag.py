"""torch.nn.functional.embedding_bag / nn.EmbeddingBag (tests ops/embedding_bag.py)."""

import pytest
import torch
import torch.nn.functional as F

from exportcheck import check_export


class Bags(torch.nn.Module):
    def __init__(self, mode, padding_idx=None, include_last_offset=False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(10, 4))
        self.kw = dict(mode=mode, padding_idx=padding_idx, include_last_offset=include_last_offset)

    def forward(self, indices, offsets):
        return F.embedding_bag(indices, self.weight, offsets, **self.kw)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_bags_given_by_offsets(mode, padding_idx):
    indices = torch.tensor([1, 3, 3, 7, 2, 9, 0])
    offsets = torch.tensor([0, 2, 2, 5])  # the second bag is empty
    # offsets must be sorted and start at 0: the input sets are given, not drawn at random
    check_export(Bags(mode, padding_idx), (indices, offsets), {"indices": {0: "n"}, "offsets": {0: "bags"}}, sizes=[],
                 inputs=[(torch.tensor([4, 4, 1]), torch.tensor([0, 1])),
                         (torch.tensor([3, 3, 8, 0, 5, 5, 6, 1, 2]), torch.tensor([0, 4, 4, 4, 7, 8]))])


def test_per_sample_weights_and_last_offset():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = torch.nn.EmbeddingBag(10, 4, mode="sum", include_last_offset=True)

        def forward(self, indices, offsets, w):
            return self.bag(indices, offsets, per_sample_weights=w)

    check_export(M(), (torch.tensor([1, 3, 3, 7, 2]), torch.tensor([0, 2, 5]), torch.rand(5)),
                 {"indices": {0: "n"}, "offsets": {0: "bags"}, "w": {0: "n"}}, sizes=[],
                 inputs=[(torch.tensor([4]), torch.tensor([0, 1]), torch.rand(1)),
                         (torch.tensor([3, 3, 8, 0, 5, 5]), torch.tensor([0, 1, 1, 4, 6]), torch.rand(6))])


def test_two_dimensional_indices():
    bag = torch.nn.EmbeddingBag(10, 3, mode="mean")
    check_export(bag, (torch.randint(0, 10, (4, 5)),), {"input": {0: "batch", 1: "length"}})
