"""The one input maker: sizes, lengths, and each kind of value validation asks for."""

from __future__ import annotations

import math

import pytest
import torch

import onnxport
from onnxport.capture.inputs import LARGE, MAX_ELEMENTS, VALUE_KINDS, InputSpec, make_inputs

FEATS = InputSpec("feats", torch.float32, ("batch", "time", 4), mean=1.5, std=0.25)  # an example in about [1, 2)
LENGTHS = InputSpec("lengths", torch.int64, ("batch",), low=1, high=6, lengths_of="time")
IDS = InputSpec("ids", torch.int64, ("batch", "time"), low=0, high=9, vocab=50)
SIZES = {"batch": 6, "time": 11}


@pytest.mark.parametrize("values", ["example", *VALUE_KINDS])
@pytest.mark.parametrize("seed", range(5))
def test_lengths_stay_within_their_axis_and_reach_it(values, seed):
    for time in (1, 2, 11, 64):
        sizes = {"batch": 7, "time": time}
        made = make_inputs([FEATS, LENGTHS], sizes, seed=seed, values=values)
        lengths = made["lengths"]
        assert lengths.shape == (7,) and lengths.dtype == torch.int64
        assert int(lengths.min()) >= 1 and int(lengths.max()) == time


def test_shapes_follow_the_sizes_and_expressions():
    import sympy

    h = sympy.Symbol("h", integer=True, positive=True)
    spec = InputSpec("x", torch.float32, (2, "h", 2 * h + 1))
    assert list(make_inputs([spec], {"h": 5})["x"].shape) == [2, 5, 11]


def test_example_values_follow_the_example_spread():
    x = make_inputs([FEATS], SIZES, values="example")["feats"]
    assert 1.3 < float(x.mean()) < 1.7 and float(x.min()) > 0


def test_symmetric_values_reach_negatives_an_example_in_1_2_never_does():
    x = make_inputs([FEATS], SIZES, values="symmetric")["feats"]
    assert float(x.min()) < -1 and float(x.max()) > 1
    assert abs(float(x.mean())) < 0.5


def test_zeros_are_exact():
    x = make_inputs([FEATS, IDS], SIZES, values="zeros")
    assert bool((x["feats"] == 0).all()) and x["feats"].dtype == torch.float32
    assert int(x["ids"].max()) <= 9  # integers keep their example range


def test_large_values_go_well_past_the_example():
    x = make_inputs([FEATS], SIZES, values="large")["feats"]
    assert float(x.abs().max()) > 3 * LARGE and float(x.min()) < 0


def test_special_values_hold_nan_and_both_infinities():
    x = make_inputs([FEATS], SIZES, values="special")["feats"]
    assert bool(x.isnan().any()) and bool((x == math.inf).any()) and bool((x == -math.inf).any())
    finite = x[x.isfinite()]
    assert finite.numel() > x.numel() // 2


def test_range_values_span_a_table_vocabulary_ends_included():
    ids = make_inputs([IDS], SIZES, values="range")["ids"]
    assert int(ids.min()) == 0 and int(ids.max()) == 49


def test_range_values_span_a_declared_range_or_stretch_the_example():
    declared = InputSpec("k", torch.int64, ("batch",), low=3, high=20, declared=True)
    k = make_inputs([declared], {"batch": 40}, values="range")["k"]
    assert int(k.min()) == 3 and int(k.max()) == 20
    guessed = InputSpec("k", torch.int64, ("batch",), low=-2, high=5)
    k = make_inputs([guessed], {"batch": 40}, values="range")["k"]
    assert int(k.min()) == -8 and int(k.max()) == 21
    flags = InputSpec("attention_mask", torch.int64, ("batch",), low=0, high=1)  # an integer mask stays 0/1
    assert set(make_inputs([flags], {"batch": 40}, values="range")["attention_mask"].tolist()) == {0, 1}


def test_ranges_near_the_dtype_limits_are_made():
    near = InputSpec("k", torch.int64, ("batch",), low=-(1 << 62), high=(1 << 62) + 5)  # 4x past it overflows int64
    for values in ("example", *VALUE_KINDS):
        k = make_inputs([near], {"batch": 50}, values=values)["k"]
        assert k.dtype == torch.int64 and int(k.min()) >= torch.iinfo(torch.int64).min


def test_divisors_stay_nonzero_in_every_kind():
    spec = InputSpec("d", torch.int64, ("batch",), low=-3, high=3, nonzero=True)
    for values in ("example", *VALUE_KINDS):
        assert bool((make_inputs([spec], {"batch": 200}, values=values)["d"] != 0).all())


def test_masks_keep_both_values_in_each_row():
    mask = InputSpec("mask", torch.bool, ("batch", "time"))
    m = make_inputs([mask], SIZES, values="large")["mask"]
    assert bool(m.any(1).all()) and bool((~m).any(1).all())


def test_inputs_too_large_to_build_are_refused_before_allocating():
    with pytest.raises(onnxport.ValidationError, match="elements") as info:
        make_inputs([FEATS], {"batch": 10**11, "time": 16})
    assert "feats" in info.value.what and len(str(info.value).splitlines()[0]) <= 200
    assert math.prod(FEATS.shape({"batch": 10**11, "time": 16})) > MAX_ELEMENTS


def test_unknown_value_kind_is_refused():
    with pytest.raises(ValueError, match="values"):
        make_inputs([FEATS], SIZES, values="negative")


def test_prefix_masks_stay_prefix_masks_with_a_full_row():
    example = torch.arange(9)[None] < torch.tensor([[9], [4], [1]])
    from onnxport.capture.inputs import _like

    spec = _like("mask", example, ("batch", "time"), {})
    assert spec.prefix and not spec.full
    for values in ("example", *VALUE_KINDS):
        m = make_inputs([spec], {"batch": 6, "time": 13}, seed=3, values=values)["mask"]
        assert bool(m[:, 0].all()) and bool((m[:, 1:] <= m[:, :-1]).all()) and bool(m.all(1).any())
    scattered = torch.tensor([[True, False, True], [False, True, True]])
    assert not _like("mask", scattered, ("batch", "time"), {}).prefix
