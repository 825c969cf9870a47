"""The tiny trained models of ``benchmarks/trained.py`` (a CNN on synthetic shapes, a 2-layer Llama
on a short text), trained once per test process, and the float exports the quantization tests start from."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import torch

import onnxport

TRAINED = Path(__file__).resolve().parents[2] / "benchmarks" / "trained.py"


def trained():
    """The ``benchmarks/trained.py`` module."""
    if "_bench_trained" not in sys.modules:
        spec = importlib.util.spec_from_file_location("_bench_trained", TRAINED)
        module = importlib.util.module_from_spec(spec)
        sys.modules["_bench_trained"] = module
        spec.loader.exec_module(module)
    return sys.modules["_bench_trained"]


@functools.lru_cache(maxsize=None)
def cnn():
    """``(model, float export with dynamic batch, images, labels)``: held-out images the model
    classifies (of the synthetic shapes it was trained on)."""
    t = trained()
    model = t.shapes_cnn()
    images, labels = t.shapes_data(256, seed=7)
    result = onnxport.to_onnx(model, (images[:8],), dynamic_shapes={"x": {0: "batch"}})
    return model, result, images, labels


DECODER_DIMS = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
                "position_ids": {0: "batch", 1: "seq"}, "past_key_values": {0: "batch", 2: "past"}}


@functools.lru_cache(maxsize=None)
def llama():
    """``(model, decoder exported with its cache, prompts [2, 11])``."""
    from transformers import DynamicCache

    t = trained()
    model = t.text_llama(steps=200)
    past, seq = 5, 3
    ids = torch.tensor([t.encode(t.TEXT[:past + seq])] * 2)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=ids[:, :past], past_key_values=cache, use_cache=True)
    kwargs = dict(input_ids=ids[:, past:], attention_mask=torch.ones(2, past + seq, dtype=torch.int64),
                  position_ids=torch.arange(past, past + seq).expand(2, seq), past_key_values=cache, use_cache=True)
    result = onnxport.to_onnx(model, kwargs=kwargs, dynamic_shapes=DECODER_DIMS, relations={"total": "past + seq"})
    prompts = torch.tensor([t.encode("the quick b"), t.encode("all that gl")])
    return model, result, prompts


def text_windows(count: int = 3, length: int = 24, offset: int = 0):
    """Decoder input sets over the training text (an empty cache, ``length`` tokens, batch 2)."""
    t = trained()
    data = torch.tensor(t.encode(t.TEXT))
    model, result, _ = llama()
    cfg = model.config
    heads, head_dim = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    sets = []
    for i in range(count):
        start = offset + 17 * i
        ids = torch.stack([data[start + j * 40:start + j * 40 + length] for j in range(2)])
        empty = [torch.zeros(2, heads, 0, head_dim) for _ in range(2 * cfg.num_hidden_layers)]
        kwargs = dict(input_ids=ids, attention_mask=torch.ones(2, length, dtype=torch.int64),
                      position_ids=torch.arange(length).expand(2, length))
        sets.append(_with_cache(kwargs, empty, cfg))
    return sets


def _with_cache(kwargs: dict, tensors: list, cfg) -> tuple[tuple, dict]:
    from transformers import DynamicCache

    cache = DynamicCache(config=cfg)
    for layer in range(cfg.num_hidden_layers):
        cache.update(tensors[2 * layer], tensors[2 * layer + 1], layer)
    return (), {**kwargs, "past_key_values": cache, "use_cache": True}
