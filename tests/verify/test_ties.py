"""Ties inside the model: an argmin / argmax whose pick drives a gather (a residual vector
quantizer's nearest code) is judged as a tie where its values tie (``verify/ties.py``,
``TieWatch``); a wrong export still fails."""

import numpy as np
import onnx_ir as ir
import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export

F = torch.nn.functional


class ResidualVQ(torch.nn.Module):
    """A neural codec's residual vector quantizer (EnCodec's euclidean codebook): each stage takes
    the code nearest the residual left by the stages before, by argmax of minus the squared distance,
    and gathers it. On exact zeros every distance is minus a code's squared norm, and the codes have
    unit norm: they all tie, and eager and onnxruntime pick different, equally near codes."""

    def __init__(self, stages=3, codes=64, dim=128):
        super().__init__()
        self.codebooks = torch.nn.Parameter(F.normalize(torch.randn(stages, codes, dim), dim=-1))

    def forward(self, x):
        residual, quantized, codes = x, torch.zeros_like(x), []
        for book in self.codebooks:
            distance = -(residual.pow(2).sum(-1, keepdim=True) - 2 * residual @ book.T + book.pow(2).sum(-1))
            index = distance.argmax(-1)
            code = F.embedding(index, book)
            quantized, residual = quantized + code, residual - code
            codes.append(index)
        return quantized, torch.stack(codes, -1)


SPEC = ({0: Dim("batch"), 1: Dim("frames")},)
pytestmark = pytest.mark.slow  # each exports and validates a 3-stage quantizer (0.5-2 s)


def _export():
    return onnxport.to_onnx(ResidualVQ().eval(), (torch.randn(2, 5, 128),), dynamic_shapes=SPEC)


def test_a_right_residual_vq_export_passes_every_default_set():
    result = check_export(ResidualVQ(), (torch.randn(2, 5, 128),), SPEC)
    report = result.validate()
    tied = [c for c in report.checks if "indices chosen among equal values" in c.note]
    assert {c.why for c in tied} >= {"exact zeros"} and all(c.rejected for c in tied)
    assert "argmax at " in tied[0].note and "distance.argmax(-1)" in tied[0].note
    compared = [c for c in report.checks if not c.rejected]
    assert {c.inputs for c in compared} >= {"example", "sizes 1", "values 1", "values 3"}


def _driven_by_argmax(value, depth=4):
    node = value.producer()
    return node is not None and (node.op_type == "ArgMax" or depth > 0 and any(
        i is not None and _driven_by_argmax(i, depth - 1) for i in node.inputs))


def _mutated_gather(result):
    """The export with its first stage's gather of the chosen code reading the code after it."""
    model = ir.serde.deserialize_model(ir.serde.serialize_model(result.model))
    gather = next(n for n in model.graph if n.op_type == "Gather" and _driven_by_argmax(n.inputs[1]))
    one = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(np.array(1, dtype=np.int64)))])
    shifted = ir.Node("", "Add", [gather.inputs[1], one.outputs[0]])
    model.graph.insert_before(gather, [one, shifted])
    gather.replace_input_with(1, shifted.outputs[0])
    return result.replace(model=model)


def test_a_mutated_gather_still_fails():
    report = _mutated_gather(_export()).validate()
    assert not report.ok
    assert {c.inputs for c in report.checks if not c.ok and not c.rejected} >= {"example"}


def test_a_tie_is_recognised_only_where_the_values_tie():
    from onnxport.verify.ties import TieWatch

    result = _export()
    watch = TieWatch(result.program)
    assert watch and watch.tied((torch.randn(2, 5, 128),), {}) == {}
    tied = watch.tied((torch.zeros(2, 5, 128),), {})
    assert sorted(tied) == [0, 1] and all("argmax" in why for why in tied.values())


def picked(x):
    """The largest value of each row, gathered at argmax's index: on exact zeros every index ties and
    every pick gathers the same zero."""
    return torch.gather(x, -1, x.argmax(-1, keepdim=True))


def test_a_tie_whose_outputs_agree_is_compared_without_running_the_program_again(monkeypatch):
    from exportcheck import Fn
    from onnxport.verify.ties import TieWatch

    result = check_export(Fn(picked), (torch.randn(3, 8),), {"x": {0: Dim("batch")}})
    assert TieWatch(result.program).tied((torch.zeros(3, 8),), {}).keys() == {0}  # a tie there
    runs = []
    tied = TieWatch.tied
    monkeypatch.setattr(TieWatch, "tied", lambda self, *a: runs.append(a) or tied(self, *a))
    report = result.validate()
    zeros = [c for c in report.checks if c.why == "exact zeros"]
    assert zeros and all(c.ok and not c.rejected for c in zeros), report
    assert runs == []  # no output differed: no set ran the program for its ties
