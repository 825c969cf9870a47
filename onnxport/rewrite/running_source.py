"""Whether a function's source, as it reads now, is the code that runs.

The rewrite of control flow (``onnxport.rewrite.module``) and the capture rule for layout-only branches
(``onnxport.capture.layout_branches``) read a function's source through ``linecache`` / ``inspect``.
That source is not the code running where the file was edited after the module was imported (a
notebook user editing a module, a hot-reloading server), or where the code was compiled with
``exec(compile(src, real_path, "exec"))`` under a real file's name. ``runs_source`` compiles the whole
file as it reads (so methods, closures, ``super()``, private names and ``from __future__`` imports
compile as they did at import) and compares the code object found at the running code's name and first
line with the running code: bytecode, constants, names, recursively through nested code objects; line
numbers are ignored.

A module whose code a loader changed from its text as it compiled it (pytest rewrites a test module's
``assert`` statements) compiles the same way where a transform is registered for it
(``register_transform``; ``onnxport.library.pytest`` registers pytest's): the comparison then holds for
models defined in such modules too.
"""

from __future__ import annotations

import ast
import functools
import linecache
from types import CodeType
from typing import Callable

# (applies(module globals) -> bool, transform(tree, source, path) changing the tree in place), in order
_TRANSFORMS: list[tuple[Callable[[dict], bool], Callable[[ast.Module, str, str], None]]] = []


def register_transform(applies: Callable[[dict], bool], transform: Callable[[ast.Module, str, str], None]) -> None:
    """Compile a module's text through ``transform`` where ``applies(its globals)``: for modules a
    loader changed as it compiled them (``transform(tree, source, path)`` changes the parsed ``tree`` in
    place as that loader does; an ``ImportError`` it raises counts as a source that does not compile)."""
    _TRANSFORMS.append((applies, transform))


def runs_source(code: CodeType, source: str, transforms: tuple[int, ...] = ()) -> bool:
    """``code`` (named ``code.co_filename``) is what ``source``, the text of that file, compiles to at
    ``code``'s name and first line (``transforms``: indices of registered transforms applied first).
    False where ``source`` does not compile."""
    found = _compiled(code.co_filename, source, transforms)
    return found is not None and same_code(found.get((code.co_name, code.co_firstlineno)), code)


def runs_file(code: CodeType, namespace: dict | None = None) -> bool:
    """``runs_source`` of ``code`` against its file as ``linecache`` reads it now (refreshed from disk,
    as ``inspect.getsource`` reads it; ``namespace``: the module globals, for sources kept by a loader,
    and for the registered transforms that apply to the module)."""
    linecache.checkcache(code.co_filename)
    lines = linecache.getlines(code.co_filename, namespace)
    transforms = tuple(i for i, (applies, _) in enumerate(_TRANSFORMS) if applies(namespace or {}))
    return bool(lines) and runs_source(code, "".join(lines), transforms)


def same_code(a: CodeType | None, b: CodeType | None) -> bool:
    """``a`` and ``b`` compute the same: bytecode, constants, names and argument counts equal,
    recursively through nested code objects (functions, lambdas, comprehensions); lines ignored."""
    if a is None or b is None:
        return a is b
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars, a.co_cellvars, a.co_name, a.co_argcount,
            a.co_posonlyargcount, a.co_kwonlyargcount, a.co_flags) != \
            (b.co_code, b.co_names, b.co_varnames, b.co_freevars, b.co_cellvars, b.co_name, b.co_argcount,
             b.co_posonlyargcount, b.co_kwonlyargcount, b.co_flags):
        return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, CodeType) or isinstance(y, CodeType):
            if not (isinstance(x, CodeType) and isinstance(y, CodeType) and same_code(x, y)):
                return False
        elif type(x) is not type(y) or not _same_constant(x, y):
            return False
    return True


def _same_constant(x: object, y: object) -> bool:
    try:
        return bool(x == y) or (x != x and y != y)  # NaN constants
    except Exception:
        return False


@functools.lru_cache(maxsize=64)
def _compiled(path: str, source: str, transforms: tuple[int, ...]) -> dict[tuple[str, int], CodeType] | None:
    """(name, first line) -> code object of every function compiled from ``source`` under ``path``
    (through the registered ``transforms``, by index)."""
    try:
        tree = ast.parse(source, path)
        for i in transforms:
            _TRANSFORMS[i][1](tree, source, path)
        top = compile(tree, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, ImportError):
        return None
    found, stack = {}, [top]
    while stack:
        code = stack.pop()
        found.setdefault((code.co_name, code.co_firstlineno), code)
        stack.extend(c for c in code.co_consts if isinstance(c, CodeType))
    return found
