"""Dynamic-shapes specs: dimension names as strings, inputs named and flattened, declared axes.

``torch.export`` takes ``Dim`` objects keyed by forward() parameter names or positions; onnxport
also takes plain strings as dimension names and negative axes, and records which axes the user
declared dynamic (``DeclaredDim``) to check them after capture.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch
from torch.export import Dim
from torch.utils import _pytree as pytree

from onnxport.capture.caches import CacheKey, cache_input_name, cache_leaves, expand_spec, is_cache
from onnxport.capture.parameters import ONE, Parameter, spread
from onnxport.errors import DynamicShapesError


@dataclasses.dataclass
class DeclaredDim:
    """One axis the user declared dynamic."""

    input_name: str  # flat input name (``x``, ``batch_input_ids``)
    axis: int
    name: str  # the dimension's name (``x_rows``) or ``<input>_dim<axis>`` for AUTO/DYNAMIC
    strict: bool  # True for named Dims, strings and Dim.DYNAMIC: a constant here is an error
    kind: str = "dim"  # "dim" (a Dim object), "string", "auto" (Dim.AUTO) or "dynamic" (Dim.DYNAMIC)
    min: int = 0  # the declared range (a Dim's min/max; 0..None otherwise)
    max: int | None = None
    root: str | None = None  # a derived Dim's (``4*T``, ``T + 1``) root's name (``T``); None otherwise
    root_min: int = 0  # the root's declared range (``Dim("T", min=2)``)
    root_max: int | None = None

    @property
    def ranged(self) -> bool:
        """The user gave this dimension a range of their own (``Dim(name, min=..., max=...)``):
        a condition of the model that cuts it is refused, not adopted."""
        return self.kind == "dim" and (self.min != 0 or self.max is not None)



def to_dims(spec: Any, names: dict[str, Any], ranges: dict[str, tuple] | None = None,
            derived: dict[str, tuple] | None = None) -> Any:
    """Replace every string in a dynamic_shapes spec by a ``Dim`` of that name (one per name),
    with the ``(min, max)`` of ``ranges`` for the names listed there; a ``Dim`` object named in
    ``ranges`` is replaced by one with that range. A string named in ``derived`` (name ->
    ``(base, k, c)``) becomes torch's derived dim ``k*base + c``."""
    if isinstance(spec, str) and spec in (derived or {}) and spec not in names:
        base, k, c = derived[spec]
        root = to_dims(base, names, ranges, derived)
        scaled = root * k if k != 1 else root
        names[spec] = scaled + c if c else scaled
    if type(spec) is Dim and spec.__name__ in (ranges or {}):
        if spec.__name__ not in names:
            lo, hi = ranges[spec.__name__]
            names[spec.__name__] = Dim(spec.__name__, min=lo, max=hi)
        return names[spec.__name__]
    if isinstance(spec, str):
        if not spec.isidentifier():
            raise DynamicShapesError(
                f"dimension name {spec!r} is not a valid identifier",
                hint="name dynamic dimensions like Python variables: 'batch', 'time', 'x_rows'",
            )
        if spec not in names:
            lo, hi = (ranges or {}).get(spec, (None, None))
            names[spec] = Dim(spec, min=lo, max=hi) if lo is not None or hi is not None else Dim(spec)
        return names[spec]
    if isinstance(spec, dict):
        return {k: to_dims(v, names, ranges, derived) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(to_dims(v, names, ranges, derived) for v in spec)
    return spec


def without_dims(spec: Any, names: set[str]) -> Any:
    """``spec`` with the axes of the dims ``names`` (plain strings or ``Dim`` objects of those names)
    static (``Dim.STATIC``): a piece of a model exported in pieces holding one size of a dim."""
    if (isinstance(spec, str) and spec in names) or (isinstance(spec, Dim) and spec.__name__ in names):
        return Dim.STATIC
    if isinstance(spec, dict):
        return {k: without_dims(v, names) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(without_dims(v, names) for v in spec)
    return spec


def one_dim_per_name(spec: Any) -> Any:
    """``spec`` with one ``Dim`` object per name: where several ``Dim`` objects share a name (one size,
    as onnxport reads names), the one with a range stands for all of them (``Dim("rows", max=64)`` on
    ``x`` and ``Dim("rows")`` on ``y``); torch.export refuses such a pair.

    Raises:
        DynamicShapesError: two ``Dim`` objects of one name with different ranges of their own.
    """
    found: dict[str, list] = {}

    def collect(s: Any) -> None:
        if type(s) is Dim:
            found.setdefault(s.__name__, []).append(s)
        elif isinstance(s, dict):
            for v in s.values():
                collect(v)
        elif isinstance(s, (list, tuple)):
            for v in s:
                collect(v)

    collect(spec)
    chosen: dict[str, Any] = {}
    for name, dims in found.items():
        ranged = {_range(d): d for d in dims if _range(d) != (0, None)}
        if len(ranged) > 1:
            shown = " and ".join(f"Dim({name!r}, min={lo}, max={hi})" for lo, hi in ranged)
            raise DynamicShapesError(
                f"dimension {name!r} is declared with two ranges, {shown}: one name is one size",
                hint=f"give every axis of size {name!r} the same Dim object, or one range")
        chosen[name] = next(iter(ranged.values())) if ranged else dims[0]
    if all(len({id(d) for d in dims}) == 1 for dims in found.values()):
        return spec

    def replace(s: Any) -> Any:
        if type(s) is Dim:
            return chosen[s.__name__]
        if isinstance(s, dict):
            return {k: replace(v) for k, v in s.items()}
        if isinstance(s, (list, tuple)):
            return type(s)(replace(v) for v in s)
        return s

    return replace(spec)


def _range(d: Any) -> tuple[int, int | None]:
    """A ``Dim``'s declared ``(min, max)``, ``max`` None when unbounded."""
    hi = d.max
    return int(d.min), (None if hi is None or not isinstance(hi, int) or hi >= 2 ** 62 else int(hi))


def string_names(spec: Any) -> set[str]:
    """The dimension names given as plain strings (no range of the user's own)."""
    if isinstance(spec, str):
        return {spec}
    if isinstance(spec, dict):
        return set().union(*(string_names(v) for v in spec.values())) if spec else set()
    if isinstance(spec, (list, tuple)):
        return set().union(*(string_names(v) for v in spec)) if spec else set()
    return set()


def signature_names(model: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """(parameter name, value) of each top-level input, in the order torch.export flattens them."""
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values()]
    except (TypeError, ValueError):
        params = []
    out: list[tuple[str, Any]] = []
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p for p in params if p.kind == p.VAR_POSITIONAL), None)
    for i, a in enumerate(args):
        if i < len(pos):
            out.append((pos[i].name, a))
        else:
            out.append((f"{var.name if var else 'args'}_{i - len(pos)}", a))
    for k, v in kwargs.items():
        out.append((k, v))
    return out


