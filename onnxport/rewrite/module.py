"""Source-level rewriting of a module's ``forward`` (and the methods it reaches) before capture.

Each method is read with ``inspect.getsource``, parsed, transformed block by block (innermost
constructs first: ``for i in range(...)`` -> scan, ``while <tensor>`` -> while_loop,
``if <tensor>`` -> torch.cond), compiled under the user's file name with the original line
numbers (so torch.export's stack traces still point at the user's lines), and bound to a shallow
copy of the module: the user's module is never modified.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap
import types
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch

from onnxport.errors import ControlFlowError
from onnxport.library_functions import library_function
from onnxport.rewrite import comprehensions, flag_tails
from onnxport.rewrite import names as N
from onnxport.rewrite.loops import STACKING
from onnxport.rewrite.range_tensors import RangeTensors
from onnxport.rewrite.running_source import runs_file
from onnxport.source_forms import apply_forms


@dataclass
class RewriteNote:
    """One control-flow construct seen by the rewriter.

    Attributes:
        construct: ``"for"``, ``"while"`` or ``"if"``.
        where: ``file:line in function``.
        rewritten: True when the construct became scan / while_loop / torch.cond.
        detail: what it became, or why it was left as Python.
    """

    construct: str
    where: str
    rewritten: bool
    detail: str

    def __str__(self) -> str:
        state = "rewritten" if self.rewritten else "left as Python"
        return f"{self.where}: {self.construct} {state}: {self.detail}"


@dataclass
class FunctionContext:
    """What the construct rewriters know about the function being transformed."""

    func: ast.FunctionDef
    filename: str
    notes: list = field(default_factory=list)
    loops: list = field(default_factory=list)  # enclosing loop statements of the current block
    stacked_lists: set = field(default_factory=set)
    comprehension_loops: set = field(default_factory=set)  # id() of the loops comprehensions stand for
    counter: int = 0

    def where(self, node: ast.AST) -> str:
        return f"{self.filename}:{node.lineno} in {self.func.name}"

    def note(self, node: ast.AST, construct: str, rewritten: bool, detail: str) -> None:
        construct = "comprehension" if id(node) in self.comprehension_loops else construct
        self.notes.append(RewriteNote(construct, self.where(node), rewritten, detail))

    def fresh(self, kind: str, node: ast.AST) -> str:
        self.counter += 1
        return f"{N.GENERATED_PREFIX}{kind}_{node.lineno}_{self.counter}"

    def defined_before(self, node: ast.AST) -> set[str]:
        """Parameters and names bound by the statements that run before ``node`` on its path from
        the top of the function (earlier statements of each enclosing block, loop targets), plus
        those bound in enclosing loops (values from earlier iterations)."""
        found = set(N.parameters(self.func))
        path = _path_to(self.func, node)
        if path is None:  # not reachable through statement blocks: every earlier line counts
            for sub in ast.walk(self.func):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.lineno < node.lineno:
                    found.add(sub.id)
        for parent, block, index in path or []:
            found |= N.stored_names(block[:index])
            if isinstance(parent, (ast.For, ast.AsyncFor)):
                found |= N.stored_names([parent.target])
        for loop in self.loops:
            found |= N.stored_names(loop.body)
        return found

    def rebound_before_read(self, node: ast.stmt, name: str) -> bool:
        """True when, after the statement ``node`` (outside any loop), ``name`` is assigned anew
        (``name = <expression not reading name>``) in ``node``'s block before anything reads or
        conditionally binds it: the value ``node`` leaves in ``name`` is never read. A later loop
        binding ``name`` as its target (``for name in <not reading name>``), its body then reading
        its own value, reads it only where nothing after that loop does (it may run no step): in
        the function's own block, or before an assignment as above."""
        path = _path_to(self.func, node)
        if self.loops or not path:
            return False
        _, block, index = path[-1]
        for s in block[index + 1:]:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                    and s.targets[0].id == name:
                return name not in N.loaded_names([s.value])
            if isinstance(s, (ast.For, ast.AsyncFor)) and name in N.stored_names([s.target]) \
                    and name not in N.loaded_names([s.iter, *s.orelse]):
                continue
            if name in N.loaded_names([s]) or name in N.stored_names([s]):
                return False
        return len(path) == 1

    def used_after(self, node: ast.AST) -> set[str]:
        """Names read after ``node`` ends, or anywhere in an enclosing loop (its next iteration)."""
        found = set()
        for sub in ast.walk(self.func):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.lineno > node.end_lineno:
                found.add(sub.id)
        for loop in self.loops:  # read by the enclosing loop's next iteration (outside ``node``)
            stack = [loop]
            while stack:
                sub = stack.pop()
                if sub is node:
                    continue
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                    found.add(sub.id)
                stack.extend(ast.iter_child_nodes(sub))
        return {n for n in found if not n.startswith(N.GENERATED_PREFIX)}


