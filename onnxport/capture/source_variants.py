"""A library function compiled again from its own source with some statements replaced: the form
capture-time patches give a library's functions whose branch on a size is between two forms that
compute the same thing (``onnxport/library/``: transformers' tables, padding and image batches).

``source_variant(fn, transform)`` reads ``fn``'s source (unwrapped from decorators such as
transformers' kernel-hub dispatcher, and from the ``kernels`` package's module form of a function),
lets ``transform`` change its ``ast.FunctionDef`` in place and compiles the result in ``fn``'s module
globals, with ``fn``'s file and line numbers (so errors and guards name the library's own lines),
defaults and name. One variant per function and transform is kept for the process. A capture patch
installs it as ``function_variant`` (the function's code replaced, its decorators kept) or
``forward_variants`` (a class's ``forward`` replaced).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from typing import Callable

from onnxport.library_functions import library_function

_COMPILED: dict[tuple, Callable | None] = {}


def source_variant(fn: Callable, transform: Callable[[ast.FunctionDef], bool]) -> Callable | None:
    """``fn`` compiled from its source after ``transform(func_def)`` changed it; None when the source
    is not available, is not one function, or ``transform`` returns False (the statements it looks
    for are not there: a library version this variant does not know)."""
    fn = library_function(fn)
    key = (fn, transform)
    if key in _COMPILED:
        return _COMPILED[key]
    _COMPILED[key] = None
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    ast.increment_lineno(tree, first - 1)
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef) or func.name != fn.__name__ or not transform(func):
        return None
    func.decorator_list = []
    ast.fix_missing_locations(tree)
    code = compile(tree, filename, "exec")
    body = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.__name__)
    closure = fn.__closure__ if body.co_freevars == fn.__code__.co_freevars else None
    if body.co_freevars and closure is None:
        return None
    new = types.FunctionType(body, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__, new.__doc__ = fn.__qualname__, fn.__doc__
    _COMPILED[key] = new
    return new


def function_variant(fn: Callable, transform: Callable[[ast.FunctionDef], bool]) -> list:
    """One ``patches.SetCode`` of ``fn`` (under its decorators: ``library_function``) to the code of its
    ``source_variant``, the decorators still applying while the patch is installed; none where there is
    no variant (``transform`` found nothing to change, or the source is not available)."""
    from onnxport.capture.patches import SetCode

    inner = library_function(fn)
    variant = source_variant(inner, transform)
    return [] if variant is None else [SetCode(inner, variant)]


def replace_statement(body: list[ast.stmt], matches: Callable[[ast.stmt], bool],
                      replacement: Callable[[ast.stmt], list[ast.stmt]]) -> bool:
    """Replace the one statement of ``body`` (searched recursively in blocks) that ``matches`` by
    ``replacement(statement)``; False (nothing changed) unless exactly one matches."""
    found = []

    def walk(stmts: list[ast.stmt]) -> None:
        for i, stmt in enumerate(stmts):
            if matches(stmt):
                found.append((stmts, i))
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    walk(inner)

    walk(body)
    if len(found) != 1:
        return False
    stmts, i = found[0]
    stmts[i:i + 1] = replacement(stmts[i])
    return True


class ReadAsName(ast.NodeTransformer):
    """Reads of ``self.<attribute>`` become reads of the local ``name`` (a table computed in the
    function instead of the one stored on the module)."""

    def __init__(self, attribute: str, name: str):
        self.attribute, self.name = attribute, name

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and ast.unparse(node) == f"self.{self.attribute}":
            return ast.copy_location(ast.Name(self.name, ast.Load()), node)
        return node


def forward_variants(classes: list[type], transform: Callable[[ast.FunctionDef], bool]) -> list:
    """One ``patches.SetAttribute`` of ``forward`` for each class of ``classes`` whose own
    ``forward`` ``transform`` changes: its ``source_variant`` while the patch is installed."""
    from onnxport.capture.patches import SetAttribute

    return [SetAttribute(cls, "forward", lambda o: source_variant(o, transform) or o)
            for cls in classes if source_variant(cls.__dict__["forward"], transform) is not None]


def module_function(module_name: str, name: str, make: Callable[[Callable], Callable]) -> list:
    """One ``patches.SetAttribute`` of the function ``name`` of the module ``module_name`` to
    ``make(original)``, where that module is loaded and has it; none otherwise."""
    from onnxport.capture.patches import SetAttribute

    module = sys.modules.get(module_name)
    return [SetAttribute(module, name, make)] if module is not None and hasattr(module, name) else []
