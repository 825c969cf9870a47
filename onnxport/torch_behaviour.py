"""What the installed torch does where torch releases differ, probed once per process.

onnxport supports several torch minors (see README, "Supported torch versions"). Where their
behaviour differs in a way an exported model must follow, the difference is decided by running the
installed torch on a tiny input once and remembering the answer, never by comparing version strings:
a backport, a nightly or a patched build then gets the behaviour it actually has.
"""

from __future__ import annotations

import functools

import torch


@functools.cache
def scan_accepts_zero_length() -> bool:
    """Whether ``torch.ops.higher_order.scan`` over a scanned axis of length 0 returns the initial
    carries and empty stacked outputs (torch 2.14 and later) rather than raising (torch 2.13 raises
    ``IndexError`` in ``select``). Eager, on two float32 tensors of 4 elements; cached per process.

    Semantics: ``torch/_higher_order_ops/scan.py`` of the installed torch.
    """

    def combine(carry: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return carry + x, carry * x

    try:
        carry, ys = torch.ops.higher_order.scan(combine, [torch.zeros(4)], [torch.zeros(0, 4)], [])
    except (IndexError, RuntimeError):
        return False
    return tuple(carry.shape) == (4,) and tuple(ys.shape) == (0, 4)
