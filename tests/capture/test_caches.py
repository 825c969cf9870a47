"""transformers' cache classes as inputs and outputs: flattened to named tensors and rebuilt, their
dynamic-shapes specs given once for all layers; forward(**kwargs) inputs passed as keywords."""

import pytest
import torch
from torch.utils import _pytree as pytree

import onnxport
from exportcheck import check_export
from onnxport.capture.caches import cache_leaves, expand_spec, may_be_empty, register_caches

transformers = pytest.importorskip("transformers")
from transformers import DynamicCache, EncoderDecoderCache  # noqa: E402
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer  # noqa: E402


def _filled(layers: int, past: int, cache=None) -> DynamicCache:
    cache = cache if cache is not None else DynamicCache()
    for i in range(layers):
        cache.update(torch.randn(2, 2, past, 4), torch.randn(2, 2, past, 4), i)
    return cache


def test_a_dynamic_cache_flattens_to_named_tensors_and_is_rebuilt_equal():
    register_caches()
    cache = _filled(2, 3)
    leaves, spec = pytree.tree_flatten(cache)
    assert [n for n, _ in cache_leaves(cache)] == ["0.key", "0.value", "1.key", "1.value"]
    rebuilt = pytree.tree_unflatten([t + 1 for t in leaves], spec)
    assert isinstance(rebuilt, DynamicCache) and len(rebuilt.layers) == 2
    for old, new in zip(cache.layers, rebuilt.layers):
        assert (type(new) is DynamicLayer and torch.equal(new.keys, old.keys + 1)
                and torch.equal(new.values, old.values + 1))
    assert rebuilt.get_seq_length() == 3


def test_sliding_window_layers_keep_their_window_when_rebuilt():
    register_caches()
    cfg = transformers.MistralConfig(num_hidden_layers=2, sliding_window=5, hidden_size=16, num_attention_heads=2,
                                     num_key_value_heads=2, intermediate_size=16, vocab_size=10)
    cache = _filled(2, 3, DynamicCache(config=cfg))
    leaves, spec = pytree.tree_flatten(cache)
    rebuilt = pytree.tree_unflatten(leaves, spec)
    assert [type(layer) for layer in rebuilt.layers] == [DynamicSlidingWindowLayer] * 2
    assert [layer.sliding_window for layer in rebuilt.layers] == [5, 5]
    assert rebuilt.get_seq_length() == 3


def test_an_encoder_decoder_cache_names_self_and_cross_attention_per_layer():
    register_caches()
    cache = EncoderDecoderCache(_filled(2, 3), _filled(2, 7))
    names = [n for n, _ in cache_leaves(cache)]
    assert names[:4] == ["0.decoder.key", "0.decoder.value", "0.encoder.key", "0.encoder.value"] and len(names) == 8
    leaves, spec = pytree.tree_flatten(cache)
    rebuilt = pytree.tree_unflatten(leaves, spec)
    assert rebuilt.self_attention_cache.get_seq_length() == 3 and rebuilt.cross_attention_cache.get_seq_length() == 7
    assert rebuilt.is_updated == {0: True, 1: True}
    assert [may_be_empty(f"past_key_values.{n}") for n in names[:4]] == [True, True, False, False]


@pytest.mark.parametrize("spec,expected", [
    ({0: "b", 2: "p"}, [{0: "b", 2: "p"}] * 8),
    ({"decoder": {2: "p"}, "encoder": {2: "e"}}, [{2: "p"}, {2: "p"}, {2: "e"}, {2: "e"}] * 2),
    ([{2: "p"}, {2: "q"}], [{2: "p"}] * 4 + [{2: "q"}] * 4),
])
def test_one_spec_names_the_dims_of_every_layer(spec, expected):
    register_caches()
    cache = EncoderDecoderCache(_filled(2, 3), _filled(2, 7))
    assert expand_spec(cache, spec, "past_key_values") == expected


def test_a_spec_naming_what_the_cache_does_not_hold_is_refused():
    register_caches()
    with pytest.raises(onnxport.DynamicShapesError, match="past_key_values"):
        expand_spec(_filled(2, 3), {"decoder": {2: "p"}}, "past_key_values")
    with pytest.raises(onnxport.DynamicShapesError):
        expand_spec(_filled(2, 3), [{2: "p"}] * 3, "past_key_values")


class Appender(torch.nn.Module):
    """A decoder step in miniature: appends the new keys to the cache, returns the cache."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, **kwargs):
        cache = kwargs["past_key_values"]
        out = None
        for i in range(len(cache.layers)):
            k, v = cache.update(self.proj(x), x * (i + 1), i)
            out = k.sum(2) + v.mean(2) if out is None else out + k.sum(2)
        return {"out": out, "cache": cache}


@pytest.mark.slow
def test_a_cache_passed_through_kwargs_exports_with_stable_names_and_validates():
    cache = _filled(2, 3)
    x = torch.randn(2, 2, 2, 4)
    r = check_export(Appender(), (x,), {"x": {0: "batch", 2: "seq"}, "past_key_values": {0: "batch", 2: "past"}},
                     kwargs={"past_key_values": cache},
                     expect_inputs={"past_key_values.1.value": ["batch", 2, "past", 4]},
                     expect_outputs={"present.0.key": ["batch", 2, "past + seq", 4], "out": ["batch", 2, 4]})
    assert [v.name for v in r.model.graph.inputs] == ["x", "past_key_values.0.key", "past_key_values.0.value",
                                                      "past_key_values.1.key", "past_key_values.1.value"]
    empty = [c for c in r.validate().checks if c.why.startswith("empty")]
    assert empty and all(c.ok for c in empty) and "past=0" in empty[0].sizes
