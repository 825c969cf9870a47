"""Random tensors of a symbolic size made with ``generator=None`` spelled out.

``torch.randn(size, generator=None, ...)`` (UnivNet's noise: ``torch.randn(shape, generator=generator,
...)`` with the caller's ``generator`` left at None) goes to the ``.generator`` overload of the
factory, whose composite kernel asks for concrete sizes ("SymIntArrayRef expected to contain only
concrete integers"); the same call without the keyword takes the overload that traces a symbolic
size. ``NO_GENERATOR_KEYWORD`` (a registered capture patch) drops ``generator=None`` from
``torch.rand``, ``torch.randn`` and ``torch.randint`` while torch.export traces: the default
generator draws the numbers either way. A generator that is not None is passed on as given.

Semantics: ``torch.randn`` / ``torch.rand`` / ``torch.randint`` (PyTorch docs: ``generator``, "a
pseudorandom number generator for sampling"; None is the default generator).
"""

from __future__ import annotations

from typing import Callable

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register

FACTORIES = ("rand", "randn", "randint")


def _make(original: Callable) -> Callable:
    def factory(*args, **kwargs):
        if "generator" in kwargs and kwargs["generator"] is None:
            del kwargs["generator"]
        return original(*args, **kwargs)

    return factory


def _changes() -> list:
    return [SetAttribute(torch, name, _make) for name in FACTORIES]


NO_GENERATOR_KEYWORD = register(Patch(
    "random factories without generator=None", _changes,
    "torch.rand / randn / randint: while torch.export traces, a generator=None keyword is dropped (its overload "
    "asks for concrete sizes; without it a symbolic size traces); the default generator draws the numbers either "
    "way", when=always, order=180))
