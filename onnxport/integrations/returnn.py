"""Capture hooks for RETURNN models: what changes in RETURNN while torch.export traces one.

``capture_hooks()`` is a context manager for ``to_onnx(..., capture_hooks=capture_hooks)``. For the
duration of one trace it replaces these RETURNN functions, each by one computing the same values
with sizes kept symbolic, and restores every one on exit (also when tracing raises); outside it,
and for any model exported without it, nothing changes:

- ``returnn.frontend.array_.convert_to_tensor`` (``rf.convert_to_tensor``, ``rf.constant``): takes a
  symbolic size (the batch size read from a traced tensor's shape) as it takes an ``int``;
- ``returnn.tensor._dim_extra._DimMixin.get_dim_value`` / ``get_dim_value_tensor``: the value of a
  dynamic dim is the padded tensor's size along it (RETURNN: ``reduce_max`` of its lengths, a
  data-dependent size torch.export cannot reshape by), dims made by dim math derived from those
  sizes, ceil-division in torch's form ``(a - 1) // b + 1``;
- ``returnn.tensor.tensor_dict.TensorDict.assign_from_raw_tensor_dict_``: also notes the raw
  inputs' sizes for the above;
- ``returnn.frontend._cache._dim_value_for_key``: keys ``rf.Cache`` entries (the relative positional
  encoding) by the size tensor's identity, as under ``rf.set_static_traceable_ctx(True)``, instead of
  reading the lengths on the host (``.numpy()``), which traced tensors cannot.

RETURNN's own code then never asserts a size to be an ``int`` (``get_dim_value``) nor hashes one
(the cache key of a scalar size) while tracing. The exported model computes what RETURNN eager
computes on batches padded to their longest sequence, which is how RETURNN batches its data.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch

from onnxport.capture.patches import Patch, SetAttribute, installed, register
from onnxport.integrations.returnn_dims import DimValues, assign_recording, dim_value_methods

_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _convert_to_tensor(original: Callable) -> Callable:
    """``rf.convert_to_tensor`` taking a symbolic size (``torch.SymInt``: the batch size read from a
    traced tensor's shape) as the 0-d tensor of its value, as it takes a Python ``int``.

    Replaces ``returnn.frontend.array_.convert_to_tensor``, which looks up a backend by the value's
    type and finds none for ``torch.SymInt``. Same dtype rules (``rf.get_default_int_dtype()`` for
    an int unless ``dtype`` is given) and device as the ``int`` path (``torch.full``)."""
    import returnn.frontend as rf
    from returnn.torch.frontend._backend import TorchBackend

    def convert_to_tensor(value, *args, **kwargs):
        if isinstance(value, _SYM):
            dtype = kwargs.get("dtype") or (
                "bool" if isinstance(value, torch.SymBool) else
                rf.get_default_int_dtype() if isinstance(value, torch.SymInt) else rf.get_default_float_dtype())
            device = kwargs.get("device") or rf.get_default_device()
            if kwargs.get("keep_scalar_on_cpu"):
                device = "cpu"
            raw = torch.full((), value, dtype=TorchBackend.as_dtype_raw(dtype), device=device)
            kwargs = {**kwargs, "dtype": dtype, "device": device}
            kwargs.setdefault("dims", ())
            kwargs.pop("keep_scalar_on_cpu", None)
            return original(raw, *args, **kwargs)
        return original(value, *args, **kwargs)

    return convert_to_tensor


def _cache_key_by_identity(original: Callable) -> Callable:
    """``_dim_value_for_key`` keying a dim's lengths by the identity of its size tensor, as RETURNN
    does under ``rf.set_static_traceable_ctx(True)``.

    Wraps ``returnn.frontend._cache._dim_value_for_key``, which on an eager CPU backend keys
    ``rf.Cache`` entries (the relative positional encoding of self-attention) by the lengths'
    values, read on the host (``.numpy()``): traced tensors have no values. Under the static
    traceable flag it keys by the size tensor's identity instead ("value-free, so still correct",
    RETURNN's comment there); the flag is on for that function only, nothing else sees it."""
    import returnn.frontend as rf

    def dim_value_for_key(dim, *args, **kwargs):
        with rf.set_static_traceable_ctx(True):
            return original(dim, *args, **kwargs)

    return dim_value_for_key


def _returnn_changes(values: DimValues) -> list:
    """The changes listed in the module docstring, recording into ``values``."""
    import returnn.frontend as rf
    from returnn.frontend import _cache, array_
    from returnn.tensor import TensorDict
    from returnn.tensor._dim_extra import _DimMixin

    convert = _convert_to_tensor(array_.convert_to_tensor)
    dim_value, dim_value_tensor = dim_value_methods(values, _DimMixin.get_dim_value, _DimMixin.get_dim_value_tensor)
    replaced = [(array_, "convert_to_tensor", convert), (array_, "constant", convert),
                (rf, "convert_to_tensor", convert), (rf, "constant", convert), (_DimMixin, "get_dim_value", dim_value),
                (_DimMixin, "get_dim_value_tensor", dim_value_tensor),
                (TensorDict, "assign_from_raw_tensor_dict_",
                 assign_recording(values, TensorDict.assign_from_raw_tensor_dict_)),
                (_cache, "_dim_value_for_key", _cache_key_by_identity(_cache._dim_value_for_key))]
    return [SetAttribute(owner, name, lambda _original, f=f: f) for owner, name, f in replaced]


RETURNN_TRACEABLE = register(Patch(
    "RETURNN traceable", _returnn_changes,
    "returnn.frontend convert_to_tensor / constant, _DimMixin.get_dim_value(_tensor), "
    "TensorDict.assign_from_raw_tensor_dict_, _cache._dim_value_for_key: sizes kept symbolic while a RETURNN "
    "model is traced (see the module docstring)", None))


@contextlib.contextmanager
def capture_hooks() -> Iterator[None]:
    """Replace, while torch.export traces a RETURNN model, the RETURNN functions listed in this
    module's docstring (``RETURNN_TRACEABLE``, a registered capture patch); restore them on exit,
    also on errors. Raises ``ReturnnError`` when RETURNN is not installed."""
    from onnxport.integrations.returnn_forward import require_returnn

    require_returnn()
    with installed(RETURNN_TRACEABLE.using(DimValues())):
        yield