def key_str(k: Any) -> str:
    if isinstance(k, pytree.MappingKey):
        return str(k.key)
    if isinstance(k, pytree.SequenceKey):
        return str(k.idx)
    if isinstance(k, pytree.GetAttrKey):
        return k.name
    return str(k)


def leaf_name(name: str, path: tuple) -> str:
    """The flat name of the leaf at ``path`` under the top-level input ``name``: parts joined by
    ``_`` (``batch_input_ids``, ``x_0``); the tensors of a cache by ``.`` after the cache's name
    (``past_key_values.0.key``, ``onnxport.capture.caches``)."""
    out = name
    for i, k in enumerate(path):
        if isinstance(k, CacheKey):
            out = (cache_input_name(out) if i == 0 else out) + f".{k.name}"
        else:
            out += f"_{key_str(k)}"
    return out


def flat_names(top: list[tuple[str, Any]]) -> list[tuple[str, Any, str]]:
    """Flatten named top-level inputs: (flat name, leaf, top-level name) in pytree order."""
    out = []
    for name, value in top:
        leaves, _ = pytree.tree_flatten_with_path(value)
        for path, leaf in leaves:
            out.append((leaf_name(name, path), leaf, name))
    return out


def expand_caches(top: list[tuple[str, Any]], per_input: dict[str, Any]) -> dict[str, Any]:
    """``per_input`` (input name -> spec) with the spec of each cache input expanded to one entry
    per tensor (``onnxport.capture.caches.expand_spec``: one spec may name the dims of all layers)."""
    out = dict(per_input)
    for name, value in top:
        if is_cache(value) and out.get(name) is not None:
            out[name] = expand_spec(value, out[name], name)
    return out


