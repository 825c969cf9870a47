"""Translations of ATen overloads to ONNX: the built-in ones, the user's, and what one export uses.

A translation is a plain function ``fn(ctx, *args, **kwargs)`` taking the ATen overload's arguments
(FX nodes replaced by ``onnx_ir.Value``; SymInts by 0-d int64 values) and returning the ONNX value
(or a tuple/list of values for multi-output overloads). The op families register theirs with::

    @translates(aten.relu.default)
    def relu(ctx, x):
        return ctx.op.Relu(x)

    @translates(aten.rms_norm.default, opset=(23, None))   # only where the target opset allows
    def rms_norm_23(ctx, x, shape, weight=None, eps=None): ...

- **Built-in**: the families' ``@translates`` while ``translate.ops`` loads (the first time an
  export needs a translation); the table is frozen then. A family that needs a patch while
  torch.export traces (an op kept whole) registers it as every patch is registered,
  ``register(Patch(..., when=translating, order=...))`` (``capture.patches``, ``capture.tracing``).
- **User**: a ``Registry`` holds user translations, which win over the built-in ones for the same
  overload and opset: ``reg = onnxport.Registry(); @reg.translates(op) ...;
  to_onnx(..., registry=reg)``. ``@onnxport.translates`` registers into the default registry
  (``DEFAULT``), which exports use when given none. Registering an overload again for the same
  opsets warns (the new translation replaces the old).
- **One export**: ``Translations(opset, registry)``: the lookup for its opset (user first), which
  nodes translate as they are, and the patches capture installs (``capture.state.OpSupport``).

Registration and ``override`` hold the capture lock: an export running in another thread never
sees a table change halfway.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

import torch

from onnxport.capture.patches import CAPTURE_LOCK, REGISTRY, Patch
from onnxport.capture.tracing import translating


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


def _span(opset: tuple | None) -> tuple:
    return tuple(opset) if opset is not None else (None, None)


# ------------------------------------------------------------------------------ built-in
class _BuiltinTable:
    """The built-in translations, filled while ``translate.ops`` loads, then frozen (``freeze``):
    afterwards a read-only mapping."""

    def __init__(self) -> None:
        self.translations: Mapping[Any, tuple[Translation, ...]] | dict = {}
        self.frozen = False

    def add(self, target: Any, translation: Translation) -> None:
        if self.frozen:
            raise RuntimeError(f"the built-in translations are frozen: register {target} in an onnxport.Registry "
                               "(or with @onnxport.translates)")
        self.translations[target] = (translation, *self.translations.get(target, ()))  # the latest first

    def freeze(self) -> None:
        self.translations = MappingProxyType(dict(self.translations))
        self.frozen = True


_BUILTIN = _BuiltinTable()


def translates(*targets: Any, opset: tuple | None = None) -> Callable[[Callable], Callable]:
    """Decorator registering a built-in translation of each target (an op family's, while
    ``translate.ops`` loads).

    Args:
        targets: ``torch._ops.OpOverload`` objects (``torch.ops.aten.add.Tensor``), an
            ``OpOverloadPacket`` (every overload of it), a Python callable that appears as an FX
            ``call_function`` target (``operator.mul``, ``torch.ops.higher_order.scan``), or the
            qualified name ``"namespace::op.overload"`` of an overload a library defines when it is
            imported (``"torchvision::nms.default"``): onnxport does not import it.
        opset: ``(min, max)`` ONNX opsets the translation serves (inclusive; None for open).

    Raises:
        RuntimeError: the built-in table is already frozen.
    """
    span = _span(opset)

    def deco(fn: Callable) -> Callable:
        for t in _targets(targets):
            _BUILTIN.add(t, Translation(fn, span))
        return fn

    return deco


def _builtin() -> _BuiltinTable:
    """The built-in table, loaded (every op family imported) and frozen the first time."""
    with CAPTURE_LOCK:
        if not _BUILTIN.frozen:
            from onnxport.translate import ops  # noqa: F401  (registers every family)

            _BUILTIN.freeze()
    return _BUILTIN


def builtin_translations(target: Any) -> list[Translation]:
    """The built-in translations of ``target`` registered so far, the latest first (for an op family
    that extends them, as the complex-number translations do, keeping each one's opset range)."""
    return list(_BUILTIN.translations.get(target, ()))


# ------------------------------------------------------------------------------ user
class Registry:
    """User translations, which win over the built-in ones for the same overload and opset.

    ``registry.translates(op, opset=...)`` (decorator) or ``registry.register(op, fn, opset=...)``
    adds one; ``to_onnx(..., registry=registry)`` exports with them. Registering an overload again
    for the same opsets warns (``UserWarning``): the new translation replaces the old one.
    """

    def __init__(self) -> None:
        self._table: dict[Any, list[Translation]] = {}

    def register(self, target: Any, fn: Callable | None, *, opset: tuple | None = None) -> None:
        """Add ``fn`` as the translation of ``target`` (an overload, an ``OpOverloadPacket`` for
        every overload, an FX ``call_function`` target, or an overload's qualified name
        ``"namespace::op.overload"``, for an op a library defines when imported) for ``opset``
        (``(min, max)``, inclusive; None: every opset); ``fn=None`` decomposes the op instead."""
        span = _span(opset)
        with CAPTURE_LOCK:
            for t in _targets((target,)):
                entries = self._table.setdefault(t, [])
                same = [e for e in entries if e.opsets == span]
                if same:
                    warnings.warn(f"{t} already has a translation for opsets {span} in this registry "
                                  f"({getattr(same[0].fn, '__qualname__', same[0].fn)}); "
                                  f"{getattr(fn, '__qualname__', fn)} replaces it", UserWarning, stacklevel=3)
                    entries.remove(same[0])
                entries.insert(0, Translation(fn, span))

    def translates(self, *targets: Any, opset: tuple | None = None) -> Callable[[Callable], Callable]:
        """Decorator: ``register`` the function for each target (arguments as ``register``)."""

        def deco(fn: Callable) -> Callable:
            for t in targets:
                self.register(t, fn, opset=opset)
            return fn

        return deco

    def remove(self, target: Any) -> None:
        """Drop every translation of ``target`` (each overload of an ``OpOverloadPacket``)."""
        with CAPTURE_LOCK:
            for t in _targets((target,)):
                self._table.pop(t, None)

    def translations(self, target: Any) -> tuple[Translation, ...]:
        """The translations of ``target`` in this registry, the latest first."""
        return tuple(self._table.get(target, ()))

    @contextlib.contextmanager
    def override(self, mapping: dict[Any, Callable | None]) -> Iterator["Registry"]:
        """Replace translations for the exports made inside the block (``None``: decompose the op);
        holds the capture lock for the block, so exports in other threads wait and never see it."""
        with CAPTURE_LOCK:
            for k, v in mapping.items():
                self._table.setdefault(k, []).insert(0, Translation(v))
            try:
                yield self
            finally:
                for k in mapping:
                    entries = self._table.get(k, [])
                    if entries:
                        entries.pop(0)
                    if not entries:
                        self._table.pop(k, None)


DEFAULT = Registry()


def user_translates(*targets: Any, opset: tuple | None = None) -> Callable[[Callable], Callable]:
    """``onnxport.translates``: register your own translation of each target in the default
    registry (``DEFAULT``); it wins over the built-in one for the same overload and opset, whenever
    either was registered. Arguments as ``Registry.register``."""
    return DEFAULT.translates(*targets, opset=opset)


def override(mapping: dict[Any, Callable | None]) -> contextlib.AbstractContextManager:
    """``DEFAULT.override(mapping)``: translations replaced for the exports made inside the block
    (``with override({aten.relu.default: fn}):``; ``None`` as the translation: decompose the op)."""
    return DEFAULT.override(mapping)


# ------------------------------------------------------------------------------ one export
class Translations:
    """The translations one export uses: the registry's first, then the built-in ones, each for the
    export's opset; which nodes translate as they are; and the patches capture installs."""

    def __init__(self, opset: int, registry: Registry | None = None):
        self._builtin = _builtin()
        self.opset = opset
        self.registry = registry if registry is not None else DEFAULT
        self._cache: dict[Any, Callable | None] = {}

    @property
    def capture_patches(self) -> tuple[Patch, ...]:
        """The registered patches that come with the translations (``when=translating``), in their
        order: installed while torch.export traces and while the whole program is decomposed."""
        with CAPTURE_LOCK:
            patches = [p for p in REGISTRY.values() if p.when is translating]
        return tuple(sorted(patches, key=lambda p: p.order))

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
        for table in (self.registry.translations, lambda key: self._builtin.translations.get(key, ())):
            first = next((t for key in keys for t in table(key) if t.serves(self.opset)), None)
            if first is not None:
                fn = first.fn
                break
        try:
            self._cache[target] = fn
        except TypeError:
            pass
        return fn

    def translatable(self, node: Any) -> bool:
        """Whether ``node`` translates as it is (an in-place op the translation handles counts)."""
        from onnxport.translate.inplace import translatable

        return translatable(node, self.lookup)
