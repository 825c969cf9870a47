"""The float64 reference and its bound: a float32 output judged by its distance to float64 relative
to eager float32's own, against the output's scale; today's dtype tolerances where no float64 run
is possible, with the reason on the row."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir
import pytest
import torch

import onnxport
from exportcheck import Fn
from onnxport.translate.registry import override
from onnxport.verify import reference
from onnxport.verify.float64_bound import CEILING, FLOOR, K, distances
from onnxport.verify.report import EXACT, FLOAT64, WIDTH, Check, ValidationReport

aten = torch.ops.aten
DYN = {"x": {0: "n"}}


def rows(report, basis=None):
    return [c for c in report.checks if not c.rejected and (basis is None or c.basis == basis)]


def test_the_bound_is_8_times_eager_float32s_distance_plus_1e_5_of_the_scale():
    """Pins the bound: looser lets wrong models pass, tighter fails right ones."""
    assert (K, FLOOR, CEILING) == (8.0, 1e-5, 0.01)
    ref = np.array([0.0, 1e-9, 4.0])
    eager = ref + np.array([0.0, 1e-9, 1e-6])  # 1e-6 from float64 at most
    limit = K * 1e-6 + FLOOR * 4.0
    assert distances(eager, ref, ref + np.array([0.0, 0.0, 0.99 * limit])).ok
    assert not distances(eager, ref, ref + np.array([0.0, 0.0, 1.01 * limit])).ok
    # relative to the output's scale: 100x off at a near-zero element is no failure
    near_zero = distances(eager, ref, ref + np.array([0.0, 1e-7, 0.0]))
    assert near_zero.ok and near_zero.relative(near_zero.onnx_ref) == pytest.approx(2.5e-8)


def test_where_eager_float32_is_exact_the_floor_judges():
    ref = np.linspace(-2.0, 2.0, 9)
    floor = FLOOR * 2.0
    assert distances(ref, ref, ref + floor * 0.9).ok
    assert not distances(ref, ref, ref + floor * 1.1).ok


def test_the_run_on_inputs_moved_by_one_ulp_widens_the_bound_only_as_far_as_it_reaches():
    ref = np.array([1.0, -1.0])
    got = ref + 1e-3
    assert not distances(ref, ref, got).ok
    d = distances(ref, ref, got, moved=ref + 2e-4)  # a last-bit change of the inputs moves the output 2e-4
    assert d.ok and d.moved and d.eager_ref == pytest.approx(2e-4)
    assert not distances(ref, ref, got, moved=ref + 1e-5).ok


def test_no_output_passes_farther_than_a_hundredth_of_its_scale_from_float64():
    ref = np.array([1.0, -2.0])
    eager = ref + np.array([0.0, 0.021])  # float32 rounding never moves an output that far: no reference
    assert not distances(eager, ref, eager).usable
    assert distances(ref + 0.004, ref, ref + 0.019).usable
    d = distances(ref + 0.004, ref, ref + 0.019, moved=ref + 0.05)  # ill-conditioned: the moved run reaches far
    assert d.limit == pytest.approx(CEILING * 2.0) and d.ok
    assert not distances(ref + 0.004, ref, ref + 0.021, moved=ref + 0.05).ok


class Drifting(torch.nn.Module):
    """A counter outside the graph: every eager call gives another result."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x.sin() * self.calls


def test_an_output_eager_does_not_reproduce_is_not_judged_against_float64():
    report = onnxport.to_onnx(Drifting().eval(), (torch.randn(3, 4),), dynamic_shapes=DYN).validate(sizes=[])
    assert not report.ok
    drifted = [c for c in rows(report) if c.inputs != "example" and c.why != "exact zeros"]
    assert drifted and all(not c.ok and "farther than float32 rounding goes" in c.basis for c in drifted), report
    assert all(c.eager_vs_float64 > CEILING for c in drifted)


def test_moved_inputs_change_by_exactly_one_ulp_and_leave_masks_and_integers():
    x = torch.tensor([0.3, -2.5e-3, 1.0, 0.0, float("inf"), float("nan"), 7.0, 1e30])
    ids = torch.tensor([1, 2, 3])
    (mx, mids), _ = reference.moved_one_ulp((x, ids), {}, seed=0)
    ulp = torch.nextafter(x.abs(), torch.tensor(float("inf"))) - x.abs()
    assert torch.allclose((mx[:2] - x[:2]).abs(), ulp[:2])
    assert torch.equal(mx[2:5], x[2:5]) and torch.isnan(mx[5]) and torch.equal(mx[6:], x[6:])
    assert torch.equal(mids, ids)


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 8)

    def forward(self, x):
        return torch.tanh(self.lin(x)) * 3


def test_a_right_model_is_judged_against_float64_on_every_set():
    report = onnxport.to_onnx(Linear().eval(), (torch.randn(3, 16),), dynamic_shapes=DYN).validate()
    assert report.ok, report
    judged = rows(report, FLOAT64)
    assert judged and len(judged) == len(rows(report))
    assert all(c.eager_vs_float64 < 1e-6 and c.onnx_vs_float64 <= c.limit for c in judged)


