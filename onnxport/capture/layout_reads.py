"""A read of a memory layout after a branch followed as layout-only tells its sides apart: noticed while tracing.

A branch whose sides differ only by memory layout (``if x.shape[0] >= 64: x = x.contiguous()``) is
followed with no guard where one side copies only after the source of the function holding it shows no
change in place and no layout read (``capture.layout_branches``), and the control-flow rewrite runs such a
side at every size under the same check (``rewrite.size_branches``). Code elsewhere may still read the
layout later: the caller asks ``y.is_contiguous()`` or ``y.stride()`` of the result, a helper called after
the branch does. Eager PyTorch then computes from the side it took beyond the values, which the export,
following one side, would not hold at the other's sizes.

While the capture records guards (``guards.record.RECORD_GUARDS`` installs ``changes``), each branch so
followed is watched (``follow``) until the trace ends, and the ``torch.Tensor`` methods whose result
depends on the memory layout (``READS``: ``is_contiguous``, ``stride``, ``storage_offset``, ``data_ptr``,
``untyped_storage``, ``storage``, ``is_set_to``, ``as_strided``, as this torch has them) and the ``_base``
property notice a call from code outside torch and onnxport (the model's, a library's) once a branch is
watched. Every branch watched then is told apart (``Followed.read``, the user's line of the read),
and its ``fallback`` runs: a branch followed with no guard has its condition evaluated as torch would
have without the rule, in the same trace (its guard, refusal or rewrite, recorded at the branch's line); a
side the rewrite runs at every size is refused once traced (``guards.events``). Each call of those methods,
torch's own included, costs one more Python call and the test of a list (about 0.25 us: some 116,000 calls
over the tiny UNet's export, about 30 ms); no other operation is touched.

``view`` is not a read here: it computes no value from the layout (where eager PyTorch takes it, it gives
``reshape``'s values; a layout it cannot view raises instead). Code dynamo traces (the sides of
``torch.cond``) is evaluated by it, not run: a read there is noticed where dynamo answers it
(``TensorVariable.call_method`` / ``var_getattr``), at the line of the code it evaluates.

Semantics: ``torch.Tensor.is_contiguous``, ``stride``, ``storage_offset``, ``data_ptr``, ``untyped_storage``,
``_base`` (PyTorch's tensor documentation) report the layout or the storage, which a copy changes and the
values do not.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any, Callable

import torch

from onnxport.capture.patches import SetAttribute
from onnxport.errors import frame_line, is_internal_frame, is_internal_path

# methods of torch.Tensor whose result depends on the memory layout or the storage, not on the values alone
READS = ("is_contiguous", "stride", "storage_offset", "data_ptr", "untyped_storage", "storage", "_typed_storage",
         "is_set_to", "as_strided", "is_non_overlapping_and_dense")


@dataclasses.dataclass
class Followed:
    """A branch the trace follows though a layout read after it would tell its sides apart.

    ``where``: its user's line; ``fallback``: what to do once told apart (called at once, in the trace);
    ``read``: the user's line of the read that told it apart, once one did."""

    where: str | None
    fallback: Callable[[], Any]
    read: str | None = None


# the branches of the trace running now followed as layout-only and not yet told apart (None: no capture watches)
_WATCHED: list[Followed] | None = None


def follow(where: str | None, fallback: Callable[[], Any]) -> Followed | None:
    """Watch the branch at the user's line ``where`` until the trace ends: ``fallback`` is called where a layout
    read from the user's code follows. None where no capture watches now (``changes`` not installed): the
    branch must not be followed."""
    if _WATCHED is None:
        return None
    followed = Followed(where, fallback)
    _WATCHED.append(followed)
    return followed


def changes(watched: list) -> list:
    """The changes of the capture's guard recorder that watch followed branches (``watched``: a new list for
    each trace) and notice layout reads."""
    out = [SetAttribute(sys.modules[__name__], "_WATCHED", lambda _: watched)]
    out += [SetAttribute(torch.Tensor, name, _noticing) for name in READS if hasattr(torch.Tensor, name)]
    out.append(SetAttribute(torch.Tensor, "_base", _noticing_property))
    try:
        from torch._dynamo.trace_rules import get_tensor_method
        from torch._dynamo.variables.tensor import TensorVariable
    except ImportError:  # no dynamo: no code is traced by it
        return out
    get_tensor_method()  # dynamo's table of torch's own methods, made once a process: made of them, not of these
    # an attribute read is var_getattr in torch 2.13, tp_getattro_impl in torch 2.15
    return out + [SetAttribute(TensorVariable, name, _noticing_traced)
                  for name in ("call_method", "var_getattr", "tp_getattro_impl") if name in vars(TensorVariable)]


def _noticing(original: Callable) -> Callable:
    def read(self, *args, **kwargs):
        if _WATCHED:
            _noticed()
        return original(self, *args, **kwargs)

    return functools.wraps(original)(read)


def _noticing_property(original: Any) -> property:
    def get(self):
        if _WATCHED:
            _noticed()
        return original.__get__(self)

    return property(get, doc=getattr(original, "__doc__", None))


def _noticed() -> None:
    """A layout method called while branches are watched, by the code of the frame calling it."""
    if torch.compiler.is_dynamo_compiling():  # dynamo evaluates the code: ``_noticing_traced`` sees the read
        return
    caller = sys._getframe(2)
    if not is_internal_frame(caller):  # the model's or a library's code, compiled from a file or a string
        _told_apart(frame_line(caller))


def _noticing_traced(original: Callable) -> Callable:
    """dynamo's ``TensorVariable.call_method`` / ``var_getattr`` (``tp_getattro_impl``): a layout method or
    ``_base`` of a tensor in code dynamo traces (the sides of ``torch.cond``), which dynamo answers from the
    traced tensor's layout."""

    def traced(self, tx, name, *args, **kwargs):
        if _WATCHED and (name in READS or name == "_base"):
            try:
                code, line = tx.f_code, tx.lineno
            except AttributeError:  # where dynamo's frame cannot be read, the read still counts
                code, line = None, None
            if code is None or not _internal(code.co_filename):
                _told_apart("code dynamo traces" if code is None else f"{code.co_filename}:{line} in {code.co_name}")
        return original(self, tx, name, *args, **kwargs)

    return traced


@functools.lru_cache(maxsize=1024)
def _internal(path: str) -> bool:
    return is_internal_path(path)


def _told_apart(read: str) -> None:
    """A layout read at the user's line ``read``: every branch watched falls back (``Followed.fallback``)."""
    told = list(_WATCHED or ())
    if _WATCHED:
        _WATCHED.clear()  # before the fallbacks, which evaluate conditions on sizes
    for followed in told:
        followed.read = read
        followed.fallback()
