"""torch.export's failure on a data-dependent size, in the user's terms.

A size computed from data (``u0``: the rows a boolean mask keeps, ``nonzero``, NMS) is unknown
while torch.export traces; a condition on it (``if kept.numel() > 4000:``) cannot be decided and
torch raises ``GuardOnDataDependentSymNode``. ``data_dependent_error`` names the size as the user's
code made it (``kept.shape[0]``, the count of ``kept = boxes[keep]`` at line 6), the condition in
those terms, the line that needs it, and the fixes that apply there:

- ``torch._check(...)`` of a bound before that line, when the count has one (the condition is
  then decided);
- ``torch.cond`` for a branch of the user's own code (both sides exported as an ONNX If);
- leaving the count dynamic where the code fixes it to the example's (``view(-1, ...)``), when
  torch must decide the count equals a constant.

Semantics: ``torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode`` (``cond``: the
sympy condition; ``partial_fx_graph``: the graph traced so far, printed by torch).
"""

from __future__ import annotations

import re
import traceback
from typing import Any

import sympy

from onnxport.capture.guards.conditions import in_installed_package
from onnxport.errors import DataDependentError, last_user_frame

_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=(?!=)")
_VALUE = re.compile(r'^\s*\w+: "\w+\[([^\]]*)\]"')


def is_data_dependent(e: BaseException) -> bool:
    """torch's ``GuardOnDataDependentSymNode``, with the condition it could not decide."""
    return type(e).__name__ == "GuardOnDataDependentSymNode" and isinstance(getattr(e, "cond", None), sympy.Basic)


def _code(where: str | None) -> str:
    """The code of a ``file:line in func: code`` line."""
    return where.split(": ", 1)[1].strip() if where and ": " in where else ""


def _short(where: str | None) -> str:
    """``nms.py:6`` of a ``/path/nms.py:6 in forward: code`` line."""
    if not where:
        return "an unknown line"
    path, _, rest = where.partition(":")
    return f"{path.rsplit('/', 1)[-1]}:{rest.split(' ', 1)[0]}"


def _axis(symbol: Any, graph: str) -> int | None:
    """The axis of the first value of torch's partial graph whose shape holds ``symbol`` alone."""
    for line in graph.splitlines():
        m = _VALUE.match(line)
        if m:
            dims = [d.strip() for d in m.group(1).split(",")]
            if str(symbol) in dims:
                return dims.index(str(symbol))
    return None


def user_names(cond: sympy.Basic, unbacked: list, graph: str) -> dict:
    """torch's data-dependent symbol -> ``(name in the user's terms, the user's line that made it)``:
    ``kept.shape[0]`` when the line assigns a name and the graph shows the axis, else ``u0``."""
    out = {}
    for s in sorted(getattr(cond, "free_symbols", ()), key=str):
        made = next((u for u in unbacked if str(u.symbol) == str(s)), None)
        if made is None:
            continue
        m, axis = _ASSIGNED.match(_code(made.where)), _axis(s, graph)
        name = f"{m.group(1)}.shape[{axis}]" if m and axis is not None else str(s)
        out[s] = (name, made.where)
    return out


def _bound(cond: sympy.Basic, symbol: Any) -> sympy.Basic:
    """``not cond``, solved for ``symbol`` when it is linear in it (``4*u0 > 4000`` -> ``u0 <= 1000``)."""
    negated = sympy.Not(cond)
    if not isinstance(negated, sympy.core.relational.Relational):
        return negated
    diff = sympy.expand(negated.lhs - negated.rhs)
    a, b = diff.coeff(symbol, 1), diff.subs(symbol, 0)
    if not (a.is_Integer and b.is_Number and a != 0 and (b / a).is_Integer) or diff.free_symbols != {symbol}:
        return negated
    op = type(negated) if a > 0 else type(negated.reversed)
    return op(symbol, -b / a)


def _non_empty(cond: sympy.Basic, symbol: Any) -> bool:
    """``cond`` says the count ``symbol`` is at least 1 or 2 (``u0 > 0``, ``u0 >= 1``, ``u0 > 1``): its negation,
    a count of 0 or 1, is seldom the model's case."""
    if not isinstance(cond, (sympy.StrictGreaterThan, sympy.GreaterThan)) or cond.lhs != symbol:
        return False
    low = cond.rhs + (1 if isinstance(cond, sympy.StrictGreaterThan) else 0)
    return low.is_Integer and 1 <= int(low) <= 2


def _in_user_terms(expr: sympy.Basic, names: dict) -> str:
    return str(expr.xreplace({s: sympy.Symbol(n) for s, (n, _) in names.items()}))


