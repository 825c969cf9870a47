"""Data-dependent sizes that are equal because the same computation produced them.

torch gives every data-dependent size a new symbol (``u0``, ``u1``...): ``scores[keep]``, ``labels[keep]``
and ``boxes[keep]`` with ``keep = scores > threshold`` computed three times (transformers'
``post_process_object_detection``) have three counts, which torch cannot tell equal. The count of a
boolean mask's true elements (``nonzero``, indexing with one boolean mask) depends on the mask only,
so two counts are equal when their masks are the same computation: the same node, or the same op on
the same inputs, recursively down to the program's inputs, weights and constants, each tensor read at
the same version (no in-place change of it or of a view of it between the two reads). A node drawing
random numbers (``torch.Tag.nondeterministic_seeded``) or changing a tensor in place equals only itself.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch

COUNT_OPS = ("aten.nonzero.default", "aten.index.Tensor", "aten._unsafe_index.Tensor")


def equal_counts(graph: torch.fx.Graph) -> dict[sympy.Symbol, sympy.Symbol]:
    """Every data-dependent symbol defined in ``graph`` as the true count of a boolean mask, mapped to
    the first symbol counting the same mask (itself when it is the first); symbols of other origins
    are absent. Control-flow bodies are not searched."""
    keys = _Keys(graph)
    first: dict[Any, sympy.Symbol] = {}
    out: dict[sympy.Symbol, sympy.Symbol] = {}
    for node in graph.nodes:
        symbol = _counted(node)
        if symbol is None or symbol in out:
            continue
        mask = _mask(node)
        if mask is not None:
            out[symbol] = first.setdefault(keys.of(mask), symbol)
    return out


def _counted(node: torch.fx.Node) -> sympy.Symbol | None:
    """The new data-dependent symbol ``node`` (a count op) defines as its first axis, or None."""
    if node.op != "call_function" or str(node.target) not in COUNT_OPS:
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() == 0:
        return None
    size = val.shape[0]
    expr = size.node.expr if isinstance(size, torch.SymInt) else None
    return expr if isinstance(expr, sympy.Symbol) and expr.name.startswith("u") else None


def _mask(node: torch.fx.Node) -> torch.fx.Node | None:
    """The boolean mask whose true elements ``node`` counts along its first axis: ``nonzero(mask)``, or
    ``x[mask]`` indexing with that one mask on x's first axis (None for anything else)."""
    if str(node.target) == "aten.nonzero.default":
        mask = node.args[0]
        return mask if _is_bool(mask) else None
    indices = node.args[1] if len(node.args) > 1 else None
    if not isinstance(indices, (list, tuple)) or len(indices) != 1 or not _is_bool(indices[0]):
        return None
    return indices[0]


def _is_bool(node: Any) -> bool:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and val.dtype == torch.bool


class _Keys:
    """Descriptions of the values a graph's nodes compute, as small integers: equal for the same op on
    equal inputs (a node reading a tensor changed in place reads it at its version: the number of
    in-place changes of the tensor and its views before the node); a node whose computation is not
    described so (a random op, an in-place op, an argument of an unknown kind) is described as itself,
    equal to nothing but itself. Computed in one pass in graph order, each description made of its
    inputs' numbers (so comparing two is as cheap as comparing their arguments)."""

    def __init__(self, graph: torch.fx.Graph):
        self.ids: dict[Any, int] = {}
        self.keys: dict[torch.fx.Node, int] = {}
        root: dict[torch.fx.Node, torch.fx.Node] = {}  # a view or in-place result -> the tensor it aliases
        versions: dict[torch.fx.Node, int] = {}
        for node in graph.nodes:
            reads = {a: versions.get(root.get(a, a), 0) for a in node.all_input_nodes}
            self.keys[node] = self._describe(node, reads)
            base = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
            if base is not None and (_aliases(node.target) or _mutates(node.target)):
                root[node] = root.get(base, base)
            if _mutates(node.target) and base is not None:
                versions[root.get(base, base)] = versions.get(root.get(base, base), 0) + 1

    def of(self, node: torch.fx.Node) -> int:
        return self.keys[node]

    def _number(self, key: Any) -> int:
        return self.ids.setdefault(key, len(self.ids))

    def _describe(self, node: torch.fx.Node, reads: dict) -> int:
        if node.op in ("placeholder", "get_attr"):
            return self._number((node.op, str(node.target)))
        if node.op == "call_function" and not _seeded(node.target) and not _mutates(node.target):
            parts = [self._arg(a, reads) for a in node.args] + [(k, self._arg(v, reads)) for k, v in
                                                                 sorted(node.kwargs.items())]
            if not any(p is None or (isinstance(p, tuple) and len(p) == 2 and p[1] is None) for p in parts):
                return self._number((str(node.target), tuple(parts)))
        return self._number(("node", node.name))

    def _arg(self, arg: Any, reads: dict) -> Any:
        """The description of an argument: a node's number with the version it is read at, a list
        element by element, a constant by its type and value (None for another kind)."""
        if isinstance(arg, torch.fx.Node):
            return (self.keys[arg], reads.get(arg, 0))
        if isinstance(arg, (list, tuple)):
            parts = tuple(self._arg(a, reads) for a in arg)
            return None if None in parts else ("seq", parts)
        if arg is None or isinstance(arg, (bool, int, float, str, slice, torch.dtype, torch.device, torch.layout,
                                           torch.memory_format)):
            return ("const", type(arg).__name__, repr(arg))
        return None


def _aliases(target: Any) -> bool:
    """Whether ``target`` returns a view of its first argument (``view``, ``select``, ``transpose``...)."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    returns = target._schema.returns
    return bool(returns) and returns[0].alias_info is not None


def _mutates(target: Any) -> bool:
    return isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable


def _seeded(target: Any) -> bool:
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags
