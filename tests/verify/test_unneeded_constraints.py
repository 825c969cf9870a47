"""The sizes a constraint the example breaks is tried at (``verify/unneeded_constraints.py``): a model traced
at a larger example (a sequence of one chunk of 256 traced at 257) has its ``seq >= 257`` tried at the
example, the two smallest sizes it excludes and the size below its boundary, not at every size listed."""

from onnxport.capture.guards.conditions import Guard, GuardStatus
from onnxport.verify.unneeded_constraints import candidates


def _chunks(excluded: tuple) -> Guard:
    return Guard("seq >= 257", GuardStatus.ADOPTED, None, excluded, ({"seq": 257},), "range", "seq >= 257", ("seq",))


def test_a_range_the_example_breaks_is_tried_at_its_example_smallest_sizes_and_boundary():
    guard = _chunks(tuple({"seq": n} for n in range(1, 7)))
    [(found, sizes)] = candidates([guard], [], {"seq": 7})
    assert found is guard
    assert sizes == ({"seq": 7}, {"seq": 1}, {"seq": 2}, {"seq": 256})


def test_sizes_the_constraint_allows_are_not_tried():
    guard = _chunks(({"seq": 1}, {"seq": 300}))  # 300 holds: not a size the constraint excludes
    [(_, sizes)] = candidates([guard], [], {"seq": 7})
    assert sizes == ({"seq": 7}, {"seq": 1}, {"seq": 256})
