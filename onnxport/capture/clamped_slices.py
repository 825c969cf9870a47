"""A slice bound that may fall outside a dynamic axis is clamped as Python clamps it, not decided.

``x[:, -16:]`` over an axis of symbolic size ``n`` starts at ``n - 16`` where ``n >= 16`` and at 0 below
(Python's and PyTorch's slicing clamp a bound to ``[0, n]``). torch's fake kernel of ``aten.slice.Tensor``
(``torch._subclasses.fake_impls._compute_slice_index``) decides which case holds from the example and keeps
the decision as a guard (``n >= 16``), so the export would require what the model does not: a streaming
model whose attention cache is ``cat([cache, chunk])[:, -16:]`` runs from an empty cache, where ``n < 16``.

``CLAMPED_SLICES`` answers only what the declared ranges already prove, as the kernel does, and otherwise
gives the bound its clamped form, ``Max(n + index, 0)`` for a negative bound and ``Min(index, n)`` for a
non-negative one: the result's size is then that expression (``Min(n, 16)``) and no guard is kept. The
translation needs nothing more: ONNX ``Slice`` clamps its ``starts`` / ``ends`` to ``[0, dim]`` after
adding ``dim`` to a negative one, as PyTorch does. A bound whose sign the ranges do not tell (a symbolic
``index``) is left to torch's kernel. Eager execution is unchanged.

Semantics: PyTorch's ``Tensor.__getitem__`` and ``torch.narrow`` (basic slicing clamps its bounds); ONNX
``Slice`` (https://onnx.ai/onnx/operators/onnx__Slice.html, "clamped to [0, dims[axes[i]]]").
"""

from __future__ import annotations

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register


def _clamped(original):
    def _compute_slice_index(size, index):
        from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_and

        if not isinstance(size, torch.SymInt) or isinstance(index, torch.SymInt):
            return original(size, index)
        if statically_known_true(sym_and(index >= 0, index <= size)):
            return index
        if statically_known_true(sym_and(index < 0, index >= -size)):
            return index + size
        if statically_known_true(index < -size):
            return 0
        if statically_known_true(index > size):
            return size
        if index >= 0:
            return torch.sym_min(index, size)
        return torch.sym_max(index + size, 0)

    return _compute_slice_index


def _changes() -> list:
    import torch._subclasses.fake_impls as fake_impls

    return [SetAttribute(fake_impls, "_compute_slice_index", _clamped)]


CLAMPED_SLICES = register(Patch(
    "clamped slice bounds", _changes,
    "torch._subclasses.fake_impls: a constant slice bound that may fall outside a dynamic axis (x[:, -16:]) "
    "gets its clamped form (Max(n - 16, 0)) instead of a guard on the example's side", when=always, order=14))