def test_an_error_of_a_ten_thousandth_is_caught_where_the_dtype_tolerance_let_it_pass():
    def exp_off(ctx, x):  # exp, 1e-4 too large: within float32's old tolerance (rtol 1e-3), far beyond float32's error
        return ctx.op.Mul(ctx.op.Exp(x), ctx.scalar(1.0 + 1e-4, ir.DataType.FLOAT))

    x = torch.randn(4, 8)
    with override({aten.exp.default: exp_off}):
        result = onnxport.to_onnx(Fn(torch.exp).eval(), (x,), dynamic_shapes=DYN)
    assert result.validate(atol=1e-4, rtol=1e-3).ok  # the per-element tolerance sees nothing
    report = result.validate()
    assert not report.ok and all(c.basis == FLOAT64 for c in report.checks if not c.ok and not c.rejected)


class MakesFloat32(torch.nn.Module):
    def forward(self, x):
        return x @ torch.ones(x.shape[-1], 3)  # a float32 tensor made inside: no float64 run


class CastsItsOutput(torch.nn.Module):
    def forward(self, x):
        return (x.double() * 2).float(), x * 3  # the first output's dtype is the model's choice


class Counts(torch.nn.Module):
    def forward(self, ids):
        return ids * 2 + 1, (ids > 3).sum(-1)


def test_where_no_float64_run_is_possible_the_dtype_tolerance_judges_with_the_reason_on_the_row():
    x = torch.randn(3, 4)
    failing = onnxport.to_onnx(MakesFloat32().eval(), (x,), dynamic_shapes=DYN).validate()
    assert failing.ok and all(c.basis.startswith("eager float64 failed: RuntimeError: expected m1 and m2 to have "
                                                 "the same dtype") for c in rows(failing)), failing
    assert "eager float64 failed" in str(failing) and "dtype" in str(failing)
    cast = onnxport.to_onnx(CastsItsOutput().eval(), (x,), dynamic_shapes=DYN).validate()
    assert cast.ok
    assert all("float64 run gives float32" in c.basis for c in rows(cast) if c.output == "output_0")
    assert all(c.basis == FLOAT64 for c in rows(cast) if c.output == "output_1" and c.why != "exact zeros")
    given = onnxport.to_onnx(Linear().eval(), (torch.randn(3, 16),), dynamic_shapes=DYN).validate(atol=1e-4)
    assert all(c.basis.startswith("tolerances given: judged by |ONNX - eager| <= 0.0001 + 0.001 |eager|")
               for c in rows(given))
    ids = torch.randint(0, 9, (2, 5))
    ints = onnxport.to_onnx(Counts().eval(), (ids,), dynamic_shapes={"ids": {0: "b"}}).validate()
    assert ints.ok and all(c.basis == EXACT for c in rows(ints))
    double = onnxport.to_onnx(Linear().double().eval(), (torch.randn(3, 16, dtype=torch.float64),),
                              dynamic_shapes=DYN).validate()
    assert double.ok and all("a float64 output" in c.basis for c in rows(double))


def test_weights_too_large_for_a_float64_copy_keep_the_dtype_tolerance(monkeypatch):
    monkeypatch.setattr(reference, "MAX_BYTES", 100)
    report = onnxport.to_onnx(Linear().eval(), (torch.randn(3, 16),), dynamic_shapes=DYN).validate()
    assert report.ok and all("too large for a float64 copy" in c.basis for c in rows(report))


def test_an_output_zero_in_float64_keeps_the_dtype_tolerance():
    report = onnxport.to_onnx(Fn(lambda x: torch.relu(-x.abs())).eval(), (torch.randn(3, 4),),
                              dynamic_shapes=DYN).validate()
    assert report.ok and all("zero everywhere" in c.basis for c in rows(report))


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x):
        self.total.add_(x.exp().sum(0))
        return x.sin()


def test_updated_buffers_are_judged_against_the_float64_run_too():
    result = onnxport.to_onnx(Counter().eval(), (torch.randn(3, 4),), dynamic_shapes=DYN)
    before = result.module.total.clone()
    report = result.validate()
    assert report.ok, report
    updated = [c for c in rows(report) if c.output == "total.updated"]
    assert updated and all(c.basis == FLOAT64 for c in updated)
    assert torch.equal(result.module.total, before)  # no run touched the model's own buffer


def test_the_table_fits_in_100_columns_with_the_sets_and_notes_in_a_legend():
    checks = [Check("values 3", "batch=2, time=17", "decoder.layers.0.self_attention.present.key.updated",
                    (2, 4, 17, 64), 1e-3, 1e-5, True, "", "large values, 10x the example's spread", False, 100.0,
                    1e-6, 1e-5, 2e-5, True, FLOAT64),
              Check("sizes 12", "batch=1, time=3000", "lengths", (1,), 0.0, 0.0, True, "", "4x the example",
                    basis=EXACT),
              Check("sizes 13", "batch=5, time=9", "*", (), math.nan, math.nan, False,
                    "eager PyTorch failed on these inputs: " + "RuntimeError: " + "x" * 200, "minimum", True)]
    text = str(ValidationReport(tuple(checks)))
    assert max(len(line) for line in text.splitlines()) <= WIDTH, text
    assert "1.0e-06*" in text and "skip [1]" in text
    legend = text.split("\n\n", 1)[1]
    assert "batch=1, time=3000 (4x the example" in legend and "[1] eager rejects these inputs" in legend
