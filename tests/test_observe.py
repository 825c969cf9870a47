"""``onnxport.observe``: dynamic shapes written from observed calls. The axes that varied are dynamic and
named by their role (no ``s0``), equal-varying axes share a name, a sum of two dims is a relation,
constant axes stay static, and the spec exports and validates in onnxruntime against eager."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
from torch.utils import _pytree as pytree

import onnxport


def dims_of(value) -> list:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def all_names(spec) -> set[str]:
    if isinstance(spec, str):
        return {spec}
    if isinstance(spec, dict):
        return set().union(set(), *(all_names(v) for v in spec.values()))
    if isinstance(spec, (list, tuple)):
        return set().union(set(), *(all_names(v) for v in spec))
    return set()


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, pixel_values):
        x = torch.relu(self.conv2(torch.relu(self.conv1(pixel_values))))
        return self.head(x.mean((2, 3)))


def test_a_cnn_at_three_image_sizes_has_a_static_batch_and_named_height_and_width():
    torch.manual_seed(0)
    model = SmallCNN().eval()
    with onnxport.observe(model) as seen:
        for h, w in [(32, 48), (40, 24), (64, 64)]:
            model(torch.randn(2, 3, h, w))
    assert seen.dynamic_shapes == {"pixel_values": {2: "height", 3: "width"}}
    assert seen.relations == {}
    assert seen.args[0].shape[2] != seen.args[0].shape[3]  # not the call where height == width hides which is which
    result = onnxport.to_onnx(model, seen.args, kwargs=seen.kwargs, dynamic_shapes=seen.dynamic_shapes,
                              relations=seen.relations)
    assert dims_of(result.model_proto.graph.input[0]) == [2, 3, "height", "width"]
    report = result.validate()
    assert report.ok, report
    assert len({c.sizes for c in report.checks}) > 2  # other heights and widths than the example's


class Pair(torch.nn.Module):
    def forward(self, x, y, scale):
        return x * y.sum(-1, keepdim=True) * scale


def test_axes_varying_together_share_a_name_and_constant_axes_stay_static():
    model = Pair()
    with onnxport.observe(model) as seen:
        for n, t in [(2, 5), (3, 9), (4, 7)]:
            model(torch.randn(n, t), torch.randn(n, 6), torch.tensor(2.0))
    assert seen.dynamic_shapes == {"x": {0: "batch", 1: "length"}, "y": {0: "batch"}}
    assert seen.sizes == {"batch": (2, 3, 4), "length": (5, 9, 7)}
    result = onnxport.to_onnx(model, **seen.arguments)
    assert [dims_of(i) for i in result.model_proto.graph.input] == [["batch", "length"], ["batch", 6], []]
    assert result.validate().ok


class Tokens(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)

    def forward(self, batch: dict):
        return (self.embed(batch["input_ids"]) * batch["attention_mask"][..., None]).sum(1)


def test_a_dict_input_is_spec_d_in_its_own_structure_with_token_names():
    model = Tokens().eval()
    with onnxport.observe(model) as seen:
        for b, s in [(2, 5), (3, 7), (1, 9)]:
            model({"input_ids": torch.randint(0, 50, (b, s)), "attention_mask": torch.ones(b, s)})
    assert seen.dynamic_shapes == {"batch": {"input_ids": {0: "batch", 1: "seq"},
                                             "attention_mask": {0: "batch", 1: "seq"}}}
    result = onnxport.to_onnx(model, **seen.arguments)
    assert [dims_of(i) for i in result.model_proto.graph.input] == [["batch", "seq"], ["batch", "seq"]]
    assert result.validate().ok


@dataclasses.dataclass
class Features:
    feats: torch.Tensor
    lengths: torch.Tensor


pytree.register_dataclass(Features)


class Pooled(torch.nn.Module):
    def forward(self, batch: Features):
        return batch.feats.sum(-1) * batch.lengths[:, None]


def test_a_registered_dataclass_is_spec_d_as_its_children_and_keeps_the_names():
    model = Pooled()
    with onnxport.observe(model) as seen:
        for b, t in [(2, 7), (3, 9), (4, 5)]:
            model(Features(torch.randn(b, t, 10), torch.ones(b)))
    assert seen.dynamic_shapes == {"batch": [{0: "batch", 1: "time"}, {0: "batch"}]}
    result = onnxport.to_onnx(model, **seen.arguments)
    inputs = {i.name: dims_of(i) for i in result.model_proto.graph.input}
    assert inputs == {"batch_feats": ["batch", "time", 10], "batch_lengths": ["batch"]}
    assert result.validate().ok


def test_the_example_is_the_least_degenerate_call_and_its_inputs_as_they_were():
    class Grows(torch.nn.Module):
        def forward(self, x, state: list):
            state.append(x.sum())  # the call changes its input in place
            return x * len(state)

    model = Grows()
    with onnxport.observe(model) as seen:
        for n in (1, 6, 0, 4):
            model(torch.ones(n, 3), [])
    assert seen.args[0].shape == (6, 3)  # neither 0 nor 1, the first such call
    assert seen.args[1] == []  # as the call began, not as the call left it
    assert seen.dynamic_shapes == {"x": {0: "batch"}}


@pytest.mark.parametrize("shape,expected", [
    ((2, 32, 48, 3), {1: "height", 2: "width"}),  # channels last: the constant last axis of 3
    ((2, 1, 32, 48), {2: "height", 3: "width"}),
])
def test_image_layouts_name_height_and_width(shape, expected):
    model = torch.nn.Identity()
    with onnxport.observe(model) as seen:
        for dh, dw in [(0, 0), (8, -16), (16, 8)]:
            size = list(shape)
            h, w = (1, 2) if shape[-1] == 3 else (2, 3)
            size[h] += dh
            size[w] += dw
            model(torch.randn(size))
    assert seen.dynamic_shapes == {"input": expected}


def test_audio_inputs_name_time_and_the_config_names_features():
    class Speech(torch.nn.Module):
        config = type("Config", (), {"num_mel_bins": 80})()

        def forward(self, input_features, input_values):
            return input_features.mean() + input_values.mean()

    model = Speech()
    with onnxport.observe(model) as seen:
        for b, t in [(2, 100), (3, 160), (4, 120)]:
            model(torch.randn(b, 80, t), torch.randn(b, 16 * t))
    # two times that differ: the second named after its input
    assert seen.dynamic_shapes == {"input_features": {0: "batch", 2: "time"},
                                   "input_values": {0: "batch", 1: "input_values_time"}}


def test_no_call_and_a_function_are_errors_naming_the_line():
    with onnxport.observe(torch.nn.Identity()) as seen:
        pass
    with pytest.raises(onnxport.DynamicShapesError, match="recorded no call") as info:
        seen.dynamic_shapes
    assert "test_observe.py" in info.value.where
    with pytest.raises(onnxport.DynamicShapesError, match="torch.nn.Module"):
        with onnxport.observe(torch.relu):
            pass


@pytest.mark.slow
def test_a_tiny_llama_with_a_cache_gets_batch_seq_past_and_the_mask_relation():
    transformers = pytest.importorskip("transformers")
    from transformers import DynamicCache

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(config).eval()

    def call(batch: int, seq: int, past: int) -> dict:
        cache = DynamicCache()
        for layer in range(config.num_hidden_layers):
            cache.update(torch.randn(batch, 2, past, 16), torch.randn(batch, 2, past, 16), layer)
        return dict(input_ids=torch.randint(3, 1000, (batch, seq)),
                    attention_mask=torch.ones(batch, past + seq, dtype=torch.long),
                    position_ids=torch.arange(past, past + seq).expand(batch, seq), cache=cache, use_cache=True)

    with torch.no_grad(), onnxport.observe(model) as seen:
        for batch, seq, past in [(1, 4, 2), (3, 1, 8), (2, 3, 5)]:
            model(**call(batch, seq, past))
    spec = seen.dynamic_shapes
    assert {"batch", "seq", "past"} <= all_names(spec)
    assert not any(re.fullmatch(r"s\d+", n) for n in all_names(spec))
    assert spec["input_ids"] == {0: "batch", 1: "seq"} and spec["cache"] == {0: "batch", 2: "past"}
    assert seen.relations == {spec["attention_mask"][1]: "past + seq"}
    # the call with no batch or seq of 1, its cache as it was before the call grew it
    assert seen.kwargs["input_ids"].shape == (2, 3) and seen.kwargs["cache"].get_seq_length() == 5
    result = onnxport.to_onnx(model, seen.args, kwargs=seen.kwargs, dynamic_shapes=spec, relations=seen.relations)
    inputs = {i.name: dims_of(i) for i in result.model_proto.graph.input}
    assert inputs["input_ids"] == ["batch", "seq"] and inputs["past_key_values.0.key"] == ["batch", 2, "past", 16]
    report = result.validate()
    assert report.ok, report


def test_generate_holds_one_copy_the_example_s_inputs_as_its_call_began():
    transformers = pytest.importorskip("transformers")

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(config).eval()
    began = []  # each call's input_ids and cache tensors, copied here as the call begins

    def copy_inputs(module, args, kwargs):
        cache = kwargs.get("cache")
        leaves = [t.clone() for layer in getattr(cache, "layers", []) for t in (layer.keys, layer.values)
                  if isinstance(t, torch.Tensor)]
        began.append((kwargs["input_ids"].clone(), leaves))

    held = []  # how many calls' inputs the observation holds after each call

    def count(module, args, output):
        held.append(sum(c.args is not None for c in seen.calls))

    ids = torch.randint(3, 100, (2, 5))
    hooks = [model.register_forward_pre_hook(copy_inputs, with_kwargs=True)]
    with torch.no_grad(), onnxport.observe(model) as seen:
        hooks.append(model.register_forward_hook(count))
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, min_new_tokens=12,
                       do_sample=False)
    for hook in hooks:
        hook.remove()
    assert len(seen.calls) == len(began) == 12 and held == [1] * 12
    # the example: the first call with the cache's tensors (the prompt's call has none), the others have seq 1
    first = next(i for i, (_, leaves) in enumerate(began) if leaves)
    assert seen.decision.example == first and seen.calls[first].args is not None
    ids_then, leaves_then = began[first]
    assert torch.equal(seen.kwargs["input_ids"], ids_then)
    cache = seen.kwargs["cache"]
    kept = [t for layer in cache.layers for t in (layer.keys, layer.values)]
    assert [t.shape for t in kept] == [t.shape for t in leaves_then]  # as the call began, before it grew them
    assert all(torch.equal(a, b) for a, b in zip(kept, leaves_then))
    assert cache.get_seq_length() == 5 < seen.sizes["past"][-1]


def test_the_example_kept_as_calls_come_is_the_one_decide_takes_from_the_calls_so_far():
    """``axes.Calls.better``, which keeps the calls' axes as they come, against ``axes.decide`` over every
    call so far (two candidates: the held call and the new one), on random calls whose axes share sizes,
    sit at 0 or 1, change rank or go missing."""
    import random

    from onnxport.observation.axes import Calls, decide

    rng = random.Random(0)
    for _ in range(300):
        names = [f"t{i}" for i in range(rng.randint(1, 5))]
        ranks = {n: rng.randint(0, 4) for n in names}
        roles = {n: [rng.choice(["batch", "seq", "past", "one", "three"]) for _ in range(4)] for n in names}
        calls, kept, held, expected = [], Calls(), None, None
        for _ in range(rng.randint(1, 10)):
            sizes = {"batch": rng.choice([1, 2, 3]), "seq": rng.choice([0, 1, 2, 5]), "past": rng.choice([2, 5, 7]),
                     "one": 1, "three": 3}
            call = {n: (n, tuple(sizes[r] for r in roles[n][:ranks[n] - (rng.random() < 0.1)]))
                    for n in names if rng.random() < 0.85}
            calls.append(call)
            new = kept.add(call)
            expected = new if expected is None else decide(calls, [expected, new], {}).example
            if held is not None and kept.better(held, new) == held:
                kept.forget(new)
            else:
                if held is not None:
                    kept.forget(held)
                held = new
            assert held == expected, calls
