"""Data-dependent counts of one mask computed more than once share their name (``translate/equal_counts.py``);
counts of masks that may differ (a tensor changed in place between them, random masks) do not."""

from __future__ import annotations

import pytest
import torch

import onnxport
from exportcheck import check_export
from onnxport.errors import ExportError
from onnxport.translate.equal_counts import equal_counts


class Kept(torch.nn.Module):
    """``post_process_object_detection``'s filter: the mask ``scores > 0`` computed for each output."""

    def forward(self, scores, boxes):
        return scores[scores > 0], (scores * 2)[scores > 0], boxes[scores > 0]


class ChangedBetween(torch.nn.Module):
    def forward(self, x):
        a = x[x > 0]
        x.add_(1)
        return a, x[x > 0], (x * 2)[x > 0]


class Random(torch.nn.Module):
    def forward(self, x):
        return x[torch.rand_like(x) > 0.5], x[torch.rand_like(x) > 0.5]


def _symbols(model, *args):
    program = torch.export.export(model, args, strict=False)
    return [str(v) for v in equal_counts(program.graph).values()]


def test_counts_of_one_mask_are_equal_and_others_not():
    assert _symbols(Kept(), torch.randn(10), torch.randn(10, 4)) == ["u0", "u0", "u0"]
    assert _symbols(ChangedBetween(), torch.randn(10)) == ["u0", "u1", "u1"]
    assert _symbols(Random(), torch.randn(10)) == ["u0", "u1"]


@pytest.mark.slow
def test_counts_of_one_mask_share_the_name_output_dims_gives():
    args = (torch.randn(12), torch.randn(12, 4))
    check_export(Kept(), args, {"scores": {0: "n"}, "boxes": {0: "n"}}, output_names=["s", "t", "b"],
                 output_dims={"s": {0: "num_detections"}, "b": {0: "num_detections"}},
                 sizes=[{"n": 3}, {"n": 30}], values=[],
                 expect_outputs={"s": ["num_detections"], "t": ["num_detections"], "b": ["num_detections", 4]})


def test_one_name_for_counts_that_may_differ_is_refused():
    with pytest.raises(ExportError, match="a size other than the one already named"):
        onnxport.to_onnx(Random(), (torch.randn(10),), output_dims={"output_0": {0: "k"}, "output_1": {0: "k"}})


class Deep(torch.nn.Module):
    """A mask at the end of 200 residual steps (each reading the step before twice)."""

    def forward(self, x):
        for _ in range(200):
            x = x + torch.tanh(x)
        return x[x > 0], (x * 2)[x > 0]


def test_masks_at_the_end_of_a_deep_graph_compare_quickly():
    assert _symbols(Deep(), torch.randn(10)) == ["u0", "u0"]
