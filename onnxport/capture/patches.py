"""The one registry of capture-time patches: every change onnxport makes to torch, transformers or
the user's module while a model is traced, each with the change that undoes it.

A ``Patch`` is a named unit of change ("keep the recurrent ops whole", "math on sizes stays
symbolic"); it is made of ``Change``s, each of which knows its site and how to undo itself:

* ``SetAttribute(owner, name, make)``: ``owner.name = make(original)`` (a module's function, a
  class's method, an instance's ``forward``, a module's global that shadows a builtin such as
  ``len``, the builtin being the original); an attribute the owner inherited is deleted again;
* ``SetKernel(op, fn)``: ``fn`` as the op's CompositeImplicitAutograd and Autograd Python kernels
  (consulted by torch's Python dispatcher while tracing only);
* ``SetCode(fn, replacement)``: every reference to ``fn`` calls ``replacement`` (names imported
  with ``from module import fn`` included);
* ``SetConfig(config, key, value)``: one of torch's config flags;
* ``Enter(factory)``: a context manager (the user's ``capture_hooks``, which onnxport cannot see
  inside).

A patch is defined once, at import, with ``register(Patch(...))``, and installed with
``install(patch, *args) -> Handle`` (``Handle.restore()`` undoes it) or, for a block,
``with installed(patch, other.using(arg), ...)``. ``install`` refuses a patch that is not
registered, so ``REGISTRY`` lists every site onnxport changes (``patch_sites()``), and
``restore_leftovers()`` undoes every change still installed (a capture interrupted where no
``finally`` could run).

Registration is the wiring: a patch that every torch.export call should install says when and
where in the sequence, and nothing lists it by hand (``capture/tracing.py`` installs
``every_trace(...)``):

* ``when=``: a function of the trace about to run (``capture.tracing.TraceContext``: the capture
  state, its request, the trace's record lists, the held output) returning None or False (not
  this trace), True (install it), or a tuple (install ``patch.using(*tuple)``: the list its events
  go to, the user's module). ``always`` installs it in every trace; ``capture.tracing.translating``
  in every trace of an export that translates and in the whole-program decomposition (the
  translations' patches: an ATen op kept whole). A patch without ``when`` is installed only where
  code asks for it (a capture step adds it to ``CaptureState.patches``, verification, a test).
* ``order=``: its place, an int, lower first (ties: the order of registration). The scale:
  0-9 the trace's own records (what torch prints held: 0; specializations, guards, unbacked
  sizes); 10-19 torch's symbolic forms the rest relies on; 20-29 the translations' patches
  (``TRANSLATIONS`` for a family's own); ``USER_HOOKS`` (30) the user's ``capture_hooks``; from
  100 on every other patch, core or library, a new one after the last (the steps' patches follow
  them all).

A module of ``onnxport/library/`` holds what one library or model family needs: it registers its
patches this way and is loaded with onnxport (``onnxport/library/__init__.py`` walks the package).

torch.export is not thread-safe and these patches change torch for the whole process: every patch
is installed under ``CAPTURE_LOCK`` (re-entrant; ``to_onnx`` holds it for a whole export, so a
second thread waits), and a replacement never wraps a replacement: an attribute still holding an
onnxport replacement is patched (and restored) as the function underneath.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import threading
import types
from typing import Any, Callable, Iterable, Iterator

CAPTURE_LOCK = threading.RLock()
_ORIGINAL = "__onnxport_original__"
_MISSING = object()


def original_of(value: Any) -> Any:
    """The function an onnxport replacement replaced (``value`` itself when it is not one)."""
    while hasattr(value, _ORIGINAL):
        value = getattr(value, _ORIGINAL)
    return value


@contextlib.contextmanager
def exclusive_capture() -> Iterator[None]:
    """Hold ``CAPTURE_LOCK``: one export (capture and the steps after it) at a time in this process."""
    with CAPTURE_LOCK:
        yield


# ------------------------------------------------------------------------------ changes
@dataclasses.dataclass(frozen=True)
class SetAttribute:
    """``owner.name = make(original)``; undone by putting the original back (deleting the attribute
    when the owner inherited it). A module without the attribute whose code calls the builtin of that
    name (``len``) gets a global shadowing the builtin, which is then the original."""

    owner: Any
    name: str
    make: Callable[[Any], Any]

    @property
    def site(self) -> tuple[Any, str]:
        return self.owner, self.name

    def apply(self) -> Callable[..., Any]:
        owner, name = self.owner, self.name
        own = vars(owner).get(name, _MISSING) if hasattr(owner, "__dict__") else getattr(owner, name)
        current = getattr(owner, name, _MISSING)
        if current is _MISSING and isinstance(owner, types.ModuleType) and hasattr(builtins, name):
            current = getattr(builtins, name)
        original = original_of(current if current is not _MISSING else getattr(owner, name))
        replacement = self.make(original)
        if callable(replacement):  # a function carries the mark (a builtin cannot; a stream need not)
            with contextlib.suppress(AttributeError, TypeError):
                setattr(replacement, _ORIGINAL, original)
        setattr(owner, name, replacement)

        def undo(*_: Any) -> None:
            if own is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, original_of(own))

        return undo


@dataclasses.dataclass(frozen=True)
class SetKernel:
    """``fn`` as ``op``'s CompositeImplicitAutograd and Autograd Python kernels. torch's Python
    dispatcher consults them only while tracing: eager execution is unchanged."""

    op: Any
    fn: Callable

    @property
    def site(self) -> tuple[Any, str]:
        return self.op, "py_kernels"

    def apply(self) -> Callable[..., Any]:
        from torch._C import DispatchKey

        op, saved = self.op, dict(self.op.py_kernels)
        op.py_kernels[DispatchKey.CompositeImplicitAutograd] = self.fn
        op.py_kernels[DispatchKey.Autograd] = self.fn
        op._dispatch_cache.clear()

        def undo(*_: Any) -> None:
            op.py_kernels.clear()
            op.py_kernels.update(saved)
            op._dispatch_cache.clear()

        return undo


@dataclasses.dataclass(frozen=True)
class SetCode:
    """Every reference to ``fn`` calls ``replacement``: ``fn.__code__`` becomes a trampoline (so a
    name imported with ``from module import fn`` is redirected too)."""

    fn: Callable
    replacement: Callable

    @property
    def site(self) -> tuple[Any, str]:
        return self.fn, "__code__"

    def apply(self) -> Callable[..., Any]:
        fn, key = self.fn, f"__onnxport_{self.fn.__name__}"
        namespace: dict = {}
        exec(f"def trampoline(*args, **kwargs):\n    return {key}(*args, **kwargs)", namespace)  # noqa: S102
        saved = fn.__code__
        fn.__globals__[key] = self.replacement
        fn.__code__ = namespace["trampoline"].__code__

        def undo(*_: Any) -> None:
            fn.__code__ = saved
            fn.__globals__.pop(key, None)

        return undo


@dataclasses.dataclass(frozen=True)
class SetConfig:
    """One of torch's config flags (``torch.fx.experimental._config.backed_size_oblivious``)."""

    config: Any
    key: str
    value: Any

    @property
    def site(self) -> tuple[Any, str]:
        return self.config, self.key

    def apply(self) -> Callable[..., Any]:
        config, key, saved = self.config, self.key, getattr(self.config, self.key)
        setattr(config, key, self.value)
        return lambda *_: setattr(config, key, saved)


