"""What observed calls say about each input axis: which vary (dynamic) and which stay (static), which
vary together (one dimension, one name), which is the sum of two others in every call (a relation),
and which call makes the best example.

Semantics: an axis is dynamic when the calls gave it more than one size; two dynamic axes are one
dimension when every call that gave both gave them the same size, and at least two sizes; a
dimension is ``a + b`` of two others when every call that gave all three says so, at least two
calls gave all three and the sum varies (``attention_mask``'s axis: ``past + seq``).
"""

from __future__ import annotations

import dataclasses
import itertools
import re

from onnxport.capture.caches import is_cache_leaf
from onnxport.observation.names import FALLBACK, LIKELY, Leaf, propose

Shapes = dict[str, tuple[str, tuple[int, ...]]]  # one call: flat input name -> (its key, its shape)


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the calls decided.

    Attributes:
        dims: flat input name -> {axis: dimension name}, for the dynamic axes of the example's tensors.
        relations: dimension name -> ``"a + b"`` over other dimension names (``to_onnx``'s ``relations``).
        sizes: dimension name -> its size in each call (None where the call had no such axis).
        example: the index of the call chosen as the example.
    """

    dims: dict[str, dict[int, str]]
    relations: dict[str, str]
    sizes: dict[str, tuple[int | None, ...]]
    example: int


def decide(calls: list[Shapes], candidates: list[int], config: dict[str, int]) -> Decision:
    """Decide the dynamic axes, their names and relations, and the example, from the tensor shapes
    of each call (``calls``); the example is one of ``candidates`` (indices of calls whose inputs
    were kept). ``config``: the model's channel and feature counts (``names.config_sizes``)."""
    groups, sizes = _dimensions(calls)
    example = _example(calls, candidates, sizes)
    present = [any(leaf.flat in calls[example] for leaf, _ in g) for g in groups]
    relations = _relations(sizes, present, groups, config)
    names = _names(groups, relations, config)
    dims: dict[str, dict[int, str]] = {}
    for g, name, here in zip(groups, names, present):
        for leaf, axis in g:
            if here and leaf.flat in calls[example]:
                dims.setdefault(leaf.flat, {})[axis] = name
    rel = {names[t]: " + ".join(names[g] for g in sorted((a, b), key=lambda g: not _cached(groups[g])))
           for t, (a, b) in relations.items()}
    return Decision({k: dict(sorted(v.items())) for k, v in dims.items()}, rel,
                    {names[i]: tuple(s) for i, s in enumerate(sizes) if present[i]}, example)


class Calls:
    """The calls' axes kept as each call is added, to tell which of two calls the calls so far make the
    better example (``better``), as ``decide`` would take it from them: at a cost per call of the axes
    and their patterns, not of the calls so far (``generate``'s steps are calls).

    Axes with the same size in every call so far share a pattern (a cache's layers: ``_groups`` joins
    them first); a pattern is dynamic once it had two sizes; two patterns are one dimension while
    every call that gave both gave them one size, over two sizes or more (``_same``): each pair of
    patterns keeps ``(one size where both were given, the first such size, two such sizes seen)``,
    updated per call, and a pattern its sizes at the calls ``watch`` names, its first axis and
    (two of) its sizes."""

    def __init__(self) -> None:
        self.tensors: list[int] = []  # per call: how many tensors it gave
        self.leaves: dict[str, tuple[int, list[int]]] = {}  # flat name -> (rank first seen, its axes)
        self.pattern: list[int] = []  # axis -> its pattern
        self.first: dict[int, int] = {}  # pattern -> its first axis
        self.sizes: dict[int, set[int]] = {}  # pattern -> its sizes so far (two at most kept)
        self.at: dict[int, dict[int, int | None]] = {}  # pattern -> {watched call: its size there}
        self.pairs: dict[tuple[int, int], tuple[bool, int | None, bool]] = {}
        self.watched: set[int] = set()
        self._next = 0

    def add(self, shapes: Shapes) -> int:
        """Add one call's shapes (watched until ``forget``); returns its index."""
        call = len(self.tensors)
        self.tensors.append(len(shapes))
        new = -1  # the axes of tensors no call gave before: absent from every earlier call
        for flat, (_, shape) in shapes.items():
            if flat not in self.leaves:
                self.leaves[flat] = (len(shape), list(range(len(self.pattern), len(self.pattern) + len(shape))))
                self.pattern += [new] * len(shape)
        value = [None] * len(self.pattern)
        for flat, (rank, axes) in self.leaves.items():
            if flat in shapes and len(shapes[flat][1]) == rank:
                for a, size in zip(axes, shapes[flat][1]):
                    value[a] = size
        parts: dict[tuple[int, int | None], int] = {}  # (old pattern, size in this call) -> new pattern
        parent: dict[int, tuple[int, int | None]] = {}
        for a, old in enumerate(self.pattern):
            key = (old, value[a])
            if key not in parts:
                parts[key], self._next = self._next, self._next + 1
                parent[parts[key]] = key
            self.pattern[a] = parts[key]
        first, sizes, at = {}, {}, {}
        for a, p in enumerate(self.pattern):
            first.setdefault(p, a)
        for p, (old, size) in parent.items():
            sizes[p] = set(self.sizes.get(old, ()))
            if size is not None and len(sizes[p]) < 2:
                sizes[p].add(size)
            at[p] = {**self.at.get(old, {}), call: size}
        pairs = {}
        for p, q in itertools.combinations(sorted(parent), 2):
            (op, sp), (oq, sq) = parent[p], parent[q]
            if op == oq:  # parts of one pattern: one size wherever both were given until now
                common = self.sizes.get(op, set())
                one, seen, two = True, next(iter(common), None), len(common) > 1
            else:
                one, seen, two = self.pairs.get((min(op, oq), max(op, oq)), (True, None, False))
            if sp is not None and sq is not None:
                one, two = one and sp == sq, two or (seen is not None and seen != sp)
                seen = sp if seen is None else seen
            pairs[(p, q)] = (one, seen, two)
        self.first, self.sizes, self.at, self.pairs = first, sizes, at, pairs
        self.watched.add(call)
        return call

    def forget(self, call: int) -> None:
        """Stop keeping the sizes of ``call`` (no longer a candidate example)."""
        self.watched.discard(call)
        for sizes in self.at.values():
            sizes.pop(call, None)

    def better(self, a: int, b: int) -> int:
        """Of the watched calls ``a`` and ``b``, the one ``decide`` would take as the example from the
        calls so far with these two candidates (``_example``)."""
        dynamic = sorted((p for p, s in self.sizes.items() if len(s) > 1), key=self.first.__getitem__)
        root = {p: p for p in dynamic}

        def find(p: int) -> int:
            while root[p] != p:
                root[p] = root[root[p]]
                p = root[p]
            return p

        for p, q in itertools.combinations(dynamic, 2):
            one, _, two = self.pairs[(min(p, q), max(p, q))]
            if one and two:
                root[find(q)] = find(p)
        groups: dict[int, list[int]] = {}
        for p in dynamic:  # in order of their first axes: a dimension's size in a call is its first axis given
            groups.setdefault(find(p), []).append(p)

        def badness(c: int) -> tuple:
            here = [next((s for s in (self.at[p].get(c) for p in g) if s is not None), None) for g in groups.values()]
            here = [s for s in here if s is not None]
            return (-self.tensors[c], sum(v <= 1 for v in here), len(here) - len(set(here)), c)

        return min((a, b), key=badness)


def _dimensions(calls: list[Shapes]) -> tuple[list[list[tuple[Leaf, int]]], list[list[int | None]]]:
    """The calls' dimensions (their dynamic axes joined: ``_groups``) and each one's size per call."""
    leaves = _leaves(calls)
    axes = [(leaf, a) for leaf in leaves.values() for a in range(leaf.rank) if leaf.constant(a) is None]
    groups = _groups(axes)
    return groups, [_group_sizes(g, len(calls)) for g in groups]


def _cached(group: list[tuple[Leaf, int]]) -> bool:
    """True for a dimension of a cache tensor (written first in a sum: ``past + seq``)."""
    return any(is_cache_leaf(leaf.flat) for leaf, _ in group)


def _leaves(calls: list[Shapes]) -> dict[str, Leaf]:
    """Every tensor any call gave, with its sizes per axis and call (None where the call had no
    tensor of that name and rank)."""
    first: dict[str, tuple[str, int]] = {}
    for call in calls:
        for flat, (key, shape) in call.items():
            first.setdefault(flat, (key, len(shape)))
    out = {}
    for flat, (key, rank) in first.items():
        absent = (None,) * rank
        shapes = [call[flat][1] if flat in call and len(call[flat][1]) == rank else absent for call in calls]
        per_axis = tuple(zip(*shapes)) if rank else ()
        out[flat] = Leaf(flat, key, rank, per_axis)
    return out


def _same(x: tuple, y: tuple) -> bool:
    """Two axes are one dimension: equal in every call that gave both, over at least two sizes."""
    both = [(a, b) for a, b in zip(x, y) if a is not None and b is not None]
    return bool(both) and all(a == b for a, b in both) and len({a for a, _ in both}) > 1


def _groups(axes: list[tuple[Leaf, int]]) -> list[list[tuple[Leaf, int]]]:
    """The dynamic axes joined into dimensions (axes of one size in every call), in order of first
    appearance. Axes with the very same sizes (a cache's layers) are one dimension before any
    comparison (each varies, so ``_same`` holds), so the pairs compared are those of distinct sizes."""
    first: dict[tuple, int] = {}
    parent = [first.setdefault(leaf.sizes[a], i) for i, (leaf, a) in enumerate(axes)]

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in itertools.combinations(list(first.values()), 2):
        if _same(axes[i][0].sizes[axes[i][1]], axes[j][0].sizes[axes[j][1]]):
            parent[root(j)] = root(i)
    out: dict[int, list] = {}
    for i, axis in enumerate(axes):
        out.setdefault(root(i), []).append(axis)
    return list(out.values())


def _group_sizes(group: list[tuple[Leaf, int]], n: int) -> list[int | None]:
    """A dimension's size in each call: the first of its axes the call gave."""
    out: list[int | None] = [None] * n
    for leaf, axis in group:
        for c, size in enumerate(leaf.sizes[axis]):
            if out[c] is None:
                out[c] = size
    return out


def _example(calls: list[Shapes], candidates: list[int], sizes: list[list[int | None]]) -> int:
    """The call whose sizes are least degenerate: of the calls with the most tensors, the one with
    the fewest dynamic sizes of 0 or 1 (which torch.export specializes), then the fewest dynamic
    sizes shared by two dimensions (which hide which axis is which), then the first."""

    def badness(c: int) -> tuple:
        here = [s[c] for s in sizes if s[c] is not None]
        return (-len(calls[c]), sum(v <= 1 for v in here), len(here) - len(set(here)), c)

    return min(candidates, key=badness)


def _relations(sizes: list[list[int | None]], present: list[bool], groups: list, config: dict[str, int]
               ) -> dict[int, tuple[int, int]]:
    """target dimension -> (a, b): the dimensions the example has that are the sum of two others of
    it in every call that gave all three (two calls at least, the sum varying); sums of ``batch``
    come last, a dimension is the target of one sum at most."""
    batch = {i for i, g in enumerate(groups) if any(propose(leaf, a, config)[0] == "batch" for leaf, a in g)}
    here = [i for i, p in enumerate(present) if p]
    out: dict[int, tuple[int, int]] = {}
    for t in here:
        pairs = sorted(itertools.combinations([i for i in here if i != t], 2),
                       key=lambda p: (len(batch & set(p)), p))
        for a, b in pairs:
            rows = [(x, y, z) for x, y, z in zip(sizes[t], sizes[a], sizes[b]) if None not in (x, y, z)]
            if len(rows) >= 2 and all(x == y + z for x, y, z in rows) and len({x for x, _, _ in rows}) > 1:
                out[t] = (a, b)
                break
    return out


def _names(groups: list, relations: dict[int, tuple[int, int]], config: dict[str, int]) -> list[str]:
    """One name per dimension: the surest its axes propose (``names.propose``), ``total`` for the
    sum of two others that no axis names surely; a name two dimensions want goes to the surer, the
    other one is ``<input>_<name>``."""
    proposals = []
    for i, g in enumerate(groups):
        best = min((propose(leaf, axis, config) + (n, leaf) for n, (leaf, axis) in enumerate(g)),
                   key=lambda p: (p[1], p[2]))
        name, rank, _, leaf = best
        if i in relations and rank >= LIKELY:
            name, rank = "total", LIKELY
        proposals.append((rank, i, name, leaf))
    taken: set[str] = set()
    out = [""] * len(groups)
    for rank, i, name, leaf in sorted(proposals, key=lambda p: (p[0], p[1])):
        choice = _identifier(name)
        if choice in taken and rank < FALLBACK:
            choice = _identifier(f"{leaf.key}_{name}")
        base, k = choice, 2
        while choice in taken:
            choice, k = f"{base}_{k}", k + 1
        taken.add(choice)
        out[i] = choice
    return out


def _identifier(text: str) -> str:
    """``text`` as a Python identifier (a dimension name): other characters as ``_``."""
    out = re.sub(r"\W", "_", text)
    return out if out.isidentifier() else f"d_{out}"
