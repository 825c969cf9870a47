"""Registry of ATen-overload -> ONNX translations.

A translation is a plain function ``fn(ctx, *args, **kwargs)`` taking the ATen overload's arguments
(FX nodes replaced by ``onnx_ir.Value``; SymInts by 0-d int64 values) and returning the ONNX value
(or a tuple/list of values for multi-output overloads). Register one with::

    @translates(aten.relu.default)
    def relu(ctx, x):
        return ctx.op.Relu(x)

User code may register translations too (``onnxport.translates``); a later registration of the same
overload replaces the earlier one.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

_REGISTRY: dict[Any, Callable] = {}
_CAPTURE_HOOKS: list[Callable[[], Any]] = []
_LOADED = False


def translates(*targets: Any) -> Callable[[Callable], Callable]:
    """Decorator registering ``fn`` as the translation of each target.

    Args:
        targets: ``torch._ops.OpOverload`` objects (``torch.ops.aten.add.Tensor``), an
            ``OpOverloadPacket`` (registers every overload of it), or a Python callable that appears
            as an FX ``call_function`` target (``operator.mul``, ``torch.ops.higher_order.scan``).
    """

    def deco(fn: Callable) -> Callable:
        for t in targets:
            overloads = getattr(t, "overloads", None)
            if callable(overloads) and not hasattr(t, "_schema"):
                for name in t.overloads():
                    _REGISTRY[getattr(t, name)] = fn
            else:
                _REGISTRY[t] = fn
        return fn

    return deco


def during_capture(factory: Callable[[], Any]) -> Callable[[], Any]:
    """Decorator registering ``factory() -> context manager`` entered around torch.export and
    decomposition (``capture_hooks``). An op family uses it to keep an ATen op whole in the graph
    when torch's own decomposition of it would not stay symbolic (lstm unrolled over time)."""
    _CAPTURE_HOOKS.append(factory)
    return factory


@contextlib.contextmanager
def capture_hooks() -> Iterator[None]:
    """Enter every ``during_capture`` context manager (the op families loaded first)."""
    _load()
    with contextlib.ExitStack() as stack:
        for factory in _CAPTURE_HOOKS:
            stack.enter_context(factory())
        yield


def _load() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from onnxport.translate import ops  # noqa: F401  (registers every family)


def lookup(target: Any) -> Callable | None:
    """Return the translation registered for ``target`` or None."""
    _load()
    return _REGISTRY.get(target)


def registered() -> dict[Any, Callable]:
    """A copy of the registry (target -> translation)."""
    _load()
    return dict(_REGISTRY)


class override:
    """Context manager replacing translations temporarily: ``with override({aten.relu.default: fn}):``."""

    def __init__(self, mapping: dict[Any, Callable]):
        self.mapping = mapping
        self.saved: dict[Any, Callable | None] = {}

    def __enter__(self):
        _load()
        for k, v in self.mapping.items():
            self.saved[k] = _REGISTRY.get(k)
            _REGISTRY[k] = v
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                _REGISTRY.pop(k, None)
            else:
                _REGISTRY[k] = v
        return False
