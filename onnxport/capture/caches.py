"""Cache objects of Hugging Face transformers as model inputs and outputs.

A decoder called the way Hugging Face users call it, ``model(input_ids=..., attention_mask=...,
past_key_values=DynamicCache(...), use_cache=True)``, takes its key/value cache as an object and
returns the grown cache as an object. torch.export traces through objects registered as pytree
nodes; this module registers transformers' dynamic cache classes so that each flattens to its
tensors under stable names, layer by layer:

* ``DynamicCache``: ``0.key``, ``0.value``, ``1.key``... (``[batch, kv_heads, length, head_dim]``);
  linear-attention layers (Mamba, hybrid models) ``0.conv_state``, ``0.recurrent_state``;
* ``EncoderDecoderCache``: ``0.decoder.key``, ``0.decoder.value``, ``0.encoder.key``,
  ``0.encoder.value``... (self-attention, then cross-attention, per layer).

As ONNX inputs they are named ``past_key_values.<leaf>`` and as outputs ``present.<leaf>``
(``onnxport.translate.program``), the names onnxruntime-genai and optimum use.

Sliding-window layers are exported holding the whole sequence, like full-attention layers; the
window is applied by the attention mask (``onnxport/library/transformers/cache_utils.py``: active
while torch.export traces and while validation runs the eager model). A trace cannot keep transformers' Python token
counter of a sliding layer, nor cut the cache to the window, without fixing the sequence length.

Semantics: ``transformers.cache_utils`` (DynamicCache, DynamicLayer, DynamicSlidingWindowLayer,
LinearAttentionLayer, EncoderDecoderCache), transformers 5.x; pytree nodes as
``torch.utils._pytree.register_pytree_node`` documents them.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from typing import Any

import torch
from torch.utils import _pytree as pytree

from onnxport.errors import CaptureError, DynamicShapesError

INPUT_PREFIX = "past_key_values"  # ONNX name prefix of a cache given as input
OUTPUT_PREFIX = "present"  # ... and of a cache returned as output
CACHE_PARAMETERS = ("past_key_values", "cache", "cache_params")  # forward() parameter names of a cache
_INIT_KWARGS = ("sliding_window", "number_of_states")
_REGISTERED: set[type] = set()


@dataclasses.dataclass(frozen=True)
class CacheKey(pytree.MappingKey):
    """The pytree key of one tensor inside a cache: its stable name (``0.key``, ``1.decoder.value``)
    as the mapping key (torch.export reads the keys of its inputs' paths as mapping, sequence or
    attribute keys)."""

    @property
    def name(self) -> str:
        return str(self.key)

    def get(self, cache: Any) -> Any:
        return dict(cache_leaves(cache))[self.key]


def _cache_utils() -> Any:
    return sys.modules.get("transformers.cache_utils")


def is_cache(value: Any) -> bool:
    """True for an instance of a cache class this module flattens (a transformers ``DynamicCache``
    or ``EncoderDecoderCache``, or a subclass)."""
    cu = _cache_utils()
    return cu is not None and isinstance(value, (cu.DynamicCache, cu.EncoderDecoderCache))


def register_caches() -> None:
    """Register transformers' dynamic cache classes (and their subclasses) as pytree nodes, once.

    Does nothing when transformers is not imported. A class already registered by someone else
    (transformers' own exporter) keeps that registration; its tensors are then named by position.
    """
    cu = _cache_utils()
    if cu is None:
        return
    pending = [cu.DynamicCache, cu.EncoderDecoderCache]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls in _REGISTERED or cls in pytree.SUPPORTED_NODES:
            continue
        pytree.register_pytree_node(cls, _flatten, _unflatten,
                                    serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
                                    flatten_with_keys_fn=_flatten_with_keys)
        _REGISTERED.add(cls)


# ------------------------------------------------------------------------------ one layer
def _layer_slots(layer: Any) -> list[tuple[str, Any]]:
    """``[(slot name, tensor)]`` of one cache layer: ``key``/``value`` of an attention layer,
    ``conv_state``/``recurrent_state`` (``_1``... for further states) of a linear-attention layer."""
    cu = _cache_utils()
    slots = []
    if isinstance(layer, cu.LinearAttentionCacheLayerMixin):
        for kind, table, flags in (("conv_state", layer.conv_states, layer.is_conv_states_initialized),
                                   ("recurrent_state", layer.recurrent_states, layer.is_recurrent_states_initialized)):
            for idx in sorted(table):
                if flags.get(idx) and table[idx] is not None:
                    slots.append((kind if idx == 0 else f"{kind}_{idx}", table[idx]))
    if isinstance(layer, cu.DummyLayer):
        return slots
    if isinstance(layer, cu.DynamicIndexedLayer):
        raise CaptureError(f"cache layers of type {type(layer).__name__} (sparse-attention indexer caches) cannot be "
                           "model inputs yet", hint="export the model without a cache (use_cache=False)")
    if hasattr(layer, "keys") and getattr(layer, "is_initialized", False) and layer.keys is not None \
            and not (isinstance(layer.keys, torch.Tensor) and layer.keys.dim() < 2):
        slots += [("key", layer.keys), ("value", layer.values)]
    return slots


def _layer_context(layer: Any, names: tuple) -> tuple:
    """What rebuilds a layer besides its tensors: class, constructor arguments, slots, flags."""
    params = inspect.signature(type(layer).__init__).parameters
    init = tuple((k, getattr(layer, k)) for k in _INIT_KWARGS if k in params and hasattr(layer, k))
    flags = ()
    if hasattr(layer, "has_previous_state"):
        flags = (("has_previous_state", tuple(sorted(layer.has_previous_state.items()))),
                 ("conv_kernel_size", tuple(sorted(layer.conv_kernel_size.items()))))
    return type(layer), init, names, flags


def _make_layer(context: tuple, tensors: list) -> Any:
    cls, init, names, flags = context
    layer = cls(**dict(init))
    first = next((t for t in tensors if isinstance(t, torch.Tensor)), None)
    for name, t in zip(names, tensors):
        kind, _, idx = name.partition("_state")
        if name in ("key", "value"):
            setattr(layer, "keys" if name == "key" else "values", t)
            layer.is_initialized = True
        else:
            i = int(idx[1:]) if idx else 0
            table, initialized = ((layer.conv_states, layer.is_conv_states_initialized) if kind == "conv" else
                                  (layer.recurrent_states, layer.is_recurrent_states_initialized))
            table[i], initialized[i] = t, True
    for attr, items in flags:
        setattr(layer, attr, dict(items))
    if first is not None:
        layer.device = first.device
        if hasattr(layer, "dtype"):
            layer.dtype = first.dtype
        if hasattr(layer, "cumulative_length") and "key" in names:
            layer.cumulative_length = layer.keys.shape[-2]
        if hasattr(layer, "_sliding_window_tensor"):
            layer._sliding_window_tensor = layer._sliding_window_tensor.to(first.device)
    return layer


# ------------------------------------------------------------------------------ whole caches
def _dynamic_leaves(cache: Any) -> tuple[list[tuple[str, Any]], tuple]:
    leaves, layers = [], []
    for i, layer in enumerate(cache.layers):
        slots = _layer_slots(layer)
        leaves += [(f"{i}.{name}", t) for name, t in slots]
        layers.append(_layer_context(layer, tuple(name for name, _ in slots)))
    return leaves, (type(cache), getattr(cache, "layer_class_to_replicate", None), tuple(layers))


def _make_dynamic(context: tuple, tensors: list) -> Any:
    cu = _cache_utils()
    cls, replicate, layers = context
    cache = cls.__new__(cls)
    it = iter(tensors)
    built = [_make_layer(ctx, [next(it) for _ in ctx[2]]) for ctx in layers]
    cu.Cache.__init__(cache, layers=None if not built else built,
                      layer_class_to_replicate=(replicate or cu.DynamicLayer) if not built else None)
    return cache


def cache_leaves(cache: Any) -> list[tuple[str, Any]]:
    """``[(name, tensor)]`` of a cache, in the order it flattens: ``0.key``, ``0.value``... for a
    ``DynamicCache``; ``0.decoder.key``, ``0.decoder.value``, ``0.encoder.key``... for an
    ``EncoderDecoderCache``."""
    return _flatten_named(cache)[0]


def _flatten_named(cache: Any) -> tuple[list[tuple[str, Any]], tuple]:
    cu = _cache_utils()
    if isinstance(cache, cu.EncoderDecoderCache):
        own, own_ctx = _dynamic_leaves(cache.self_attention_cache)
        cross, cross_ctx = _dynamic_leaves(cache.cross_attention_cache)
        by_layer: dict[int, list] = {}
        for part, leaves in (("decoder", own), ("encoder", cross)):
            for name, t in leaves:
                layer, _, slot = name.partition(".")
                by_layer.setdefault(int(layer), []).append((f"{layer}.{part}.{slot}", t))
        merged = [leaf for i in sorted(by_layer) for leaf in by_layer[i]]
        return merged, (type(cache), own_ctx, cross_ctx, tuple(n for n, _ in merged))
    return _dynamic_leaves(cache)


def _flatten(cache: Any) -> tuple[list, Any]:
    leaves, context = _flatten_named(cache)
    return [t for _, t in leaves], context


def _flatten_with_keys(cache: Any) -> tuple[list, Any]:
    leaves, context = _flatten_named(cache)
    return [(CacheKey(name), t) for name, t in leaves], context


def _unflatten(values: Any, context: Any) -> Any:
    values = list(values)
    cu = _cache_utils()
    if len(context) == 4 and issubclass(context[0], cu.EncoderDecoderCache):
        cls, own_ctx, cross_ctx, names = context
        own = [v for n, v in zip(names, values) if ".decoder." in n]
        cross = [v for n, v in zip(names, values) if ".encoder." in n]
        cache = cls.__new__(cls)
        cache.self_attention_cache = _make_dynamic(own_ctx, own)
        cache.cross_attention_cache = _make_dynamic(cross_ctx, cross)
        cache.is_updated = {i: bool(ctx[2]) for i, ctx in enumerate(cross_ctx[2])}
        return cache
    return _make_dynamic(context, values)


# ------------------------------------------------------------------------------ dynamic shapes
def expand_spec(cache: Any, spec: Any, where: str) -> Any:
    """The dynamic-shapes spec of a cache input as torch.export takes it: one entry per tensor.

    ``spec`` may be None; one tensor spec for every tensor (``{0: "batch", 2: "past"}``); a dict by
    kind (``{"key": ..., "value": ...}``, ``{"decoder": ..., "encoder": ...}``, ``{"conv_state": ...,
    "recurrent_state": ...}``); one entry per layer (each of these forms, or one spec per tensor of
    the layer); or one spec per tensor in flattening order.
    Raises ``DynamicShapesError`` for another form.
    """
    leaves = [name for name, _ in cache_leaves(cache)]
    if spec is None:
        return None
    bad = DynamicShapesError(
        f"dynamic_shapes for the cache {where!r} ({type(cache).__name__}, {len(leaves)} tensors) must be one "
        f"tensor spec for all its tensors, a dict by kind, one entry per layer or one spec per tensor; got {spec!r}",
        hint=f"e.g. {{{where!r}: {{0: 'batch', 2: 'past'}}}}; its tensors are {', '.join(leaves)}")

    def one(entry: Any, names: list[str]) -> list:
        if entry is None or (isinstance(entry, dict) and all(isinstance(k, int) for k in entry)):
            return [entry] * len(names)
        if isinstance(entry, dict):
            parts = {p for n in names for p in n.split(".")[1:]}
            if set(entry) - parts:
                raise bad
            return [next((entry[p] for p in n.split(".")[1:] if p in entry), None) for n in names]
        if isinstance(entry, (list, tuple)) and len(entry) == len(names):
            return list(entry)
        raise bad

    if isinstance(spec, (list, tuple)) and len(spec) != len(leaves):
        layers = sorted({int(n.split(".")[0]) for n in leaves})
        if len(spec) != len(layers):
            raise bad
        out = []
        for layer, entry in zip(layers, spec):
            out += one(entry, [n for n in leaves if int(n.split(".")[0]) == layer])
        return out
    return one(spec, leaves)


def is_cache_leaf(input_name: str) -> bool:
    """True for the flat name of a tensor of a cache input (``past_key_values.0.key``)."""
    parts = input_name.split(".")
    return len(parts) >= 3 and parts[1].isdigit()


def may_be_empty(input_name: str) -> bool:
    """True for the flat name of a self-attention key or value of a cache input
    (``past_key_values.0.key``, ``past_key_values.0.decoder.value``): its cached length (axis -2)
    is 0 at the first step of decoding. Cross-attention tensors (``.encoder.``) and recurrent states
    are never empty."""
    parts = input_name.split(".")
    return len(parts) >= 3 and parts[-1] in ("key", "value") and parts[1].isdigit() and "encoder" not in parts


def cache_input_name(parameter: str) -> str:
    """The ONNX name prefix of a cache passed as ``parameter``: ``past_key_values`` for the names
    transformers uses for it (``past_key_values``, ``cache``, ``cache_params``), else the parameter."""
    return INPUT_PREFIX if parameter in CACHE_PARAMETERS else parameter
