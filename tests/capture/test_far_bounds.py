"""A table that grows with the input (ESPnet's positional encodings: ``extend_pe``): a buffer of
positions extended when the input is longer than it. The trace follows the side the example takes,
so it holds up to the table's length only; the other side lies far above the example, and the export
adopts the bound, says it in a warning naming the ``if``, states it on ``result.constraints`` and
validates within it, in a few seconds. A bound the user declared a maximum beyond is refused, in words
that fit a one-sided condition; a bound near the example is not adopted this way."""

import math
import time

import pytest
import torch
from torch.export import Dim

import onnxport
from exportcheck import check_export
from onnxport.capture.guards.conditions import SizeVar, last_holding
from onnxport.capture.guards.far_bounds import FAR_SIDE, far_side, upper_bound
from onnxport.metadata import CONSTRAINTS_KEY

EXPORT_SECONDS = 15  # CPU seconds; the export takes about 2


class GrowingTable(torch.nn.Module):
    """Sine positions in a buffer of ``rows``, recomputed for the input's length when it is longer."""

    def __init__(self, rows: int = 5000, dim: int = 8):
        super().__init__()
        self.dim = dim
        self.register_buffer("pe", self.table(rows), persistent=False)

    def table(self, rows: int) -> torch.Tensor:
        pos = torch.arange(rows, dtype=torch.float32).unsqueeze(1)
        freq = torch.exp(torch.arange(0, self.dim, 2, dtype=torch.float32) * (-math.log(10000.0) / self.dim))
        return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)

    def extend(self, x: torch.Tensor) -> None:
        if self.pe.size(0) >= x.size(1):  # the branch: the table is long enough
            return
        self.pe = self.table(x.size(1))

    def forward(self, x):  # x: [batch, time, dim]
        self.extend(x)
        return x * 2 + self.pe[: x.size(1)]


def _export(model, spec, **kwargs):
    start = time.process_time()
    with pytest.warns(UserWarning) as caught:
        result = check_export(model, (torch.randn(2, 20, 8),), (spec,), **kwargs)
    return result, [str(w.message) for w in caught], time.process_time() - start


def test_the_far_bound_is_adopted_and_stated():
    model = GrowingTable().eval()
    result, said, seconds = _export(model, {0: "batch", 1: "time"}, values=[],
                                    sizes=[{"batch": 1, "time": 3}, {"batch": 3, "time": 777},
                                           {"batch": 1, "time": 5000}])
    assert [str(c) for c in result.constraints] == ["time <= 5000"]
    (constraint,) = result.constraints
    assert constraint.method == FAR_SIDE and "test_far_bounds.py" in constraint.where and "if self.pe.size(0)" in \
        constraint.where
    warned = [s for s in said if "time <= 5000" in s]
    assert len(warned) == 1 and "test_far_bounds.py" in warned[0] and "Dim('time', max=5000)" in warned[0] \
        and "torch.cond" in warned[0], said
    metadata = {p.key: p.value for p in result.model_proto.metadata_props}
    assert metadata[CONSTRAINTS_KEY] == "time <= 5000"
    assert seconds <= EXPORT_SECONDS, f"exported and validated in {seconds:.1f} s of CPU time"
    assert model.pe.shape == (5000, 8) and type(model.pe) is torch.Tensor  # the model is left as it was


def test_validation_keeps_to_the_bound():
    result, _, _ = _export(GrowingTable().eval(), {0: "batch", 1: "time"}, values=[])
    report = result.validate(values=[])
    assert report.ok and all(s.get("time", 0) <= 5000 for s in _sizes(report)), report
    with pytest.raises(onnxport.ValidationError, match="outside the range"):
        result.validate(sizes=[{"batch": 1, "time": 5001}], values=[])


def _sizes(report) -> list[dict]:
    return [{k: int(v) for k, v in (part.split("=") for part in c.sizes.split(", "))} for c in report.checks]


def test_a_minimum_only_leaves_the_top_open():
    result, said, _ = _export(GrowingTable().eval(), {0: "batch", 1: Dim("time", min=4)}, values=[])
    assert [str(c) for c in result.constraints] == ["time <= 5000"]


def test_a_declared_maximum_silences_it():
    start = time.process_time()
    result = check_export(GrowingTable().eval(), (torch.randn(2, 20, 8),), ({0: "batch", 1: Dim("time", max=5000)},),
                          values=[])
    assert result.constraints == [] and time.process_time() - start <= EXPORT_SECONDS


def test_a_declared_maximum_beyond_it_is_refused_in_words_that_fit():
    start = time.process_time()
    with pytest.raises(onnxport.SpecializationError) as refused:
        onnxport.to_onnx(GrowingTable().eval(), (torch.randn(2, 20, 8),),
                         dynamic_shapes=({0: "batch", 1: Dim("time", max=8000)},))
    text = str(refused.value)
    assert "time <= 5000" in text and "if self.pe.size(0)" in text
    assert "keeps one value over the" in text and "its other side starts at time = 5001" in text, text
    assert "intervals" not in text
    assert time.process_time() - start <= EXPORT_SECONDS


def test_a_bound_near_the_example_is_not_adopted_this_way():
    model = GrowingTable(rows=64).eval()
    with pytest.raises(onnxport.SpecializationError, match="time <= 64"):
        onnxport.to_onnx(model, (torch.randn(2, 20, 8),), dynamic_shapes=({0: "batch", 1: "time"},))
    assert model.pe.shape == (64, 8) and type(model.pe) is torch.Tensor  # fake and eager runs left it as it was


@pytest.mark.parametrize("python, bound", [
    ("time <= 5000", 5000),
    ("time*time <= 25000000", 5000),
    ("2*(((time - 1)//2 - 1)//2) - 1 <= 9999", 20006),
    ("time >= 5", None),  # a lower bound
    ("time % 4 == 0", None),  # a remainder
    ("time + time % 7 <= 5000", None),  # changes value more than once near its edge
    ("time <= 1 << 30", None),  # holds at every size checked
    ("time <= 20006 and time != 5000", None),  # fails at a size between those spread beyond EXHAUSTIVE
    ("time <= 1 << 21", None),  # further than the sizes each checked below a bound
])
def test_upper_bound_reads_one_sided_conditions_only(python, bound):
    assert upper_bound(python, "time", 1) == bound


def test_far_means_beyond_sixteen_examples_and_the_pieces_scan():
    var = SizeVar(None, "time", 1, None, True)
    assert far_side(("time <= 5000", ("time",)), "x.py:1", var, 20).bound == 5000
    assert far_side(("time <= 5000", ("time",)), "x.py:1", var, 400) is None  # 12.5 times the example
    assert far_side(("time <= 3000", ("time",)), "x.py:1", var, 20) is None  # within the sizes pieces scans
    assert far_side(("time <= 5000", ("time",)), "x.py:1", var, 6000) is None  # the example on the other side


def test_last_holding_finds_the_one_change():
    assert last_holding(lambda t: t <= 20006, 6151, 31193) == 20006
    assert last_holding(lambda t: t <= 3_000_000, 1 << 20, 1 << 24) == 3_000_000
    assert last_holding(lambda t: t + t % 7 <= 5000, 4096, 6151) is None
