"""Whether the control-flow rewrite leaves one ``if`` of the model's source as Python, asked of the source alone.

Capture refuses a branch of the model's code on a remainder of sizes (``if dim % 8 != 0:``) at the
first capture, and the export then rewrites the model's control flow and captures it again: the
rewrite may carry the branch (``torch.cond``, or a pad to a whole multiple run at every size). Where
it leaves that ``if`` as Python (diffusers' UNet: ``for dim in sample.shape[-2:]: if dim %
default_overall_up_factor != 0: forward_upsample_size = True; break``, a ``break`` inside the
branch), the second capture meets the same branch and reads it as a condition the model needs
(``capture.steps._remainder_left``): capturing again changes nothing for it.

``left_as_python(where)`` runs the rewriter's block walk (``module._BlockRewriter``, as
``rewrite_function`` does, on a copy) over the function holding the user's line ``where`` (``file:line
in func: code``, the line of the ``if``'s condition), read from its file, and answers from the notes it
takes: True where the ``if`` is noted left as Python and no construct enclosing it is rewritten;
False where it, or a construct around it, is rewritten, or the source cannot be read. Nothing is
compiled or run.
"""

from __future__ import annotations

import ast
import copy
import functools
import os
import re

from onnxport.rewrite import comprehensions
from onnxport.rewrite.module import FunctionContext, _BlockRewriter

_WHERE = re.compile(r"^(.*):(\d+) in (\w+)")


def left_as_python(where: str | None) -> bool:
    """Whether the rewrite of the model's control flow leaves the ``if`` whose condition is at the
    user's line ``where`` (``file:line in func: code``) as Python, the constructs around it too (see the
    module's docstring); False where it may rewrite it or the source cannot be read."""
    match = _WHERE.match(where or "")
    if match is None:
        return False
    path, line, name = match.group(1), int(match.group(2)), match.group(3)
    try:
        changed = os.stat(path).st_mtime_ns
    except OSError:
        return False
    return _left(path, line, name, changed)


@functools.lru_cache(maxsize=256)
def _left(path: str, line: int, name: str, changed: int) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return False
    funcs = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             and f.name == name and f.lineno <= line <= f.end_lineno]
    if not funcs or isinstance(funcs[-1], ast.AsyncFunctionDef):
        return False
    func = funcs[-1]  # the innermost of that name
    target = next((n for n in ast.walk(func) if isinstance(n, ast.If) and n.test.lineno <= line <= n.test.end_lineno),
                  None)
    if target is None:
        return False
    around = {n.lineno for n in ast.walk(func) if isinstance(n, (ast.If, ast.For, ast.While))
              and n is not target and n.lineno <= target.lineno and target.end_lineno <= n.end_lineno}
    try:
        copied = copy.deepcopy(func)
        ctx = FunctionContext(copied, path)
        copied.body = comprehensions.hoisted(copied.body, ctx)
        _BlockRewriter(ctx).block(copied.body)
    except Exception:  # noqa: BLE001 - a form the rewriter fails on says nothing of the branch
        return False
    notes = {}
    for note in ctx.notes:
        at = int(note.where.rsplit(" in ", 1)[0].rsplit(":", 1)[1])
        notes.setdefault(at, []).append(note.rewritten)
    own = notes.get(target.lineno, [])
    return bool(own) and not any(own) and not any(any(notes.get(n, ())) for n in around)
