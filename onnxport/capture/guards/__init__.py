"""Shape guards in one place: every condition on sizes torch.export's trace relies on, recorded
while it traces, decided over the sizes the user declared, and classified as proved, kept or
adopted (``GuardStatus``) or refused with the user's line.

- ``record``: the patches that record, while torch.export traces, each condition it defers, each
  range it narrows, each size it pins and each data-dependent size it makes;
- ``events``: those records turned into decisions: the range violations torch raised
  (``violation_ranges``) and, once a program is captured, every narrowed range and deferred
  condition (``decide_captured``);
- ``conditions``: one condition decided exactly over the declared sizes (``decide``), the
  ``Guard`` it becomes;
- ``far_bounds``: a branch whose other side only sizes far above the example reach, read as the
  upper bound it sets (adopted with a note) instead of refused;
- ``probe``: the smallest sizes, run in eager PyTorch (``probe_size_one``).

The capture steps (``capture.steps``) call ``decide_program`` once a program is captured;
everything else reads ``Guard``s (``adopted_of(guards)``, ``Captured.adopted()``).
"""

from onnxport.capture.guards.conditions import (Guard, GuardStatus, SizeVar, adopted_of, excluded_text, range_guard)
from onnxport.capture.guards.events import Narrowing, decide_program, violation_ranges
from onnxport.capture.guards.record import (DEFER_RANGE_VIOLATIONS, RECORD_GUARDS, RECORD_SPECIALIZATIONS,
                                            RECORD_UNBACKED, GuardEvent, Specialization, Unbacked)

__all__ = ["DEFER_RANGE_VIOLATIONS", "RECORD_GUARDS", "RECORD_SPECIALIZATIONS", "RECORD_UNBACKED", "Guard",
           "GuardEvent", "GuardStatus", "Narrowing", "SizeVar", "Specialization", "Unbacked", "adopted_of",
           "decide_program", "excluded_text", "range_guard", "violation_ranges"]