_BLOCKS = ("body", "orelse", "finalbody", "handlers")


def _path_to(root: ast.AST, node: ast.AST) -> list | None:
    """``[(parent, block, index), ...]`` from ``root`` down to the statement ``node``, or None."""
    for name in _BLOCKS:
        block = getattr(root, name, None)
        if not isinstance(block, list):
            continue
        for k, s in enumerate(block):
            if s is node:
                return [(root, block, k)]
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            sub = _path_to(s, node)
            if sub is not None:
                return [(root, block, k)] + sub
    return None


def _located(stmts: list[ast.stmt], node: ast.AST) -> list[ast.stmt]:
    for s in stmts:
        for sub in ast.walk(s):
            if not hasattr(sub, "lineno") or getattr(sub, "lineno", None) is None:
                ast.copy_location(sub, node)
        ast.fix_missing_locations(s)
    return stmts


class _BlockRewriter:
    """Walks the statement blocks of one function, innermost constructs first."""

    def __init__(self, ctx: FunctionContext):
        self.ctx = ctx

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        from onnxport.rewrite import branches, loops, while_loops

        out: list[ast.stmt] = []
        for k, s in enumerate(stmts):
            if isinstance(s, (ast.For, ast.While)):
                self.ctx.loops.append(s)
                s.body = self.block(s.body)
                self.ctx.loops.pop()
                s.orelse = self.block(s.orelse)
                rewrite = loops.rewrite_for if isinstance(s, ast.For) else while_loops.rewrite_while
                replacement = rewrite(s, self.ctx)
                out.extend(_located(replacement, s) if replacement is not None else [s])
            elif isinstance(s, ast.If):
                flagged = flag_tails.applies(s, stmts[k + 1:], bool(self.ctx.loops))
                pristine = flag_tails.merged(s, stmts[k + 1:]) if flagged else None
                mark = len(self.ctx.notes)
                s.body = self.block(s.body)
                s.orelse = self.block(s.orelse)
                rest = self.block(stmts[k + 1:])
                replacement, consumed = branches.rewrite_if(s, rest, self.ctx)
                if replacement is None and pristine is not None:  # the rest under each side of the flag
                    merged = self._flag_tail(s, pristine, mark)
                    if merged is not None:
                        return out + _located(merged, s)
                if replacement is None:
                    return out + [s] + rest
                out.extend(_located(replacement, s))
                return out if consumed else out + rest
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                s.body = self.block(s.body)
                out.append(s)
            elif isinstance(s, ast.Try):
                s.body = self.block(s.body)
                s.orelse = self.block(s.orelse)
                s.finalbody = self.block(s.finalbody)
                out.append(s)
            elif branches.bound_condition(s, stmts[k + 1:]) is not None:
                self.ctx.note(s, "if", True, f"the condition bound to '{s.targets[0].id}' kept symbolic")
                out.append(s)
            else:
                out.append(s)
        return out

    def _flag_tail(self, s: ast.If, pristine: ast.If, mark: int) -> list[ast.stmt] | None:
        """``pristine`` (``flag_tails.merged`` of ``s`` and the rest of its block) rewritten as one
        ``torch.cond``, the notes from ``mark`` on replaced by its own; None, the notes of the first
        attempt kept, when it is not taken either."""
        from onnxport.rewrite import branches

        first = self.ctx.notes[mark:]
        del self.ctx.notes[mark:]
        again = flag_tails.sizes_again(self.ctx.func, s, [pristine.body, pristine.orelse])
        pristine.body = self.block(copy.deepcopy(again) + pristine.body)
        pristine.orelse = self.block(again + pristine.orelse)
        merged, _ = branches.rewrite_if(pristine, [], self.ctx, own_writes=True)
        if merged is None:
            self.ctx.notes[mark:] = first
            return None
        self.ctx.notes[-1].detail = f"torch.cond (the rest of the function under each side of '{s.test.id}', " \
                                    f"which it tests again)"
        # a construct of the rest is in both sides: one note for it
        unique = {(n.construct, n.where, n.rewritten, n.detail): n for n in self.ctx.notes[mark:]}
        self.ctx.notes[mark:] = list(unique.values())
        return merged


class _StackCalls(ast.NodeTransformer):
    """``torch.stack(L, ...)`` / ``torch.cat(L, ...)`` on a list filled by a rewritten loop ->
    ``loops.stack_rows`` / ``loops.cat_rows`` (which take the scan's stacked outputs)."""

    def __init__(self, lists: set[str]):
        self.lists = lists

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr in STACKING and isinstance(f.value, ast.Name)
                and f.value.id == "torch" and node.args and isinstance(node.args[0], ast.Name)
                and node.args[0].id in self.lists):
            node.func = ast.copy_location(ast.Attribute(
                ast.Name(f"{N.GENERATED_PREFIX}loops", ast.Load()), STACKING[f.attr], ast.Load()), f)
        return node


