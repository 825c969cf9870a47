"""Side-effect tokens: ``with_effects(token, op, *args)`` runs ``op`` for its outputs only.

torch.export threads a token through ops with side effects (``aten._linalg_check_errors``, prints,
asserts) so they keep their order. ONNX has no side effects: the token is dropped, ops run only for
their effect become nothing, other ops are translated as usual.
"""

from __future__ import annotations

import torch

from onnxport.errors import UnsupportedOpError
from onnxport.translate.registry import translates

_EFFECT_ONLY = {"_linalg_check_errors", "_print", "_assert_async", "_assert_scalar", "_functional_assert_async"}


@translates(torch.ops.aten._linalg_check_errors.default)
def linalg_check_errors(ctx, *args, **kwargs):
    """_linalg_check_errors(Tensor info, str api_name, *, bool is_matrix): an error check, called
    without a token where a decomposition inlines it; nothing in ONNX, which cannot raise."""
    return None


@translates(torch.ops.higher_order.with_effects)
def with_effects(ctx, token, op, *args, **kwargs):
    """with_effects(token, op, *args) -> (token, *outputs of op)."""
    name = getattr(op, "__name__", str(op)).split(".")[0]
    if name in _EFFECT_ONLY:
        return (None,)
    fn = ctx.registry.lookup(op)
    if fn is None:
        raise UnsupportedOpError(f"no ONNX translation for {op} (run with a side-effect token)",
                                 hint=f"register one with @onnxport.translates({op})")
    out = fn(ctx, *args, **kwargs)
    return (None, *out) if isinstance(out, (tuple, list)) else (None, out)
