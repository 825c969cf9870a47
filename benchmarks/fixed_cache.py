"""Decode speed in onnxruntime (CPU, one thread) of opset 24's fixed-buffer cache against the default
export's growing cache: a small Llama-style decoder (8 layers, hidden 256, 8 heads, 2 key/value heads,
vocabulary 1024, untrained: speed does not depend on the weights), written by ``save_pretrained`` and
exported by ``export_pretrained`` at the default opset (20: the cache grows by ``Concat`` each step), at
opset 23 (the same cache, attention as the standard ``Attention``) and at opset 24
(``onnxport.pretrained.fixed_cache``: ``TensorScatter`` into buffers of ``max_length`` = prompt + tokens,
``Attention`` with ``nonpad_kv_seqlen``).

Prints decode ms/token of each form: each round decodes ``--tokens`` tokens greedily after a prompt of
``--prompt`` tokens, the first step (the prompt's) left out; after one warm-up of each form, rounds
alternate the forms (the order reversed every other round); the median over rounds. The fixed-buffer
model is run two ways: its ``present`` outputs fed back as new arrays, as the growing cache is, and
with I/O binding of each ``present`` to its ``past`` buffer (one ``OrtValue`` updated in place, as a
runtime keeping the buffer would). Both decodings must choose the same tokens.

Run: ``.venv/bin/python benchmarks/fixed_cache.py [--rounds 7] [--tokens 64] [--prompt 16]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import torch


def save_llama(directory: str) -> None:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=768, num_hidden_layers=8,
                                   num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.LlamaForCausalLM(cfg).save_pretrained(directory)


def session(path: str):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = 1, 1, 3
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def decode(sess, prompt: np.ndarray, tokens: int, fixed: bool, bind: bool) -> tuple[list[int], list[float]]:
    """Greedy decoding of ``tokens`` tokens after ``prompt`` [1, n]; ``(tokens, seconds of each step
    after the first)``."""
    import onnxruntime as ort

    n = prompt.shape[1]
    inputs = {i.name: i for i in sess.get_inputs()}
    past = [name for name in inputs if name.startswith("past_key_values.")]
    length = n + tokens if fixed else 0
    cache = {name: np.zeros((1, inputs[name].shape[1], length, inputs[name].shape[3]), np.float32) for name in past}
    values = {name: ort.OrtValue.ortvalue_from_numpy(a) for name, a in cache.items()} if bind else None
    ids, chosen, times, seen = prompt, [], [], n
    for _ in range(tokens):
        feeds = {"input_ids": ids, "attention_mask": np.ones((1, seen), np.int64),
                 "position_ids": np.arange(seen - ids.shape[1], seen, dtype=np.int64)[None]}
        start = time.perf_counter()
        if bind:
            binding = sess.io_binding()
            for name, a in feeds.items():
                binding.bind_cpu_input(name, a)
            binding.bind_output("logits")  # first: get_outputs() lists the outputs in the order bound
            for name, v in values.items():
                binding.bind_ortvalue_input(name, v)
                binding.bind_ortvalue_output("present" + name[len("past_key_values"):], v)
            sess.run_with_iobinding(binding)
            logits = binding.get_outputs()[0].numpy()
        else:
            out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {**feeds, **cache})))
            cache = {name: out["present" + name[len("past_key_values"):]] for name in past}
            logits = out["logits"]
        times.append(time.perf_counter() - start)
        nxt = int(logits[0, -1].argmax())
        chosen.append(nxt)
        ids, seen = np.array([[nxt]], np.int64), seen + 1
    return chosen, times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=16)
    args = parser.parse_args()
    from onnxport.pretrained import export_pretrained

    with tempfile.TemporaryDirectory() as tmp:
        save_llama(f"{tmp}/llama")
        paths = {}
        for opset in (20, 23, 24):
            result = export_pretrained(f"{tmp}/llama", validate=False, generate=8, opset=opset)
            assert result.ok, result.generation
            result.save(f"{tmp}/opset{opset}")
            paths[opset] = f"{tmp}/opset{opset}/model.onnx"
        forms = {"default export (opset 20, growing cache)": (session(paths[20]), False, False),
                 "opset 23 (Attention, growing cache)": (session(paths[23]), False, False),
                 "opset 24 fixed buffer, present fed back": (session(paths[24]), True, False),
                 "opset 24 fixed buffer, I/O bound in place": (session(paths[24]), True, True)}
        prompt = np.random.default_rng(0).integers(3, 1024, (1, args.prompt)).astype(np.int64)
        per_round: dict[str, list[float]] = {name: [] for name in forms}
        reference = None
        for sess, fixed, bind in forms.values():
            decode(sess, prompt, 8, fixed, bind)  # warm-up
        order = list(forms)
        for r in range(args.rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                sess, fixed, bind = forms[name]
                chosen, times = decode(sess, prompt, args.tokens, fixed, bind)
                reference = reference or chosen
                assert chosen == reference, f"{name} chose other tokens"
                per_round[name].append(1000 * statistics.mean(times))
        print(f"decode ms/token, onnxruntime CPU 1 thread, Llama-style 8 layers hidden 256, prompt {args.prompt}, "
              f"{args.tokens} tokens, median of {args.rounds} alternated rounds:")
        for name, values in per_round.items():
            print(f"  {name}: {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()