class _SuperAndMangling(ast.NodeTransformer):
    """``super()`` -> ``super(<class>, self)`` and ``self.__x`` -> ``self._Class__x`` (the recompiled
    function lives outside its class body, where Python would do both implicitly)."""

    def __init__(self, cls_name: str, first_arg: str | None):
        self.cls_name = cls_name.lstrip("_")
        self.first_arg = first_arg

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args and self.first_arg:
            node.args = [ast.Name(f"{N.GENERATED_PREFIX}class", ast.Load()), ast.Name(self.first_arg, ast.Load())]
            for a in node.args:
                ast.copy_location(a, node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr.startswith("__") and not node.attr.endswith("__") and self.cls_name:
            node.attr = f"_{self.cls_name}{node.attr}"
        return node


def rewrite_function(fn: Callable, cls: type | None, notes: list, calls: dict | None = None) -> Callable | None:
    """Rewrite the control flow of one function; return the new function, or None when nothing changed.

    ``fn`` is a plain function (a method taken from its class); ``cls`` its class (for ``super()``).
    ``calls``: module-level functions ``fn`` calls by name, rewritten (name -> new function): the
    new function calls those instead. Notes about every construct seen are appended to ``notes``.

    Raises:
        ControlFlowError: ``fn``'s source file, as it reads now, does not compile to the code running
            (edited after import, or other source compiled under the file's name): a rewrite of it
            would compute something else (``onnxport.rewrite.running_source``).
    """
    fn = library_function(fn)
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as e:
        notes.append(RewriteNote("function", getattr(fn, "__qualname__", str(fn)), False,
                                 f"source not available ({e})"))
        return None
    if not runs_file(fn.__code__, fn.__globals__):
        where = f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno} in {fn.__name__}"
        raise ControlFlowError(
            f"{fn.__qualname__}: its source file differs from the code running (edited after import?), "
            "so its control flow is not rewritten", where=where,
            hint=f"re-import the module (or restart the process) so {fn.__code__.co_filename} and the "
                 "code running agree")
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef):
        return None
    func.decorator_list = []
    apply_forms(func, fn.__module__)  # the library's statement forms its capture patches give the function
    ctx = FunctionContext(func, filename)
    func.body = comprehensions.hoisted(func.body, ctx)
    func.body = _BlockRewriter(ctx).block(func.body)
    RangeTensors(ctx).visit(func)
    notes.extend(ctx.notes)
    calls = {k: v for k, v in (calls or {}).items() if k in _global_calls(func)}
    if not any(n.rewritten for n in ctx.notes) and not calls:
        return None
    if ctx.stacked_lists:
        _StackCalls(ctx.stacked_lists).visit(func)
    first_arg = func.args.args[0].arg if func.args.args else None
    _SuperAndMangling(cls.__name__ if cls is not None else "", first_arg).visit(func)
    from onnxport.rewrite import branches, loops, while_loops

    # The helpers and the original closure variables become closure cells of the new function
    # (not globals): it keeps the original module's globals, which torch.compile guards on.
    free = {f"{N.GENERATED_PREFIX}loops": loops, f"{N.GENERATED_PREFIX}while_loops": while_loops,
            f"{N.GENERATED_PREFIX}branches": branches, f"{N.GENERATED_PREFIX}class": cls}
    free.update(inspect.getclosurevars(fn).nonlocals)
    free.update(calls)
    factory = ast.FunctionDef(name=f"{N.GENERATED_PREFIX}factory", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(k) for k in free], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[func, ast.Return(ast.Name(func.name, ast.Load()))], decorator_list=[], returns=None,
        type_params=[])
    tree.body = [ast.copy_location(factory, func)]
    ast.fix_missing_locations(tree)
    code = compile(tree, filename, "exec")
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    new = types.FunctionType(factory_code, fn.__globals__)(*free.values())
    new.__qualname__ = fn.__qualname__
    new.__defaults__ = fn.__defaults__
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def _global_calls(func: ast.FunctionDef) -> set[str]:
    """Names ``func`` calls as ``name(...)`` that it neither takes as a parameter nor binds itself:
    module-level functions (or builtins)."""
    local = set(N.parameters(func)) | N.stored_names(func.body)
    return {node.func.id for node in ast.walk(func)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in local}


def _has_loop(fn: Callable) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    return any(isinstance(node, (ast.For, ast.While)) or comprehensions.taken(node) for node in ast.walk(tree))


