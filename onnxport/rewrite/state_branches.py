"""Branches on a model's state tensors: a counter or a flag given as a one-element tensor.

Streaming models pass their state between calls as tensors and branch on it: ESPnet's contextual-block
encoders test ``if n_processed_blocks == 0:``, a decoder ``if first:`` chooses between a cache made
of zeros and the cache it is given. The condition is data-dependent: torch.export cannot decide it,
and ``branches.run_cond`` keeps both sides as ``torch.cond`` (ONNX ``If``). What is particular to
such a branch, beside the rewrite of ``branches``:

* a state input is a one-element bool or integer tensor (``is_state``);
* the eager check of the rewritten copy (``check.check_equivalent``) runs it with each state input
  changed (``state_variants``: a flag negated, a counter set to 0, or to 1 where it was 0), so that
  both sides of the branch are compared with the original, and records the sides each rewritten
  ``if`` took (``sides_taken``), said on its note;
* where ``torch.cond`` cannot hold the branch because its sides return values of different shapes,
  dtypes or structures, ``differing_sides`` says which, for the refusal naming the user's line.

Semantics: PyTorch ``torch.cond`` (both sides return the same structure of tensors with the same
shapes and dtypes); Python's truth of a one-element tensor (``bool(t)`` is ``t.item() != 0``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
import torch.utils._pytree as pytree

_SEEN: dict[str, set[bool]] | None = None
_MAX_VARIANTS = 8


@contextlib.contextmanager
def sides_taken() -> Iterator[dict[str, set[bool]]]:
    """While active, each rewritten ``if`` run in eager mode records the side it takes: ``where`` (its
    ``file:line in function``) -> {True, False} seen."""
    global _SEEN
    before, _SEEN = _SEEN, {}
    try:
        yield _SEEN
    finally:
        _SEEN = before


def record(where: str, pred: Any) -> None:
    """Record the side a rewritten ``if`` at ``where`` takes in eager mode on ``pred`` (a one-element
    tensor, or a Python value: ``t.item() > 0`` is a bool in eager mode)."""
    if _SEEN is not None and where and (not isinstance(pred, torch.Tensor) or pred.numel() == 1):
        _SEEN.setdefault(where, set()).add(bool(pred))


def is_state(t: Any) -> bool:
    """Whether ``t`` is a state input: a one-element tensor of dtype bool or integer (any shape: ``[]``,
    ``[1]``, ``[1, 1]``), a flag or a counter the model may branch on. Floating and complex tensors,
    tensors of other sizes and non-tensors are not."""
    return isinstance(t, torch.Tensor) and t.numel() == 1 and (t.dtype == torch.bool or not (
        t.is_floating_point() or t.is_complex()))


def _other(t: torch.Tensor) -> torch.Tensor:
    """``t`` with its other truth value: a flag negated, a counter 0 (1 where it was 0)."""
    if t.dtype == torch.bool:
        return torch.logical_not(t)
    return torch.zeros_like(t) if bool(t.reshape(()) != 0) else torch.ones_like(t)


def state_variants(args: tuple, kwargs: dict) -> Iterator[tuple[str, tuple, dict]]:
    """The example inputs with one state input (a one-element bool or integer tensor) given its other
    truth value, one set per such input (at most 8): ``(label, args, kwargs)``."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    states = [k for k, t in enumerate(leaves) if is_state(t)][:_MAX_VARIANTS]
    for k in states:
        changed = list(leaves)
        changed[k] = _other(leaves[k])
        a, kw = pytree.tree_unflatten(changed, spec)
        yield f"example inputs with input {k} ({leaves[k].tolist()}) set to {changed[k].tolist()}", a, kw


def said(where: str, seen: dict[str, set[bool]]) -> str | None:
    """What the eager check ran of the ``if`` at ``where``, or None where it did not run it."""
    sides = seen.get(where)
    if not sides:
        return None
    if len(sides) == 2:
        return "both sides checked in eager mode"
    side = "the if" if True in sides else "the else"
    return f"only {side} side ran on the check inputs"


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(d) for d in t.shape) + "]"


def _same_size(a: Any, b: Any) -> bool:
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b) or statically_known_true(a == b)


def differing_sides(then_fn: Callable[[], Any], else_fn: Callable[[], Any], names: tuple = ()) -> str | None:
    """How the two sides' outputs differ in a way ``torch.cond`` cannot hold (structure, a non-tensor,
    dtype, rank, shape), or None when no such difference is found or a side fails; ``names``: the
    names the ``if`` binds, one per output. Runs both sides on the fake tensors of the trace without
    recording them into the program (called once ``torch.cond`` has failed, to say why)."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    try:
        with disable_proxy_modes_tracing():
            a, b = then_fn(), else_fn()
    except Exception:
        return None
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):  # the values an if binds
        for k, (x, y) in enumerate(zip(a, b)):
            which = repr(names[k]) if len(names) == len(a) else f"output {k}" if len(a) > 1 else "the output"
            why = _differ(x, y, which)
            if why:
                return why
        return None
    return _differ(a, b, "the output")


def _differ(a: Any, b: Any, which: str) -> str | None:
    (xs, a_spec), (ys, b_spec) = pytree.tree_flatten(a), pytree.tree_flatten(b)
    if a_spec != b_spec:
        return f"{which} as {_kind(a)} and as {_kind(b)}"
    for x, y in zip(xs, ys):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            kinds = _kind(x) if _kind(x) == _kind(y) else f"{_kind(x)} and as {_kind(y)}"
            return f"{which} as {kinds} on the sides (torch.cond returns tensors only)"
        if x.dtype != y.dtype:
            return f"{which} as {x.dtype} and as {y.dtype}"
        if x.dim() != y.dim() or not all(_same_size(p, q) for p, q in zip(x.shape, y.shape)):
            return f"{which} of shape {_shape(x)} and of shape {_shape(y)}"
    return None


def _kind(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return "a tensor"
    if isinstance(v, (tuple, list, dict)):
        return f"a {type(v).__name__} of {len(v)}"
    return f"a Python {type(v).__name__}"


def unbacked_read(*fns: Callable[[], Any]) -> str | None:
    """The name a side reads that holds a number taken from a tensor while tracing (``n =
    counter.item()``, an unbacked SymInt: ``torch.cond`` cannot take one into a side), or None."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for fn in fns:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not bound yet
                continue
            if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) and free_unbacked_symbols(value):
                return f"a side reads {name!r}, a number from a tensor's data (.item())"
    return None


def why_not_cond(pred: Any, then_fn: Callable[[], Any], else_fn: Callable[[], Any], names: tuple = ()) -> str | None:
    """Why ``torch.cond`` failed on a branch whose condition ``pred`` is read from the data (a tensor,
    or a SymBool of a number read from one): ``unbacked_read`` or ``differing_sides``; None for a
    condition on sizes only, or where neither is found."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    if not (isinstance(pred, torch.Tensor) or free_unbacked_symbols(pred)):
        return None
    return unbacked_read(then_fn, else_fn) or differing_sides(then_fn, else_fn, names)
