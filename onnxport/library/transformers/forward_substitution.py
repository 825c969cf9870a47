"""The row-by-row forward substitution of the chunked delta rules (gated DeltaNet: Qwen3-Next,
Qwen3.5, OLMo-Hybrid; Kimi delta attention: Kimi-Linear, GLM-5-Next, Bailing-Hybrid...), captured as
a blocked triangular inverse.

Inside each chunk of ``chunk_size`` tokens these models invert a unit lower triangular matrix, for
torch.export row by row (transformers' ``torch_chunk_gated_delta_rule`` and
``chunk_kimi_delta_attention``)::

    for i in range(1, chunk_size):
        row = attn[..., i, :i].clone()
        sub = attn[..., :i, :i].clone()
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)

With ``L`` the strictly lower triangle of ``attn``, the loop leaves in that triangle the one of
``(I - L)^-1`` (row ``i`` of the inverse is row ``i`` of ``L`` plus its combination of the rows
above, already inverted), and ``attn``'s other entries as they were. Traced, it is ``chunk_size - 1``
(63) steps of slices, products and writes on every chunk of every layer: minutes of capture and a
graph of hundreds of nodes per layer.

While tracing, the loop becomes one ``torch.linalg.solve_triangular`` of ``I - L`` and the identity
(the op the models' eager path calls), which onnxport translates by doubling inverted diagonal blocks
(``translate/ops/triangular.py``): ``log2(chunk_size)`` steps of batched MatMuls. Its error is that
of a triangular solve (within 1.3e-7 of the float64 inverse relative to its largest entry, as the
loop, on keys correlated enough that the inverse's power series ``(I + L)(I + L^2)...`` loses
9e1, which is why that series is not used).

``FORWARD_SUBSTITUTION`` (a registered capture patch) gives each loaded transformers function holding
that loop, while torch.export traces, a variant computing ``attn``'s new strictly lower triangle with
``substituted`` (written into ``attn`` in place, as the loop writes it, or bound to ``attn`` where the
statement before made ``attn`` a new tensor, which nothing else can see) where ``attn`` is
``chunk_size`` by ``chunk_size``, the loop otherwise. The same form applies where the rewrite of
Python control flow compiles the function (``onnxport.source_forms``).

Semantics: transformers' ``models/qwen3_next/modeling_qwen3_next.py`` (``torch_chunk_gated_delta_rule``,
whose eager path is ``torch.linalg.solve_triangular(..., upper=False, unitriangular=True)``), and
``models/kimi_linear/modeling_kimi_linear.py`` (``chunk_kimi_delta_attention``).
"""

from __future__ import annotations

import ast

from onnxport.capture.patches import Patch, always, register
from onnxport.library.transformers import MODELS, function_variants
from onnxport.source_forms import register_form


def substituted(attn, n: int, upper_zero: bool = False):
    """What the row-by-row loop leaves in ``attn`` (``[..., n, n]`` float): with ``L`` its strictly
    lower triangle and ``K`` the rest (diagonal and above, which the loop reads but keeps), the new
    strictly lower triangle is ``(I - L)^-1 (L + tril(L K, -1))``, i.e. ``tril((I - L)^-1, -1) +
    (I - L)^-1 tril(L K, -1)``; ``upper_zero``: ``K`` is known to be zero (the code zeroed it), the
    second term and ``K`` are left out. ``(I - L)^-1`` is ``torch.linalg.solve_triangular`` of the unit
    lower triangular ``I - L`` and the identity: one op to trace, translated by doubling
    (``onnxport.translate.ops.triangular``). ``n``: ``attn``'s size, the loop's bound (a Python int):
    the identity's size, static where a traced size of ``attn`` may be an expression torch does not
    reduce to it (``P // (P // 64)`` of a length ``P`` padded to a multiple of 64)."""
    import torch

    eye = torch.eye(n, dtype=attn.dtype, device=attn.device)
    inverse = torch.linalg.solve_triangular(-attn, eye, upper=False, unitriangular=True)  # reads -L only
    if upper_zero:
        return torch.tril(inverse, -1)
    upper = torch.triu(attn)
    return torch.tril(inverse, -1) + inverse @ torch.tril(torch.tril(attn, -1) @ upper, -1) + upper


_LOOP = ("{row} = {x}[..., {i}, :{i}].clone()",
         "{sub} = {x}[..., :{i}, :{i}].clone()",
         "{x}[..., {i}, :{i}] = {row} + ({row}.unsqueeze(-1) * {sub}).sum(-2)")


