"""``chunk`` of an axis that is a whole number of chunks by its form (ProphetNet's streams
concatenated) keeps the axis dynamic; one that is not (two halves of a batch, the second smaller at
odd sizes) is exported for the sizes that give as many pieces as the example."""

import pytest
import torch

from exportcheck import check_export


class Streams(torch.nn.Module):
    """Three streams of one length concatenated, then split back with ``chunk`` (method and function)."""

    def forward(self, x):  # [batch, n, 4]
        h = torch.cat([x, x.flip(1), x * 2], dim=1)
        a, b, c = h.chunk(3, dim=1)
        first, *rest = torch.chunk(h, 3, 1)
        return a + b * c, first - rest[-1]


def test_chunks_of_a_multiple_keep_the_length_dynamic():
    check_export(Streams(), (torch.randn(2, 5, 4),), ({0: "batch", 1: "n"},),
                 sizes=[{"batch": 1, "n": 1}, {"batch": 3, "n": 8}],
                 expect_outputs={"output_0": ["batch", "n", 4], "output_1": ["batch", "n", 4]})


class Halves(torch.nn.Module):
    def forward(self, x):
        d, e = x.chunk(2, dim=0)  # x.shape[0] = 1 gives one piece, 3 gives pieces of 2 and 1
        return d.sum(0) - e.sum(0)


@pytest.mark.slow
def test_two_chunks_of_any_size_hold_where_there_are_two():
    result = check_export(Halves(), (torch.randn(4, 3),), ({0: "b"},), sizes=[{"b": 2}, {"b": 3}, {"b": 9}])
    assert [str(c) for c in result.constraints] == ["b >= 2"]  # one row is one piece: unpacking fails in eager