def spec_for(spec: Any, top: list[tuple[str, Any]], params: list[Parameter] | None = None) -> dict[str, Any]:
    """Align the dynamic_shapes spec with the top-level inputs: name -> spec of that input. ``spec``
    is in torch.export's form (by forward() parameter, ``params``) or one entry per input
    (``onnxport.capture.parameters.spread``).

    Raises:
        DynamicShapesError: a spec that fits neither form.
    """
    if spec is None:
        return {}
    return spread(spec, top, params or [Parameter(n, ONE, (n,)) for n, _ in top])


def positive_axes(value: Any, spec: Any) -> Any:
    """The spec of one input with negative axis keys (``{-1: "k"}``) made positive, as torch wants."""
    if spec is None:
        return None
    if is_cache(value) and isinstance(spec, (list, tuple)):
        return [positive_axes(t, s) for (_, t), s in zip(cache_leaves(value), spec)]
    if isinstance(value, torch.Tensor) and isinstance(spec, dict):
        return {(a % value.dim() if isinstance(a, int) and a < 0 and value.dim() else a): d for a, d in spec.items()}
    if isinstance(value, dict) and isinstance(spec, dict):
        return {k: positive_axes(value.get(k), v) for k, v in spec.items()}
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)) and not isinstance(value, torch.Tensor):
        return type(spec)(positive_axes(v, s) for v, s in zip(value, spec))
    return spec


