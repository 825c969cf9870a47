"""In-place ATen overloads (``aten.relu_.default``, ``aten.add_.Tensor``, ``aten.silu_.default``) as
their functional form, the mutation made explicit.

torch.export's training IR keeps the in-place variants that ``nn.ReLU(inplace=True)``, ``x += y``
and friends call. Where the mutated tensor is an intermediate value that nothing else aliases,
``y = op_(x, ...)`` is ``y = op(x, ...)`` cast to ``x``'s dtype, and every later read of ``x`` reads
``y``: the translation of the functional overload serves, and no decomposition (which re-traces the
whole program) is needed. A write through ``select`` / ``slice`` views of such an intermediate
(``spatial_shapes[level, 0] = height``, ``grid[..., 0] /= width``: ``copy_`` / ``div_`` of a view) is
the functional op on the view's current value, written back into the intermediate by
``select_scatter`` / ``slice_scatter`` view by view (``mutates_view_locally``), when no other view of
it taken before the write is read after it. A mutation of a graph input or buffer, or any other, is
left to torch's functionalization (``capture.decompose``), which adds the ``<name>.updated`` outputs.

Semantics: PyTorch's in-place convention (``Tensor.op_`` writes ``op``'s result into ``self``,
keeping ``self``'s dtype and shape).
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch


def functional_of(target: Any) -> Any:
    """The functional overload of an in-place ATen overload (``aten.relu_.default`` ->
    ``aten.relu.default``), or None when ``target`` is not one or has none."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    schema = target._schema
    name = schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__") or not schema.arguments:
        return None
    first = schema.arguments[0]
    if first.alias_info is None or not first.alias_info.is_write:
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    overload = getattr(packet, target._overloadname, None) if packet is not None else None
    return overload if isinstance(overload, torch._ops.OpOverload) else None


def _aliases(node: torch.fx.Node) -> bool:
    """The node's result is a view of another tensor (its schema returns an alias)."""
    target = node.target
    if target is operator.getitem:
        return False
    if not isinstance(target, torch._ops.OpOverload):
        return True  # higher-order ops and the like: assumed to alias
    if target.overloadpacket is torch.ops.aten.to and node.args and isinstance(node.args[0], torch.fx.Node):
        before, after = node.args[0].meta.get("val"), node.meta.get("val")  # a cast copies
        if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and before.dtype != after.dtype:
            return False
    returns = target._schema.returns
    return bool(returns) and returns[0].alias_info is not None


def alias_chain(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The tensors an in-place op writes: its ``self``, and back through the in-place ops that
    produced it to the first tensor (``relu_(add_(x, y))`` writes ``add_`` and ``x``)."""
    chain = []
    current = node.args[0] if node.args else None
    while isinstance(current, torch.fx.Node):
        chain.append(current)
        if current.op == "call_function" and functional_of(current.target) is not None and current.args:
            current = current.args[0]
        else:
            break
    return chain


_DROPOUTS = ("dropout_", "feature_dropout_", "alpha_dropout_", "feature_alpha_dropout_")
_AUTOGRAD_ONLY = ("detach_",)  # changes what autograd records of the tensor, never its values


def writes_nothing(node: torch.fx.Node) -> bool:
    """An in-place op that leaves its tensor's values as they are: ``detach_`` (which
    ``torch.tensor(size)`` of a symbolic size records), dropout at inference (``train=False``) or
    with ``p=0``."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return False
    name = target._schema.name.split("::")[-1]
    if name in _AUTOGRAD_ONLY:
        return True
    if name not in _DROPOUTS:
        return False
    p, train = (list(node.args[1:3]) + [node.kwargs.get("p"), node.kwargs.get("train")])[:2]
    return train is False or p == 0


def mutates_locally(node: torch.fx.Node) -> bool:
    """``node`` is an in-place op whose mutated tensor is an intermediate value: produced by a
    non-view op (through other in-place ops), not a graph input or buffer, and not viewed by any
    other node; or one that writes nothing (``writes_nothing``)."""
    if functional_of(node.target) is None:
        return False
    if writes_nothing(node):
        return True
    chain = alias_chain(node)
    if not chain:
        return False
    base = chain[-1]
    if base.op != "call_function" or _aliases(base):
        return False
    for member in chain:
        for user in member.users:
            if user is node or user in chain or functional_of(user.target) is not None:
                continue
            if isinstance(user.target, torch._ops.OpOverload) and _aliases(user):
                return False
    return True


SCATTERS = {torch.ops.aten.select.int: torch.ops.aten.select_scatter.default,
            torch.ops.aten.slice.Tensor: torch.ops.aten.slice_scatter.default}
# views of the whole tensor (a slice over a whole dim is traced as ``alias``): a value written through
# one is the tensor's new value
WHOLE_VIEWS = frozenset({torch.ops.aten.alias.default})


def view_chain(node: torch.fx.Node) -> tuple[torch.fx.Node, list[torch.fx.Node]] | None:
    """For an in-place op writing through ``select`` / ``slice`` / whole ``alias`` views: the tensor viewed (produced by
    an op that is neither a view nor in-place) and the views from it to the op's ``self``, outermost
    first; None for anything else."""
    views = []
    current = node.args[0] if node.args else None
    while isinstance(current, torch.fx.Node) and current.op == "call_function" \
            and (current.target in SCATTERS or current.target in WHOLE_VIEWS):
        views.append(current)
        current = current.args[0]
    if not views or not isinstance(current, torch.fx.Node) or current.op != "call_function" \
            or _aliases(current) or functional_of(current.target) is not None:
        return None
    return current, views[::-1]


def mutates_view_locally(node: torch.fx.Node) -> bool:
    """``node`` is an in-place op writing through ``select`` / ``slice`` views of an intermediate value
    (``view_chain``), and no view of that value (or in-place result aliasing it) taken before ``node``
    is read after it other than by views and in-place ops (which take the value anew)."""
    if functional_of(node.target) is None or writes_nothing(node):
        return False
    chain = view_chain(node)
    if chain is None:
        return False
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    at = order[node]
    pending, seen = [chain[0]], set()
    while pending:
        current = pending.pop()
        for user in current.users:
            if user in seen or user is node:
                continue
            seen.add(user)
            aliasing = isinstance(user.target, torch._ops.OpOverload) and (
                _aliases(user) or functional_of(user.target) is not None) and user.args and user.args[0] is current
            if aliasing:
                pending.append(user)
            elif current is not chain[0] and order[current] < at < order[user]:
                return False  # reads a view taken before the write, after it
    return True


def translatable(node: torch.fx.Node, lookup: Callable[[Any], Any]) -> bool:
    """Whether ``node`` translates without decomposition: its overload has a translation, or it is
    an in-place op mutating an intermediate value (or views of one) whose functional overload has one."""
    if lookup(node.target) is not None:
        return True
    if mutates_locally(node):
        return lookup(functional_of(node.target)) is not None
    if mutates_view_locally(node):
        chain = view_chain(node)
        return lookup(functional_of(node.target)) is not None and all(
            lookup(v.target) is not None and (v.target in WHOLE_VIEWS or lookup(SCATTERS[v.target]) is not None)
            for v in chain[1])
    return False
