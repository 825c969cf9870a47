"""Names of output sizes computed from the model's data (``to_onnx(output_dims=...)``): the count of
values a mask keeps, named by the user or ``<output>_dim<axis>``, shared by every output of that size."""

from __future__ import annotations

import pytest
import torch

import onnxport
from exportcheck import check_export


class Kept(torch.nn.Module):
    """The rows of ``x`` whose score passes 0, their scores, and their count (a data-dependent size)."""

    def forward(self, x, scores):
        keep = scores > 0
        return x[keep], scores[keep] * 2, x.shape[0] + x[keep].shape[1]


def _inputs(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g), torch.randn(n, generator=g)


DIMS = {"x": {0: "n"}, "scores": {0: "n"}}
OTHER = [_inputs(4, 1), _inputs(17, 2)]


def test_a_named_count_names_every_output_of_that_size():
    check_export(Kept(), _inputs(9, 0), DIMS, inputs=OTHER, sizes=[], values=[],
                 output_names=["rows", "kept_scores", "total"], output_dims={"rows": {0: "num_kept"}},
                 expect_outputs={"rows": ["num_kept", 3], "kept_scores": ["num_kept"]})


def test_an_unnamed_count_is_named_after_the_first_output_holding_it():
    check_export(Kept(), _inputs(9, 0), DIMS, inputs=OTHER, sizes=[], values=[],
                 expect_outputs={"output_0": ["output_0_dim0", 3], "output_1": ["output_0_dim0"]})


def test_naming_from_a_later_output_names_the_earlier_one_too():
    check_export(Kept(), _inputs(9, 0), DIMS, inputs=OTHER, sizes=[], values=[],
                 output_dims={"output_1": {-1: "num_kept"}},
                 expect_outputs={"output_0": ["num_kept", 3], "output_1": ["num_kept"]})


@pytest.mark.parametrize("output_dims, message", [
    ({"rows": {0: "k"}}, "does not return"),
    ({"output_0": {2: "k"}}, "has 2 axes"),
    ({"output_0": {1: "k"}}, "not a size computed from the model's data"),
    ({"output_0": {0: "n"}}, "already named 'n'"),
    ({"output_0": {0: "k"}, "output_1": {0: "j"}}, "one size both 'k' and 'j'"),
])
def test_output_dims_that_cannot_apply_are_refused(output_dims, message):
    with pytest.raises(onnxport.ExportError, match=message):
        onnxport.to_onnx(Kept(), _inputs(9, 0), dynamic_shapes=DIMS, output_dims=output_dims)