def _upper_zeroed(before: list[ast.stmt], x: str, bound: str) -> bool:
    """Whether the statement right before the loop (last of ``before``) leaves ``x`` zero on and above
    its diagonal: ``x = [-]<expr>.tril(-1)``, or ``x = [-]<expr>.masked_fill(mask, 0)`` with ``mask``
    last assigned ``torch.triu(torch.ones(bound, bound, ...), diagonal=0)``."""
    if not before or not isinstance(before[-1], ast.Assign) or ast.unparse(before[-1].targets[0]) != x:
        return False
    value = before[-1].value
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    args = [ast.unparse(a) for a in value.args] + [ast.unparse(k) for k in value.keywords]
    if value.func.attr == "tril":
        return args in (["-1"], ["diagonal=-1"])
    if value.func.attr != "masked_fill" or len(args) != 2 or args[1] not in ("0", "0.0") \
            or not isinstance(value.args[0], ast.Name):
        return False
    mask = value.args[0].id
    made = [s.value for s in before[:-1] if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == mask]
    if not made or not isinstance(made[-1], ast.Call) or ast.unparse(made[-1].func) != "torch.triu":
        return False
    triu = made[-1]
    ones = triu.args[0] if triu.args else None
    diagonal = [ast.unparse(a) for a in triu.args[1:]] + [ast.unparse(k) for k in triu.keywords]
    return (isinstance(ones, ast.Call) and ast.unparse(ones.func) == "torch.ones"
            and [ast.unparse(a) for a in ones.args] == [bound, bound] and diagonal in (["diagonal=0"], ["0"]))


def _substitution(loop: ast.stmt, before: list[ast.stmt]) -> list[ast.stmt] | None:
    """The statements replacing ``loop`` (after the statements ``before`` it in its block) where it is
    the row-by-row substitution; None otherwise."""
    if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and not loop.orelse
            and len(loop.body) == 3 and isinstance(loop.iter, ast.Call) and ast.unparse(loop.iter.func) == "range"
            and len(loop.iter.args) == 2 and ast.unparse(loop.iter.args[0]) == "1" and not loop.iter.keywords):
        return None
    first, second = loop.body[0], loop.body[1]
    if not (isinstance(first, ast.Assign) and isinstance(second, ast.Assign)
            and isinstance(first.targets[0], ast.Name) and isinstance(second.targets[0], ast.Name)
            and isinstance(first.value, ast.Call) and isinstance(first.value.func, ast.Attribute)
            and isinstance(first.value.func.value, ast.Subscript)):
        return None
    names = {"i": loop.target.id, "row": first.targets[0].id, "sub": second.targets[0].id,
             "x": ast.unparse(first.value.func.value.value)}
    if [ast.unparse(s) for s in loop.body] != [line.format(**names) for line in _LOOP]:
        return None
    x, i, bound = names["x"], names["i"], ast.unparse(loop.iter.args[1])
    zero = _upper_zeroed(before, x, bound)
    # where the statement before made x (a new tensor, not a view), nothing else sees x: it is bound to
    # the result; otherwise the result is written into x, as the loop writes it
    result = (f"{x} = _onnxport_substituted({x}, {bound}, upper_zero=True)" if zero else
              f"{x}.copy_(_onnxport_substituted({x}, {bound}))")
    code = (f"if {bound} > 1 and {x}.shape[-1] == {bound} and {x}.shape[-2] == {bound}:\n"
            f"    from {__name__} import substituted as _onnxport_substituted\n"
            f"    {result}\n"
            f"    {i} = {bound} - 1\n"
            f"else:\n    pass\n")
    new = ast.parse(code).body
    for node in ast.walk(new[0]):
        ast.copy_location(node, loop)  # the generated lines are the loop's (errors and guards name it)
    new[0].orelse = [loop]
    return new


def blocked_inverse(func: ast.FunctionDef) -> bool:
    """Replace the row-by-row substitution loops of ``func`` by the blocked inverse (the loop kept
    where the matrix is not ``bound`` by ``bound``); whether one was found."""
    loops = [(block, stmt) for node in ast.walk(func) for field in ("body", "orelse")
             for block in [getattr(node, field, None)] if isinstance(block, list)
             for stmt in block if isinstance(stmt, ast.For)]
    found = False
    for block, loop in loops:
        at = next(k for k, s in enumerate(block) if s is loop)
        new = _substitution(loop, block[:at])
        if new is not None:
            block[at:at + 1] = new
            found = True
    return found


register_form(blocked_inverse, modules=(MODELS,))


def _changes() -> list:
    return function_variants(blocked_inverse, reads=frozenset({"range", "clone", "unsqueeze", "sum"}))


FORWARD_SUBSTITUTION = register(Patch(
    "row-by-row triangular substitution as a blocked inverse", _changes,
    "transformers' chunked delta rules (torch_chunk_gated_delta_rule, chunk_kimi_delta_attention): while "
    "torch.export traces, the loop inverting each chunk's unit lower triangular matrix row by row (chunk_size - 1 "
    "traced steps) is the same inverse computed by doubling inverted diagonal blocks (log2(chunk_size) steps); "
    "nothing happens where no loaded transformers function holds that loop", when=always, order=233))