@dataclasses.dataclass(frozen=True)
class Enter:
    """A context manager entered while the patch is installed (the user's ``capture_hooks``)."""

    factory: Callable[[], contextlib.AbstractContextManager]

    @property
    def site(self) -> tuple[Any, str]:
        return self.factory, "__call__"

    def apply(self) -> Callable[..., Any]:
        manager = self.factory()
        manager.__enter__()
        return manager.__exit__


Change = SetAttribute | SetKernel | SetCode | SetConfig | Enter


# ------------------------------------------------------------------------------ patches
@dataclasses.dataclass(frozen=True, eq=False)
class Patch:
    """A named unit of change made while a model is traced.

    ``changes(*args)`` builds the changes when the patch is installed (``args``: what one capture
    passes, e.g. the list its events are recorded in); ``sample`` are arguments that build them
    for listing the sites (None: the sites depend on the capture, e.g. the user's module);
    ``when`` and ``order``: which traces install it, and where among their patches.
    """

    name: str
    changes: Callable[..., Iterable[Change]]
    doc: str = ""
    sample: tuple | None = ()
    when: Callable[[Any], Any] | None = None  # every trace installs it where this applies (see the module doc)
    order: int | None = None  # its place among the patches of a trace (lower first)

    def using(self, *args: Any) -> tuple["Patch", tuple]:
        """``(self, args)``, for ``installed``."""
        return self, args

    def sites(self) -> list[tuple[Any, str]]:
        """``(owner, attribute)`` of every change (empty when they depend on the capture)."""
        return [] if self.sample is None else [c.site for c in self.changes(*self.sample)]


REGISTRY: dict[str, Patch] = {}


