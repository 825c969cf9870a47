"""A Hugging Face decoder exported with its key/value cache, then decoded in plain onnxruntime.

A tiny ``LlamaForCausalLM`` (2 layers, width 64, vocab 1000, random weights: nothing is
downloaded) is called as transformers 5 names its arguments, ``model(input_ids=...,
attention_mask=..., position_ids=..., cache=DynamicCache(...), use_cache=True)``, and exported with
the cache as inputs (``past_key_values.<layer>.key`` / ``.value``, the names onnxruntime-genai and
Optimum give them) and outputs (``present.<layer>.key`` / ``.value``). The attention mask covers the
cached and the new tokens: ``total = past + seq``.

The script exports and validates the decoder, times ``torch.export`` alone and
``onnxport.to_onnx`` on the same call, then decodes 16 tokens greedily with a loop that uses nothing
but onnxruntime and NumPy, and compares the tokens with ``model.generate``.

Run::

    python examples/decoder_with_cache.py

It is also a target of the command line (``example_inputs()`` gives the call)::

    onnxport validate out/llama_with_cache.onnx examples/decoder_with_cache.py:build --generate 16
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
import torch

import onnxport

LAYERS, KV_HEADS, HEAD_DIM, VOCAB = 2, 2, 16, 1000


def build() -> torch.nn.Module:
    """The tiny Llama, seeded."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
                                   num_attention_heads=4, num_key_value_heads=KV_HEADS, max_position_embeddings=128,
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return transformers.LlamaForCausalLM(cfg).eval()


def example_inputs() -> dict:
    """One decoding step as generate() makes it: 3 new tokens after 5 cached ones, batch 2."""
    from transformers import DynamicCache

    past, seq = 5, 3
    cache = DynamicCache()
    for layer in range(LAYERS):
        cache.update(torch.randn(2, KV_HEADS, past, HEAD_DIM), torch.randn(2, KV_HEADS, past, HEAD_DIM), layer)
    kwargs = dict(input_ids=torch.randint(3, VOCAB, (2, seq)),
                  attention_mask=torch.ones(2, past + seq, dtype=torch.long),
                  position_ids=torch.arange(past, past + seq).expand(2, seq), cache=cache, use_cache=True)
    dynamic_shapes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
                      "position_ids": {0: "batch", 1: "seq"},
                      "cache": {0: "batch", 2: "past"}}  # one spec for every layer's key and value
    return {"kwargs": kwargs, "dynamic_shapes": dynamic_shapes, "relations": {"total": "past + seq"}}


def decode(path: str, prompt: np.ndarray, mask: np.ndarray, steps: int) -> np.ndarray:
    """Greedy decoding with the exported decoder and onnxruntime alone: the first step feeds the
    prompt with an empty cache, every later step the chosen token and the cache the step before
    returned (``present.*`` fed back as ``past_key_values.*``)."""
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()]
    batch = prompt.shape[0]
    feed = {f"past_key_values.{i}.{kv}": np.zeros((batch, KV_HEADS, 0, HEAD_DIM), np.float32)
            for i in range(LAYERS) for kv in ("key", "value")}
    positions = np.where(mask == 0, 0, mask.cumsum(-1) - 1)  # as generate(): padding at position 0
    tokens, chosen = prompt, []
    for _ in range(steps):
        feed.update(input_ids=tokens, attention_mask=mask, position_ids=positions[:, -tokens.shape[1]:])
        result = dict(zip(outputs, session.run(None, feed)))
        next_token = result["logits"][:, -1].argmax(-1)
        chosen.append(next_token)
        for name in feed:
            if name.startswith("past_key_values."):
                feed[name] = result["present." + name[len("past_key_values."):]]
        tokens = next_token[:, None].astype(np.int64)
        mask = np.concatenate([mask, np.ones((batch, 1), np.int64)], axis=1)
        positions = np.concatenate([positions, positions[:, -1:] + 1], axis=1)
    return np.stack(chosen, axis=1)


def main() -> int:
    from transformers import GenerationConfig

    model = build()
    call = example_inputs()
    result = onnxport.to_onnx(model, kwargs=call["kwargs"], dynamic_shapes=call["dynamic_shapes"],
                              relations=call["relations"])
    print(result)
    os.makedirs("out", exist_ok=True)
    path = result.save(os.path.join("out", "llama_with_cache.onnx"))
    report = result.validate()
    print(report)

    # timings after a first export of each: torch.export alone on the same call, then onnxport's whole
    # export, alternated over three rounds, the median and the spread of each
    auto = torch.export.Dim.AUTO
    spec = {"input_ids": {0: auto, 1: auto}, "attention_mask": {0: auto, 1: auto},
            "position_ids": {0: auto, 1: auto}, "cache": [{0: auto, 2: auto}] * (2 * LAYERS), "use_cache": None}

    def timed(run) -> float:
        start = time.perf_counter()
        run()
        return time.perf_counter() - start

    def torch_export():
        torch.export.export(model, (), dict(example_inputs()["kwargs"]), dynamic_shapes=spec)

    def onnxport_export():
        onnxport.to_onnx(model, kwargs=example_inputs()["kwargs"], dynamic_shapes=call["dynamic_shapes"],
                         relations=call["relations"])

    torch_export()  # warm-up (onnxport's first export ran above)
    times = {"alone": [], "ours": []}
    for _ in range(3):
        times["alone"].append(timed(torch_export))
        times["ours"].append(timed(onnxport_export))
    alone, ours = (statistics.median(times[k]) for k in ("alone", "ours"))
    spread = {k: f"{min(v):.2f}-{max(v):.2f}s" for k, v in times.items()}
    print(f"torch.export alone {alone:.2f}s ({spread['alone']}), onnxport.to_onnx {ours:.2f}s ({spread['ours']}): "
          f"{ours / alone:.2f}x, medians of 3 alternated rounds")

    prompt = np.array([[5, 17, 42, 99, 7, 3], [0, 0, 8, 64, 12, 31]], dtype=np.int64)
    mask = (np.arange(6) >= np.array([[0], [2]])).astype(np.int64)  # the second prompt is left-padded
    got = decode(path, prompt, mask, 16)
    greedy = GenerationConfig(max_new_tokens=16, do_sample=False, pad_token_id=0)  # no end-of-sequence stop
    expected = model.generate(input_ids=torch.from_numpy(prompt), attention_mask=torch.from_numpy(mask),
                              generation_config=greedy)[:, prompt.shape[1]:].numpy()
    print("onnxruntime:", got.tolist())
    print("generate:   ", expected.tolist())
    same = np.array_equal(got, expected)
    print("same tokens" if same else "DIFFERENT TOKENS")
    return 0 if same and report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