def rewritten_calls(fn: Callable, notes: list, cache: dict) -> dict[str, Callable]:
    """The module-level functions ``fn`` calls by name that hold a loop or call (at any depth) one
    that does, rewritten: name -> the rewritten function (``cache``: function -> rewritten or None),
    e.g. a selective scan written as a Python loop in a function the model's ``forward`` calls, or
    behind a dispatcher between kernels (RWKV's ``rwkv_linear_attention``). Functions of torch and onnxport are
    left as they are; a decorated function is rewritten unwrapped (its decorator, such as a kernel
    dispatcher, is not called)."""
    fn = library_function(fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return {}
    func = tree.body[0] if tree.body and isinstance(tree.body[0], ast.FunctionDef) else None
    if func is None:
        return {}
    out = {}
    for name in sorted(_global_calls(func)):
        target = fn.__globals__.get(name)
        target = library_function(target) if callable(target) else None
        if not isinstance(target, types.FunctionType) or (target.__module__ or "").startswith(("torch", "onnxport")):
            continue
        if target not in cache:
            cache[target] = None  # a recursive call sees the function as it is
            try:
                # a function without a loop is followed within its caller's module only (not into
                # library utilities such as transformers' import checks)
                looped = _has_loop(target)
                inner = rewritten_calls(target, notes, cache) if looped or target.__module__ == fn.__module__ else {}
                new = rewrite_function(target, None, notes, inner) if inner or looped else None
            except (SyntaxError, ValueError, TypeError, AttributeError, KeyError, IndexError,
                    ControlFlowError) as e:
                notes.append(RewriteNote("function", f"{target.__code__.co_filename}:{target.__code__.co_firstlineno} "
                                         f"in {target.__name__}", False, f"not rewritten ({type(e).__name__}: {e})"))
                new = None
            cache[target] = new
        if cache[target] is not None:
            out[name] = cache[target]
    return out


def _called_methods(fn: Callable, cls: type) -> list[str]:
    """Names of the methods of ``cls`` that ``fn`` calls as ``self.name(...)``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
            attr = inspect.getattr_static(cls, node.func.attr, None)
            if isinstance(attr, types.FunctionType) and node.func.attr not in found:
                found.append(node.func.attr)
    return found


def _rewrite_class_methods(cls: type, notes: list, cache: dict) -> type | None:
    """A subclass of ``cls`` whose ``forward`` and the methods it calls are rewritten; None if unchanged."""
    if cls in cache:
        return cache[cls]
    cache[cls] = None
    if cls.__module__.startswith("torch.") or inspect.getattr_static(cls, "forward", None) is None:
        return None
    todo, seen, methods = ["forward"], set(), {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        fn = inspect.getattr_static(cls, name, None)
        if not isinstance(fn, types.FunctionType) or (fn.__module__ or "").startswith("torch."):
            continue  # torch's own methods (inherited forward of Sequential...) are left as they are
        try:
            new = rewrite_function(fn, cls, notes, rewritten_calls(fn, notes, cache.setdefault("functions", {})))
        except (SyntaxError, ValueError, TypeError, AttributeError, KeyError, IndexError, ControlFlowError) as e:
            # a source form the rewriter does not understand: the method keeps its original code
            notes.append(RewriteNote("function", f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno} in "
                                     f"{fn.__name__}", False, f"not rewritten ({type(e).__name__}: {e})"))
            new = None
        if new is not None:
            methods[name] = new
        todo.extend(_called_methods(fn, cls))
    if methods:
        cache[cls] = type(cls.__name__, (cls,), {**methods, "__module__": cls.__module__,
                                                 "__qualname__": cls.__qualname__})
    return cache[cls]


def rewrite_tree(model: torch.nn.Module, notes: list) -> torch.nn.Module:
    """Shallow copy of ``model`` (and of each ancestor of a rewritten submodule) with rewritten
    methods; parameters and buffers are shared, the original modules are left untouched."""
    classes: dict = {}
    memo: dict = {}

    def visit(m: torch.nn.Module, force: bool) -> torch.nn.Module:
        if id(m) in memo:
            return memo[id(m)]
        children = {name: visit(c, False) if c is not None else None for name, c in m._modules.items()}
        new_cls = _rewrite_class_methods(type(m), notes, classes)
        changed = any(children[k] is not m._modules[k] for k in children)
        if new_cls is None and not changed and not force:
            memo[id(m)] = m
            return m
        clone = copy.copy(m)
        clone.__dict__["_modules"] = children
        if new_cls is not None:
            clone.__class__ = new_cls
        memo[id(m)] = clone
        return clone

    return visit(model, True)


def warn_notes(notes: list) -> None:
    """One warning listing the constructs left as Python, if any."""
    left = [n for n in notes if not n.rewritten]
    if left:
        more = f"\n  ... {len(left) - 10} more in .onnxport_rewrite_notes" if len(left) > 10 else ""
        warnings.warn("control flow left as Python by rewrite_control_flow:\n  "
                      + "\n  ".join(str(n) for n in left[:10]) + more, stacklevel=3)

