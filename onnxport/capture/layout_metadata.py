"""Memory-layout metadata that decides no size.

Whenever torch.export records an op, it stores the result's metadata on the FX node
(``torch.fx.passes.shape_prop._extract_tensor_metadata``), which asks whether the result is contiguous in
each memory format. For a view of symbolic sizes that question is a size condition: ``x[:, -16:]`` of
``x = torch.cat([cache, chunk], 1)`` has stride ``4 * (cache + chunk)`` and is contiguous only where
``cache + chunk == 16``, and torch decides such a condition from the example and keeps it as a guard. An
example whose sizes sit on that boundary (a cache of 8 and a chunk of 8) then makes ``chunk`` the relation
``16 - cache`` and the output 16 frames long at every size, though the model computes a clamped slice
there: the metadata's memory format decided the export.

ONNX has no memory layout; the metadata's ``memory_format`` feeds nothing onnxport translates.
``LAYOUT_METADATA`` answers the question from the example as before, with the shape environment's
guards suppressed, so that it keeps no condition on any size. Eager execution is unchanged.

Semantics: ``torch.fx.passes.shape_prop.TensorMetadata`` (informational metadata of an FX node).
"""

from __future__ import annotations

import torch

from onnxport.capture.patches import Patch, SetAttribute, always, register


def _shape_env(t: torch.Tensor):
    for s in (*t.shape, *t.stride()):
        if isinstance(s, torch.SymInt):
            return s.node.shape_env
    return None


def _unguarded(original):
    def is_contiguous_for_memory_format_or_false(a, *args, **kwargs):
        env = _shape_env(a) if isinstance(a, torch.Tensor) and not a.is_sparse else None
        if env is None:
            return original(a, *args, **kwargs)
        with env.suppress_guards():
            return original(a, *args, **kwargs)

    return is_contiguous_for_memory_format_or_false


def _changes() -> list:
    import torch.fx.passes.shape_prop as shape_prop

    return [SetAttribute(shape_prop, "is_contiguous_for_memory_format_or_false", _unguarded)]


LAYOUT_METADATA = register(Patch(
    "layout metadata decides no size", _changes,
    "torch.fx.passes.shape_prop: whether a traced result is contiguous (FX node metadata, no part of the ONNX "
    "model) is answered with the shape environment's guards suppressed, so that a view whose stride meets its "
    "size only at the example (x[:, -16:] of a cache + chunk of 16) does not fix a size", when=always, order=13))