def _fixes(cond: sympy.Basic, names: dict, where: str | None) -> str:
    code = _code(where)
    library = bool(where) and in_installed_package(where)
    symbol = next(iter(names), None)
    bound = _in_user_terms(_bound(cond, symbol) if symbol is not None else sympy.Not(cond), names)
    before = "the call" if library else "this line"
    if symbol is not None and _non_empty(cond, symbol):  # "u0 > 0": the count is rarely meant to be 0
        fixes = [f"if the count is never that small, state it before {before} with torch._check("
                 f"{_in_user_terms(cond, names)}) (torch.export then decides the condition)"]
    else:
        fixes = [f"if the count is bounded that way, state it before {before} with torch._check({bound}) "
                 f"(torch.export then decides the condition)"] if names else []
    if re.match(r"(if|elif|while)\b", code) or " if " in code:
        fixes.append("to keep both sides, write the branch with torch.cond(pred, true_fn, false_fn, operands) "
                     "(exported as an ONNX If)")
    if isinstance(cond, (sympy.Eq, sympy.Ne)) and any(not a.free_symbols for a in cond.args):
        fixes.append("if this count is an output's size, leave it dynamic (reshape with -1, not the example's count): "
                     "the ONNX output keeps it as a dynamic dimension")
    return "; ".join(fixes) or "compute with the tensor itself instead of reading its value into Python"


def data_dependent_error(e: BaseException, unbacked: list) -> DataDependentError:
    """The ``DataDependentError`` of torch's failure ``e`` (``unbacked``: the data-dependent sizes
    recorded while it traced, ``guards.record.Unbacked``)."""
    cond = e.cond
    names = user_names(cond, unbacked, getattr(e, "partial_fx_graph", "") or "")
    where = last_user_frame("".join(traceback.format_list(traceback.extract_tb(e.__traceback__))))
    read = [u for u in unbacked if u.boolean and any(str(u.symbol) == str(s) for s in cond.free_symbols)]
    if read:
        return _bool_of_data_error(e, read[0], where)
    made = "; ".join(f"{n} is the count of `{_code(w)}` at {_short(w)}" for n, w in names.values())
    code = _code(where)
    branch = re.match(r"(if|elif|while)\b", code)
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if not (cond.is_Relational or isinstance(cond, sympy.logic.boolalg.BooleanFunction)):
        what = (f"the model needs a value known only when it runs as a Python number: `{code}`"
                + (f" ({made})" if made else ""))
        return DataDependentError(what, where=where, hint=_number_fixes(code), detail=first)
    if branch and not names:  # ``if tensor:``: torch's condition is on the tensor's value, 0 or 1
        what = f"the model branches on a tensor's value, known only when it runs (`{code}`)"
    else:
        what = (f"the model {'branches on' if branch else 'needs to decide'} a size known only when it runs: "
                f"{_in_user_terms(cond, names)}" + (f" ({made})" if made else ""))
    return DataDependentError(what, where=where, hint=_fixes(cond, names, where), detail=first)


def _number_fixes(code: str) -> str:
    """The fixes for a line that makes a data-dependent size a Python ``int`` / ``float``."""
    fixes = []
    if re.search(r"\bint\(.*\.item\(\)\s*\)", code):  # onnxport keeps it symbolic where it finds the line's module
        fixes.append("drop the int() around .item(): .item() of an integer tensor already is a size torch.export "
                     "keeps symbolic")
    elif re.search(r"\b(int|float)\(", code):
        fixes.append("write .item() instead of int(...) / float(...) on the tensor: torch.export keeps its value "
                     "symbolic (a size the ONNX model computes)")
    fixes.append("or compute with the tensor itself (keep it a tensor where it is used)")
    return "; ".join(fixes)


def _bool_of_data_error(e: BaseException, made: Any, where: str | None) -> DataDependentError:
    """A branch on a Python bool read from tensor data (``flag = mask.any().item()``, then
    ``if flag:``): which side runs is known only when the model runs, so the export needs both
    sides as an ONNX If (``torch.cond``)."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    library = bool(where) and in_installed_package(where)
    what = (f"the model branches on a bool read from the inputs' data, `{_code(made.where)}` at {_short(made.where)}: "
            f"which side runs is known only when the model runs")
    hint = ("write the branch with torch.cond(pred, true_fn, false_fn, operands) (exported as an ONNX If; its "
            "branches may not write into their inputs in place)")
    if library:
        hint = ("the branch is in the library's code, where torch.cond cannot be written in: export a model whose "
                "inputs always take one side (and call the path of that side), or " + hint[0].lower() + hint[1:]
                + " in a copy of the library's function")
    return DataDependentError(what, where=where, hint=hint, detail=first, bool_of_data=made.where)
