"""A view's sizes in the form the model asked for them, where torch's own form of an equal size is longer.

torch computes the sizes of ``view`` / ``reshape`` (``torch._refs._reshape_view_helper``, the fake
tensor's kernel of ``aten.view``) by splitting and merging the input's dims; a dim it splits off is the
quotient ``size // outer``. Swin's window partition views a padded map ``H`` (a multiple of the window,
``h + (12 - h % 12) % 12``) as ``view(b, H // 12, 12, W // 12, 12, c)``: the 12 comes out as
``H // (H // 12)``, which torch checks against the 12 asked for (a guard it decides) but keeps. Each
later view, attention and reversal of the windows nests these quotients, and torch's reasoning on them
(value ranges, static evaluation, runtime assertions) took most of a Swin backbone's capture: one
MaskFormer-Swin block 9 s in plain torch.export, its four-stage backbone minutes.

``VIEW_SIZES_AS_ASKED`` (a registered capture patch) gives the view the size asked for where torch's is
a longer expression that torch itself finds equal to it (``guard_or_false``: the comparison its algorithm
already made), in the sizes and in the strides that hold it. A view's result has the sizes asked for
whenever the view succeeds (PyTorch's ``Tensor.view``: "the returned tensor ... has the requested
size"), so nothing the trace decides changes; only the form torch reasons on is shorter. The block
captures in under 3 s; ``-1`` (a size torch infers) is left as torch computes it.

Semantics: ``torch.Tensor.view`` (the result has the requested shape); ``torch._refs._reshape_view_helper``.
"""

from __future__ import annotations

from typing import Callable

import sympy
import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register


def _expr(size: "int | torch.SymInt") -> sympy.Basic:
    return size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(size)


def shorter_forms(got: tuple, asked: list) -> dict:
    """``{torch's expression: the asked one}`` for each dim of a view whose result size ``got[i]`` (a
    ``SymInt``) torch finds equal to ``asked[i]`` (an int other than -1, or a ``SymInt``) where the asked
    form has fewer operations (``sympy.count_ops``)."""
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    swap = {}
    for size, want in zip(got, asked):
        if not isinstance(size, torch.SymInt) or (not isinstance(want, torch.SymInt) and want == -1):
            continue
        old, new = _expr(size), _expr(want)
        if old == new or sympy.count_ops(new) >= sympy.count_ops(old):
            continue
        if guard_or_false(size == want):
            swap[old] = new
    return swap


def _rewritten(value: "int | torch.SymInt", swap: dict, shape_env) -> "int | torch.SymInt":
    """``value`` with each expression of ``swap`` replaced in its own (an int where that leaves a number)."""
    if not isinstance(value, torch.SymInt):
        return value
    expr = value.node.expr.xreplace(swap)
    if expr == value.node.expr:
        return value
    if expr.is_Integer:
        return int(expr)
    return shape_env.create_symintnode(expr, hint=value.node.hint)


def _make(original: Callable) -> Callable:
    from torch._prims_common import extract_shape_from_varargs

    def _reshape_view_helper(a, *shape, allow_copy: bool):
        out = original(a, *shape, allow_copy=allow_copy)
        asked = extract_shape_from_varargs(shape, validate=False)
        if len(asked) != out.ndim:
            return out
        swap = shorter_forms(tuple(out.shape), list(asked))
        if not swap:
            return out
        env = next(s.node.shape_env for s in out.shape if isinstance(s, torch.SymInt))
        sizes = [_rewritten(s, swap, env) for s in out.shape]
        strides = [_rewritten(s, swap, env) for s in out.stride()]
        return out.as_strided(sizes, strides, out.storage_offset())

    return _reshape_view_helper


def _changes() -> list:
    import torch._refs as refs

    if not hasattr(refs, "_reshape_view_helper"):
        return []  # a torch whose view kernel is elsewhere: left as it is
    return [SetAttribute(refs, "_reshape_view_helper", _make)]


VIEW_SIZES_AS_ASKED = register(Patch(
    "view sizes as asked", _changes,
    "torch's view / reshape kernel on fake tensors: a result size torch computed as a longer expression "
    "equal to the size asked for (Swin's windows: H // (H // 12) for 12) takes the asked form, in sizes and "
    "strides, so later reasoning does not nest the quotients", when=always, order=15))
