"""The size sets of validation: below, above, far above (4x, 64 on sequence dims) the example."""

from __future__ import annotations

from onnxport.verify import validation_sizes
from onnxport.verify.sizes import BUDGET, GROWTH, SEQUENCE_MIN, large_sizes


def test_far_set_is_four_times_the_example_and_64_on_sequence_dims():
    sets = validation_sizes({"batch": 2, "time": 7}, {}, [], sequence={"time"})
    far = [s for why, s in sets if why.startswith(f"{GROWTH}x")]
    assert far == [{"batch": 2 * GROWTH, "time": SEQUENCE_MIN}]


def test_far_set_stays_within_the_declared_range():
    sets = validation_sizes({"batch": 2, "time": 7}, {"batch": (1, 5), "time": (1, 40)}, [], sequence={"time"})
    far = [s for why, s in sets if why.startswith(f"{GROWTH}x")]
    assert far == [{"batch": 5, "time": 40}]


def test_far_set_grows_fewer_dims_when_the_inputs_would_be_too_large():
    def cost(sizes):  # an image batch: b x 3 x h x w
        return sizes["b"] * 3 * sizes["h"] * sizes["w"]

    examples = {"b": 8, "h": 224, "w": 224}
    why, far = large_sizes(examples, {}, sequence={"h", "w"}, cost=cost)
    assert cost(far) <= max(BUDGET, GROWTH * cost(examples))
    assert any(far[d] == GROWTH * examples[d] for d in examples) and "only" in why


def test_no_far_set_when_nothing_can_grow():
    assert large_sizes({"n": 4}, {"n": (1, 4)}) is None


def test_every_set_within_range():
    ranges = {"batch": (1, 16), "time": (5, 300)}
    for why, s in validation_sizes({"batch": 3, "time": 23}, ranges, [], sequence={"time"}):
        assert all(ranges[d][0] <= v <= ranges[d][1] for d, v in s.items()), (why, s)