def other_axes_auto(value: Any, spec: Any) -> Any:
    """The spec of one input with every tensor axis it does not name made ``Dim.AUTO`` (dynamic
    where the model allows it, static where torch.export specializes it)."""
    if isinstance(value, torch.Tensor):
        if isinstance(spec, dict):
            named = dict(spec)
        elif isinstance(spec, (list, tuple)):
            named = dict(enumerate(spec))
        else:
            named = {}
        return {a: named[a] if named.get(a) is not None else Dim.AUTO for a in range(value.dim())} or None
    if is_cache(value):
        leaves = cache_leaves(value)
        return [other_axes_auto(t, spec[i] if isinstance(spec, (list, tuple)) else None)
                for i, (_, t) in enumerate(leaves)]
    if isinstance(value, dict) and (spec is None or isinstance(spec, dict)):
        return {k: other_axes_auto(v, (spec or {}).get(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and (spec is None or isinstance(spec, (list, tuple))):
        items = [other_axes_auto(v, spec[i] if spec is not None and i < len(spec) else None)
                 for i, v in enumerate(value)]
        return type(spec)(items) if spec is not None else items
    return spec


def declared_dims(top: list[tuple[str, Any]], per_input: dict[str, Any],
                  strings: set[str] = frozenset()) -> list[DeclaredDim]:
    """The axes declared dynamic in ``per_input`` (input name -> spec, strings already made
    ``Dim``s; ``strings``: the names the user gave as plain strings)."""
    declared: list[DeclaredDim] = []
    top_names = {n for n, _ in top}

    def walk(prefix: str, value: Any, spec: Any) -> None:
        if spec is None:
            return
        if isinstance(value, torch.Tensor):
            items = (spec.items() if isinstance(spec, dict)
                     else enumerate(spec) if isinstance(spec, (list, tuple)) else None)
            if items is None:
                raise DynamicShapesError(f"dynamic_shapes for input {prefix!r} must be a dict or a list, not {spec!r}")
            for axis, d in items:
                if d is None:
                    continue
                if not isinstance(axis, int) or not -value.dim() <= axis < value.dim():
                    raise DynamicShapesError(
                        f"dynamic_shapes declares axis {axis} of input {prefix!r}, "
                        f"which has shape {tuple(value.shape)}",
                        hint=f"axes of {prefix!r} go from 0 to {value.dim() - 1}",
                    )
                axis = axis % value.dim()
                if isinstance(d, int) and not isinstance(d, bool):
                    if d != value.shape[axis]:
                        raise DynamicShapesError(
                            f"dynamic_shapes gives axis {axis} of input {prefix!r} the static size {d}, but the "
                            f"example's is {value.shape[axis]}",
                            hint="give the example's size, or a dimension name to make the axis dynamic")
                    continue
                if d is Dim.STATIC:
                    continue
                if not isinstance(d, type(Dim.AUTO)) and not hasattr(d, "__name__"):
                    raise DynamicShapesError(
                        f"dynamic_shapes gives axis {axis} of input {prefix!r} {d!r}, which is not a dimension",
                        hint="give a dimension name (a string or torch.export.Dim), Dim.AUTO / Dim.DYNAMIC / "
                             "Dim.STATIC, an int (the static size) or None")
                if isinstance(d, type(Dim.AUTO)):
                    strict = d.type == Dim.DYNAMIC.type
                    declared.append(DeclaredDim(prefix, axis, f"{prefix}_dim{axis}", strict,
                                                "dynamic" if strict else "auto"))
                elif d.__name__ in strings:
                    declared.append(DeclaredDim(prefix, axis, d.__name__, True, "string"))
                else:
                    hi = None if int_oo_or_none(d.max) is None else int(d.max)
                    lo = int(getattr(d, "min", 0) or 0)
                    size = int(value.shape[axis])
                    if type(d).__name__ != "_DerivedDim" and not (lo <= size and (hi is None or size <= hi)):
                        raise DynamicShapesError(
                            f"dimension {d.__name__!r} (axis {axis} of input {prefix!r}) is declared in "
                            f"[{lo}, {hi if hi is not None else 'inf'}], but the example's size is {size}",
                            hint="give example inputs inside the declared range, or widen the range")
                    declared.append(DeclaredDim(prefix, axis, d.__name__, True, "dim", lo, hi, *_root(d)))
            return
        if is_cache(value) and isinstance(spec, (list, tuple)):
            base = cache_input_name(prefix) if prefix in top_names else prefix
            for (name, t), s in zip(cache_leaves(value), spec):
                walk(f"{base}.{name}", t, s)
        elif isinstance(value, dict) and isinstance(spec, dict):
            for k in value:
                walk(f"{prefix}_{k}", value[k], spec.get(k))
        elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
            for i, (v, s) in enumerate(zip(value, spec)):
                walk(f"{prefix}_{i}", v, s)
        elif type(value) in pytree.SUPPORTED_NODES and isinstance(spec, (list, tuple)):
            # a registered class (a dataclass): its spec lists its flattened children, as torch.export reads it
            node = pytree.SUPPORTED_NODES[type(value)]
            children = (node.flatten_with_keys_fn(value)[0] if node.flatten_with_keys_fn is not None else
                        [(pytree.SequenceKey(i), c) for i, c in enumerate(node.flatten_fn(value)[0])])
            for (k, v), s in zip(children, spec):
                walk(f"{prefix}_{key_str(k)}", v, s)

    for name, value in top:
        walk(name, value, per_input.get(name))
    check_same_name_same_size(declared, top)
    return declared


def _root(d: Any) -> tuple[str | None, int, int | None]:
    """A derived ``Dim``'s (``4 * T``: torch's ``_DerivedDim``) root's name and declared ``(min, max)``;
    ``(None, 0, None)`` for any other ``Dim``."""
    root = getattr(d, "root", None) if type(d).__name__ == "_DerivedDim" else None
    if root is None or not hasattr(root, "__name__"):
        return None, 0, None
    return root.__name__, int(getattr(root, "min", 0) or 0), int_oo_or_none(getattr(root, "max", None))


def int_oo_or_none(value: Any) -> int | None:
    """A Dim bound as an int, None for torch's ``int_oo`` / sympy infinity / None."""
    if value is None:
        return None
    try:
        return int(value) if abs(float(value)) != float("inf") else None
    except (TypeError, ValueError, OverflowError):
        return None


def check_same_name_same_size(declared: list[DeclaredDim], top: list[tuple[str, Any]]) -> None:
    """A dimension name used on several axes is one dimension: the example sizes must agree."""
    leaves = {f: leaf for f, leaf, _ in flat_names(top)}
    seen: dict[str, tuple[str, int, int]] = {}
    for d in declared:
        leaf = leaves.get(d.input_name)
        if not isinstance(leaf, torch.Tensor):
            continue
        size = int(leaf.shape[d.axis])
        if d.name in seen and seen[d.name][2] != size:
            other, axis, other_size = seen[d.name]
            raise DynamicShapesError(
                f"dimension {d.name!r} is axis {axis} of {other!r} (size {other_size}) and axis {d.axis} of "
                f"{d.input_name!r} (size {size}) in the example: one name is one size",
                hint="give the two axes different names, or example inputs whose sizes agree")
        seen.setdefault(d.name, (d.input_name, d.axis, size))