def register(patch: Patch) -> Patch:
    """Add ``patch`` to the registry (at import of the module defining it); returns it.

    Raises:
        ValueError: another patch of that name is registered, or the patch has ``when`` and no ``order``.
    """
    if patch.when is not None and patch.order is None:
        raise ValueError(f"capture patch {patch.name!r} says when a trace installs it (when=), not where (order=)")
    with CAPTURE_LOCK:
        if patch.name in REGISTRY and REGISTRY[patch.name] is not patch:
            raise ValueError(f"a capture patch named {patch.name!r} is already registered")
        REGISTRY[patch.name] = patch
    return patch


TRANSLATIONS = 25  # the order of a translation family's own patch (``when=translating``)
USER_HOOKS = 30  # the place of the user's capture_hooks among a trace's patches


def always(trace: Any) -> bool:
    """``when`` of a patch every trace installs."""
    return True


def every_trace(trace: Any, placed: Iterable[tuple[int, Iterable[Patch]]] = ()) -> list[tuple[Patch, tuple]]:
    """``(patch, args)`` of each registered patch whose ``when(trace)`` applies, with the arguments it
    gave, and of each patch of ``placed`` (``(order, patches)``: the user's hooks at ``USER_HOOKS``),
    sorted by ``order``; at one order, registered patches first, each group in its own order."""
    entries = []
    for i, patch in enumerate(list(REGISTRY.values())):
        given = patch.when(trace) if patch.when is not None else None
        if given is None or given is False:
            continue
        entries.append(((patch.order, 0, i), (patch, () if given is True else tuple(given))))
    for order, patches in placed:
        entries += [((order, 1, j), (patch, ())) for j, patch in enumerate(patches)]
    return [item for _, item in sorted(entries, key=lambda e: e[0])]


def user_hooks(factory: Callable[[], contextlib.AbstractContextManager]) -> Patch:
    """The user's ``capture_hooks`` as a patch (not registered: onnxport cannot see its sites)."""
    return Patch(f"capture_hooks {getattr(factory, '__qualname__', factory)!r}", lambda: [Enter(factory)],
                 "the user's capture_hooks", None)


class Handle:
    """One installed patch; ``restore()`` undoes its changes (once, in reverse order)."""

    def __init__(self, patch: Patch, undo: list[Callable[..., Any]]):
        self.patch, self._undo = patch, undo

    @property
    def active(self) -> bool:
        return self in _ACTIVE

    def restore(self, *exc: Any) -> bool:
        """Undo the changes; ``exc`` (type, value, traceback) goes to an ``Enter`` change's exit,
        whose true result suppresses the exception, as a ``with`` block would."""
        suppressed = False
        with CAPTURE_LOCK:
            if self not in _ACTIVE:
                return False
            _ACTIVE.remove(self)
            for undo in reversed(self._undo):
                suppressed = bool(undo(*(exc or (None, None, None)))) or suppressed
        return suppressed


_ACTIVE: list[Handle] = []


def install(patch: Patch, *args: Any) -> Handle:
    """Apply ``patch`` (under ``CAPTURE_LOCK``) and return its ``Handle``; a change that fails
    undoes the ones made before it.

    Raises:
        ValueError: the patch is not registered (``register``) nor the user's hooks.
    """
    if REGISTRY.get(patch.name) is not patch and patch.sample is not None:
        raise ValueError(f"capture patch {patch.name!r} is not registered: define it with register(Patch(...))")
    with CAPTURE_LOCK:
        undo: list = []
        try:
            for change in patch.changes(*args):
                undo.append(change.apply())
        except BaseException:
            for u in reversed(undo):
                u(None, None, None)
            raise
        handle = Handle(patch, undo)
        _ACTIVE.append(handle)
        return handle


@contextlib.contextmanager
def installed(*patches: Patch | tuple[Patch, tuple]) -> Iterator[list[Handle]]:
    """Install each patch (or ``patch.using(*args)``) in order while the block runs, under
    ``CAPTURE_LOCK``; each is restored, in reverse order, whatever ends the block."""
    with CAPTURE_LOCK, contextlib.ExitStack() as stack:
        handles = []
        for item in patches:
            patch, args = item if isinstance(item, tuple) else (item, ())
            handle = install(patch, *args)
            stack.push(handle.restore)
            handles.append(handle)
        yield handles


def restore_leftovers() -> list[str]:
    """Undo every patch still installed (a capture interrupted where no ``finally`` could run);
    returns their names."""
    with CAPTURE_LOCK:
        left = list(reversed(_ACTIVE))
        for handle in left:
            handle.restore()
    return [h.patch.name for h in left]


def patch_sites() -> list[tuple[Any, str]]:
    """``(owner, attribute)`` of every registered patch's changes (for tests and the docs)."""
    return [site for patch in list(REGISTRY.values()) for site in patch.sites()]
