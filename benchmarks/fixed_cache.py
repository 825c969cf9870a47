"""Decode speed in onnxruntime (CPU, one thread) of opset 24's fixed-buffer cache against the default
export's growing cache: a small Llama-style decoder (8 layers, hidden 256, 8 heads, 2 key/value heads,
vocabulary 1024, untrained: speed does not depend on the weights), written by ``save_pretrained`` and
exported by ``export_pretrained`` at the default opset (20: the cache grows by ``Concat`` each step), at
opset 23 (the same cache, attention as the standard ``Attention``) and at opset 24
(``onnxport.pretrained.fixed_cache``: ``TensorScatter`` into buffers of ``max_length`` = prompt + tokens,
``Attention`` with ``nonpad_kv_seqlen``), and against the contrib form of ``target="genai-cpu"``
(``com.microsoft.GroupQueryAttention`` reading one buffer of ``max_length`` shared by past and present).

Prints decode ms/token of each form: each round decodes ``--tokens`` tokens greedily after a prompt of
``--prompt`` tokens, the first step (the prompt's) left out; after one warm-up of each form, rounds
alternate the forms (the order reversed every other round); the median over rounds. The fixed-buffer
model is run two ways: its ``present`` outputs fed back as new arrays, as the growing cache is, and
with I/O binding of each ``present`` to its ``past`` buffer (one ``OrtValue`` updated in place, as a
runtime keeping the buffer would); the genai-cpu model is run the second way. All decodings must choose
the same tokens.

Run: ``.venv/bin/python benchmarks/fixed_cache.py [--rounds 7] [--tokens 64] [--prompts 16,448]
[--markdown benchmarks/FIXED_CACHE.md]``.
"""

from __future__ import annotations

import argparse
import os
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


def measure(forms: dict, prompt: np.ndarray, tokens: int, rounds: int) -> dict[str, list[float]]:
    """Decode ms/token of each form over ``rounds`` alternated rounds (the order reversed every other
    round), after one warm-up of each; every form must choose the same tokens."""
    per_round: dict[str, list[float]] = {name: [] for name in forms}
    reference = None
    for sess, fixed, bind in forms.values():
        decode(sess, prompt, 8, fixed, bind)  # warm-up
    order = list(forms)
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            sess, fixed, bind = forms[name]
            chosen, times = decode(sess, prompt, tokens, fixed, bind)
            reference = reference or chosen
            assert chosen == reference, f"{name} chose other tokens"
            per_round[name].append(1000 * statistics.mean(times))
    return per_round


def table(results: dict[int, dict[str, list[float]]]) -> list[str]:
    """A markdown table: a row per form, a column per prompt length, median (min-max) ms/token and the
    median (min-max) over rounds of its ratio to the default export's time in the same round."""
    prompts = list(results)
    lines = ["| form | " + " | ".join(f"prompt {p}: ms/token (min-max) | ratio (min-max)" for p in prompts) + " |",
             "|---|" + "---|---|" * len(prompts)]
    for name in next(iter(results.values())):
        cells = []
        for p in prompts:
            values, base = results[p][name], next(iter(results[p].values()))
            paired = sorted(v / b for v, b in zip(values, base))  # the same round's default export
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f}) | "
                         f"{statistics.median(paired):.2f} ({paired[0]:.2f}-{paired[-1]:.2f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_markdown(path: str, lines: list[str], args: argparse.Namespace, seconds: float, load: float) -> None:
    """``path`` written atomically: the run's command, machine and table."""
    import platform
    import subprocess

    import onnxruntime

    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
               platform.machine())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    text = "\n".join([
        "# Decode speed of opset 24's fixed-buffer cache", "",
        f"One run of `python benchmarks/fixed_cache.py --rounds {args.rounds} --tokens {args.tokens} "
        f"--prompts {args.prompts} --markdown {args.markdown}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {seconds / 60:.1f} min, onnxport at {commit} "
        f"(method: the script's docstring). Machine: {cpu}, "
        f"{os.cpu_count()} cores, load average {load:.1f} at the end (shared: absolute times are inflated, the "
        f"forms are alternated within rounds); onnxruntime {onnxruntime.__version__}, torch {torch.__version__}, "
        "one intra-op thread.", "",
        f"Decode ms/token of {args.tokens} greedy tokens after the prompt (its own step left out), median over rounds; "
        "ratio: to the default export's time in the same round, median (min-max) over rounds. All forms chose "
        "the same tokens.", "",
        *lines, ""])
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompts", default="16", help="comma-separated prompt lengths, each measured in turn")
    parser.add_argument("--markdown", help="also write the table to this file (e.g. benchmarks/FIXED_CACHE.md)")
    args = parser.parse_args()
    from onnxport.pretrained import export_pretrained

    start = time.perf_counter()
    prompts = [int(p) for p in args.prompts.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        save_llama(f"{tmp}/llama")
        paths = {}
        for opset in (20, 23, 24):
            result = export_pretrained(f"{tmp}/llama", validate=False, generate=8, opset=opset)
            assert result.ok, result.generation
            result.save(f"{tmp}/opset{opset}")
            paths[opset] = f"{tmp}/opset{opset}/model.onnx"
        result = export_pretrained(f"{tmp}/llama", validate=False, generate=8, target="genai-cpu")
        assert result.ok, result.generation
        result.save(f"{tmp}/genai-cpu")
        forms = {"default export (opset 20, growing cache)": (session(paths[20]), False, False),
                 "opset 23 (Attention, growing cache)": (session(paths[23]), False, False),
                 "opset 24 fixed buffer, present fed back": (session(paths[24]), True, False),
                 "opset 24 fixed buffer, I/O bound in place": (session(paths[24]), True, True),
                 "genai-cpu (contrib GroupQueryAttention), I/O bound in place":
                     (session(f"{tmp}/genai-cpu/model.onnx"), True, True)}
        results = {}
        for n in prompts:
            prompt = np.random.default_rng(0).integers(3, 1024, (1, n)).astype(np.int64)
            results[n] = measure(forms, prompt, args.tokens, args.rounds)
    lines = table(results)
    print(f"decode ms/token, onnxruntime CPU 1 thread, Llama-style 8 layers hidden 256, {args.tokens} tokens, "
          f"median of {args.rounds} alternated rounds:")
    print("\n".join(lines))
    if args.markdown:
        write_markdown(args.markdown, lines, args, time.perf_counter() - start, os.getloadavg()[0])


if __name__ == "__main__":
    main()
