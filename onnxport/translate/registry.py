"""Registry of ATen-overload -> ONNX translations, made per export.

A translation is a plain function ``fn(ctx, *args, **kwargs)`` taking the ATen overload's arguments
(FX nodes replaced by ``onnx_ir.Value``; SymInts by 0-d int64 values) and returning the ONNX value
(or a tuple/list of values for multi-output overloads). The op families register theirs with::

    @translates(aten.relu.default)
    def relu(ctx, x):
        return ctx.op.Relu(x)

    @translates(aten.rms_norm.default, opset=(23, None))   # only where the target opset allows
    def rms_norm_23(ctx, x, shape, weight=None, eps=None): ...

Users register theirs with ``onnxport.translates`` (``user_translates``): a user translation wins
over the built-in one for the same overload and opset, whenever either was registered.

``Registry(opset)`` is what one export uses: the lookup for its opset, and the capture hooks the
op families need (``during_capture``), handed to capture and translation as an argument. The op
family modules are imported when the first registry is made, not when ``onnxport`` is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

import torch

_BUILTIN: dict[Any, list["Translation"]] = {}
_USER: dict[Any, list["Translation"]] = {}
_CAPTURE_HOOKS: list[Callable[[], Any]] = []
_LOADED = False


@dataclasses.dataclass(frozen=True)
class Translation:
    """One translation of an overload and the opsets it serves (``(min, max)``, inclusive, None: open)."""

    fn: Callable | None  # None: "no translation" (the op is decomposed)
    opsets: tuple[int | None, int | None] = (None, None)

    def serves(self, opset: int) -> bool:
        lo, hi = self.opsets
        return (lo is None or opset >= lo) and (hi is None or opset <= hi)


def _targets(targets: tuple) -> list[Any]:
    out = []
    for t in targets:
        if isinstance(t, str):  # "namespace::op.overload": an op of a library not imported here
            out.append(t)
            continue
        overloads = getattr(t, "overloads", None)
        if callable(overloads) and not hasattr(t, "_schema"):
            out += [getattr(t, name) for name in t.overloads()]
        else:
            out.append(t)
    return out


def _register(table: dict, targets: tuple, opset: tuple | None) -> Callable[[Callable], Callable]:
    span = tuple(opset) if opset is not None else (None, None)

    def deco(fn: Callable) -> Callable:
        for t in _targets(targets):
            table.setdefault(t, []).insert(0, Translation(fn, span))  # the latest first
        return fn

    return deco


def translates(*targets: Any, opset: tuple | None = None) -> Callable[[Callable], Callable]:
    """Decorator registering a built-in translation of each target.

    Args:
        targets: ``torch._ops.OpOverload`` objects (``torch.ops.aten.add.Tensor``), an
            ``OpOverloadPacket`` (every overload of it), a Python callable that appears as an FX
            ``call_function`` target (``operator.mul``, ``torch.ops.higher_order.scan``), or the
            qualified name ``"namespace::op.overload"`` of an overload a library defines when it is
            imported (``"transformers::grouped_mm_fallback.default"``): onnxport does not import it.
        opset: ``(min, max)`` ONNX opsets the translation serves (inclusive; None for open).
    """
    return _register(_BUILTIN, targets, opset)


def user_translates(*targets: Any, opset: tuple | None = None) -> Callable[[Callable], Callable]:
    """``onnxport.translates``: register your own translation of each target; it wins over the
    built-in one for the same overload and opset, whenever either was registered. Arguments as
    ``translates``."""
    return _register(_USER, targets, opset)


def during_capture(factory: Callable[[], Any]) -> Callable[[], Any]:
    """Decorator registering ``factory() -> context manager`` entered around torch.export and
    decomposition (``Registry.capture_hooks``). An op family uses it to keep an ATen op whole in the
    graph when torch's own decomposition of it would not stay symbolic (lstm unrolled over time)."""
    _CAPTURE_HOOKS.append(factory)
    return factory


def _load() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from onnxport.translate import ops  # noqa: F401  (registers every family)


def builtin_translations(target: Any) -> list[Translation]:
    """The built-in translations of ``target`` registered so far, the latest first (for an op family
    that extends them, as the complex-number translations do, keeping each one's opset range)."""
    return list(_BUILTIN.get(target, []))


class Registry:
    """The translations one export uses: user translations first, then the built-in ones, each for
    the export's opset; and the op families' capture hooks."""

    def __init__(self, opset: int):
        _load()
        self.opset = opset
        self._cache: dict[Any, Callable | None] = {}

    def lookup(self, target: Any) -> Callable | None:
        """The translation of ``target`` for this opset, or None (no translation: decomposed)."""
        try:
            return self._cache[target]
        except (KeyError, TypeError):
            pass
        fn = None
        keys = [target]
        if isinstance(target, torch._ops.OpOverload):
            keys.append(f"{target._name}.{target._overloadname}")
        for table in (_USER, _BUILTIN):
            found = next((t for key in keys for t in table.get(key, []) if t.serves(self.opset)), None)
            if found is not None:
                fn = found.fn
                break
        try:
            self._cache[target] = fn
        except TypeError:
            pass
        return fn

    @contextlib.contextmanager
    def capture_hooks(self) -> Iterator[None]:
        """Enter every ``during_capture`` context manager of the op families."""
        with contextlib.ExitStack() as stack:
            for factory in _CAPTURE_HOOKS:
                stack.enter_context(factory())
            yield


class override:
    """Context manager replacing translations for the exports made inside it:
    ``with override({aten.relu.default: fn}):`` (``None`` as the translation: decompose the op)."""

    def __init__(self, mapping: dict[Any, Callable | None]):
        self.mapping = mapping

    def __enter__(self):
        for k, v in self.mapping.items():
            _USER.setdefault(k, []).insert(0, Translation(v))
        return self

    def __exit__(self, *exc):
        for k in self.mapping:
            entries = _USER.get(k, [])
            if entries:
                entries.pop(0)
            if not entries:
                _USER.pop(k, None)
        return False
