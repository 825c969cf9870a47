"""transformers' mixture-of-experts layers while torch.export traces: the grouped implementation.

transformers' per-expert Python loop (``experts_implementation="eager"``) iterates over the experts
that received tokens, a data-dependent count torch.export cannot trace. ``EXPERTS_AS_GROUPED_MM`` (a
registered capture patch) runs transformers' own grouped implementation instead for the experts
classes that offer both (``@use_experts_implementation``): transformers' ``ExpertsInterface``
declares them interchangeable. Its op, ``transformers::grouped_mm_fallback``, is translated in
``translate/ops/moe.py``.

Semantics: transformers' ``transformers/integrations/moe.py`` (``ExpertsInterface``,
``grouped_mm_experts_forward``).
"""

from __future__ import annotations

import sys

from onnxport.capture.patches import Patch, SetAttribute, register
from onnxport.capture.tracing import translating


def _grouped_experts_changes() -> list:
    moe = sys.modules.get("transformers.integrations.moe")
    interface = getattr(moe, "ExpertsInterface", None)
    grouped = getattr(moe, "grouped_mm_experts_forward", None)
    if interface is None or grouped is None:
        return []

    def make(original):
        def get_interface(self, experts_implementation, default):
            if experts_implementation in (None, "eager"):
                return grouped
            return original(self, experts_implementation, default)

        return get_interface

    return [SetAttribute(interface, "get_interface", make)]


EXPERTS_AS_GROUPED_MM = register(Patch(
    "experts as grouped_mm", _grouped_experts_changes,
    "transformers' experts classes that offer several implementations (@use_experts_implementation) and are set "
    "to the per-expert Python loop (\"eager\", or none set) run transformers' grouped_mm_experts_forward while "
    "torch.export traces. Nothing changes when transformers is not imported", when=translating, order=22))
