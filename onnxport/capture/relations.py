"""Relations between dynamic dimensions: one dimension's size as an expression of others.

A decoder's attention mask covers the cached steps and the new ones: ``total = past + seq``.
torch.export cannot be told so (a derived ``Dim`` is a multiple of one dimension plus a constant),
so the user states it (``to_onnx(..., relations={"total": "past + seq"})``, or ``total = "past +
seq"`` in a config's ``[dims]``), and onnxport uses it:

* capture decides every shape guard with the relation substituted (``past + seq <= total`` holds);
* validation generates only sizes that satisfy it (``onnxport.verify.sizes``).

Relations torch.export derives itself (an input axis of size ``2*time`` or ``time - 1``) need no
statement: the axis is an expression of ``time`` in the traced program.

``candidates`` lists the simple relations sizes satisfy (sums, differences, small multiples): the
hints of errors and validation reports when a relation may be missing.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import sympy

from onnxport.errors import DynamicShapesError

MULTIPLES = (2, 3, 4)


def symbol(name: str) -> sympy.Symbol:
    """The sympy symbol of a dimension name (a positive integer)."""
    return sympy.Symbol(name, integer=True, positive=True)


def parse_relations(relations: dict[str, Any] | None, known: set[str] | None = None) -> dict[str, sympy.Expr]:
    """``{"total": "past + seq"}`` -> ``{"total": past + seq}`` (sympy, over dimension names).

    Args:
        relations: dimension name -> an expression over other dimension names (``+``, ``-``, ``*``,
            ``//`` and integer constants), as a string, an int or a sympy expression.
        known: the dimension names of the export, when known (names outside it are an error).

    Raises:
        DynamicShapesError: an expression that does not parse, names an unknown dimension, or
            relations that depend on each other in a cycle.
    """
    out: dict[str, sympy.Expr] = {}
    for name, text in (relations or {}).items():
        if not isinstance(name, str) or not name.isidentifier():
            raise DynamicShapesError(f"relation for {name!r}: the related dimension must be a dimension name",
                                     hint='e.g. relations={"total": "past + seq"}')
        try:
            local = {n: symbol(n) for n in re.findall(r"[A-Za-z_]\w*", text)} if isinstance(text, str) else {}
            expr = sympy.sympify(text, locals=local) if not isinstance(text, sympy.Basic) else text
        except (sympy.SympifyError, SyntaxError, TypeError) as e:
            raise DynamicShapesError(f"relation {name} = {text!r} is not an expression over dimension names: {e}",
                                     hint='write it like "past + seq", "2*time", "time - 1"') from e
        if not isinstance(expr, sympy.Expr) or not (expr.is_Integer or expr.free_symbols):
            raise DynamicShapesError(f"relation {name} = {text!r} is not an integer expression over dimension names",
                                     hint='write it like "past + seq", "2*time", "time - 1"')
        expr = expr.xreplace({s: symbol(str(s)) for s in expr.free_symbols})
        names = {str(s) for s in expr.free_symbols}
        unknown = sorted(n for n in names | {name} if known is not None and n not in known)
        if unknown:
            raise DynamicShapesError(f"relation {name} = {text} names {unknown}, which are not dynamic dimensions of "
                                     "the export", hint=f"the dynamic dimensions are {sorted(known or [])}")
        if name in names:
            raise DynamicShapesError(f"relation {name} = {text} defines {name} by itself")
        out[name] = expr
    for name in out:  # no cycles: each relation resolves to independent dimensions
        resolve(out, {name: symbol(name)}, limit=len(out) + 1)
    return out


def pinned_relations(relations: dict[str, Any] | None, sizes: dict[str, int]) -> dict[str, str] | None:
    """``relations`` (dim name -> expression) with the dims of ``sizes`` replaced by their size: in a
    piece where ``seq`` is static at 1, ``total = past + seq`` reads ``total = past + 1``. A relation
    left with no dim names is dropped, as is one of a pinned dim."""
    if not relations:
        return relations
    pins = {symbol(n): v for n, v in sizes.items()}
    out = {}
    for name, expr in parse_relations(relations).items():
        expr = expr.xreplace(pins)
        if name not in sizes and expr.free_symbols:
            out[name] = str(expr)
    return out


def resolve(relations: dict[str, sympy.Expr], exprs: dict[str, sympy.Expr],
            limit: int | None = None) -> dict[str, sympy.Expr]:
    """``exprs`` with every related dimension replaced by its expression, until only independent
    dimensions remain. Raises ``DynamicShapesError`` for a cycle."""
    subs = {symbol(n): e for n, e in relations.items()}
    out = dict(exprs)
    for _ in range(limit or len(relations) + 1):
        nxt = {k: sympy.expand(v.xreplace(subs)) for k, v in out.items()}
        if nxt == out:
            return out
        out = nxt
    raise DynamicShapesError(f"the relations {', '.join(f'{n} = {e}' for n, e in relations.items())} form a cycle",
                             hint="define each related dimension from independent ones")


def evaluate(relations: dict[str, sympy.Expr], sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` of the independent dimensions completed with the related ones."""
    resolved = resolve(relations, {n: symbol(n) for n in relations})
    out = dict(sizes)
    for name, expr in resolved.items():
        out[name] = int(expr.xreplace({symbol(k): sympy.Integer(v) for k, v in sizes.items()}))
    return out


def broken(relations: dict[str, sympy.Expr], sizes: dict[str, int]) -> list[str]:
    """The relations ``sizes`` do not satisfy, as text (``total = past + seq``)."""
    out = []
    for name, expr in relations.items():
        if name in sizes and all(str(s) in sizes for s in expr.free_symbols):
            value = expr.xreplace({symbol(k): sympy.Integer(v) for k, v in sizes.items()})
            if int(value) != sizes[name]:
                out.append(f"{name} = {expr}")
    return out


def root_size(text: str, value: int, names: set[str]) -> tuple[str, int | None] | None:
    """The dimension and its size a size given to a derived form of it stands for: ``"4*T"`` = 36 ->
    ``("T", 9)``, ``"T + 1"`` = 10 -> ``("T", 9)``; ``(name, None)`` when no positive whole size of
    the dimension gives ``value`` (``"4*T"`` = 37). None when ``text`` is not an expression over
    exactly one of ``names`` (the dynamic dimensions)."""
    found = [n for n in dict.fromkeys(re.findall(r"[A-Za-z_]\w*", text)) if n in names]
    if len(found) != 1 or text.strip() == found[0] or "//" in text:  # a floor division has no one inverse
        return None
    try:
        expr = sympy.sympify(text, locals={found[0]: symbol(found[0])})
    except (sympy.SympifyError, SyntaxError, TypeError):
        return None
    if not isinstance(expr, sympy.Expr) or expr.free_symbols != {symbol(found[0])}:
        return None
    roots = [r for r in sympy.solve(sympy.Eq(expr, int(value)), symbol(found[0])) if r.is_Integer and r > 0]
    return found[0], (int(roots[0]) if roots else None)


def from_guards(guards: list) -> dict[str, sympy.Expr]:
    """The relations among the adopted constraints: a condition ``expression == name`` the model
    needs (``(p + s) == total``) defines ``name`` (``onnxport.capture.guards.Guard``)."""
    out = {}
    for g in guards:
        if not g.adopted or g.python.count("==") != 1:
            continue
        lhs, rhs = (side.strip() for side in g.python.split("=="))
        for name, other in ((rhs.strip("() "), lhs), (lhs.strip("() "), rhs)):
            if name.isidentifier() and name in g.names and name not in out:
                try:
                    expr = sympy.sympify(other.replace("//", "/"), locals={n: symbol(n) for n in g.names})
                except (sympy.SympifyError, SyntaxError, TypeError):
                    continue
                if "//" not in other and symbol(name) not in expr.free_symbols and expr.free_symbols:
                    out[name] = expr
                    break
    return out


def candidates(sizes: dict[str, int]) -> list[tuple[str, str]]:
    """``[(name, expression)]``: simple relations ``sizes`` satisfy: ``a = b + c``, ``a = b - c``,
    ``a = k*b`` (k = 2, 3, 4), ``a = b + 1``, ``a = b - 1``. Sizes below 2 relate by accident too
    often to count."""
    names = [n for n, v in sizes.items() if v >= 2]
    sums, multiples, differences, steps = [], [], [], []
    for a in names:
        others = [n for n in names if n != a]
        for b, c in itertools.combinations(others, 2):
            if sizes[a] == sizes[b] + sizes[c]:
                sums.append((a, f"{b} + {c}"))
        for b, c in itertools.permutations(others, 2):
            if sizes[a] == sizes[b] - sizes[c]:
                differences.append((a, f"{b} - {c}"))
        for b in others:
            multiples += [(a, f"{k}*{b}") for k in MULTIPLES if sizes[a] == k * sizes[b]]
            steps += [(a, f"{b} {'+' if k > 0 else '-'} 1") for k in (1, -1) if sizes[a] == sizes[b] + k]
    out = sums + multiples + differences + steps
    return out


def missing_hint(example: dict[str, int], sizes: dict[str, int], declared: dict[str, sympy.Expr] | None = None,
                 holding: list[dict[str, int]] = ()) -> str:
    """What to say when sizes fail: the relations that hold at the example and at every set of
    ``holding`` (sizes where the model worked) but not at ``sizes`` (``total = past + seq``), as a
    ``relations=`` argument; empty when there is none."""
    found = []
    for name, expr in candidates(example):
        if declared and name in declared:
            continue
        relation = {name: parse_relations({name: expr})[name]}
        if broken(relation, sizes) and not any(broken(relation, other) for other in holding):
            found.append(f"{name} = {expr}")
    if not found:
        return ""
    shown = found[:3]
    name, expr = shown[0].split(" = ")
    return (f"{' or '.join(shown)} at the example but not at these sizes: if the model needs it, declare "
            f'relations={{"{name}": "{expr}"}}')
